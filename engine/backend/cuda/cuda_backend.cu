// The CUDA backend. Weights are uploaded once in their stored type; small batches multiply through the
// weight kernels (decoding inside the kernel), larger ones through cuBLAS. Each step's layout goes up in one
// copy; decode steps of a batch size seen before are captured once as a CUDA graph and then replayed, which
// removes the launch gaps of a few hundred small kernels per token.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <compare>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/attention_kernels.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/elementwise_kernels.h"
#include "engine/backend/cuda/kernel_types.h"
#include "engine/backend/cuda/sampling_kernels.h"
#include "engine/backend/cuda/weight_kernels.h"
#include "engine/sampling/token_constraint.h"

namespace engine::backend {

namespace {

using quant::WeightType;

// A device allocation freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  void* get() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory (transfers from it are asynchronous and at full speed), freed on destruction.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  // At least `bytes`; the old contents are not kept.
  void* reserve(std::size_t bytes) {
    if (bytes > bytes_) {
      if (data_ != nullptr) CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      bytes_ = 0;
      CUDA_CHECK(cudaMallocHost(&data_, bytes));
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

struct DeviceWeight {
  WeightType type;
  std::size_t rows;
  std::size_t cols;
  DeviceBuffer bytes;
};

// A bump allocator over device chunks that are never freed: the same sequence of requests gets the same
// addresses step after step, which is what lets a captured graph be replayed.
class DeviceWorkspace {
 public:
  void reset() {
    chunk_ = 0;
    used_ = 0;
  }
  float* take(std::size_t count, bool capturing) {
    const std::size_t padded = (count + 63) / 64 * 64;  // 256-byte alignment
    while (chunk_ < chunks_.size() && used_ + padded > chunks_[chunk_].size() / sizeof(float)) {
      ++chunk_;
      used_ = 0;
    }
    if (chunk_ == chunks_.size()) {
      if (capturing) throw std::logic_error("cuda backend: the workspace grew while a step was being captured");
      chunks_.emplace_back(std::max<std::size_t>(padded, std::size_t{16} << 20) * sizeof(float));
      used_ = 0;
    }
    float* p = static_cast<float*>(chunks_[chunk_].get()) + used_;
    used_ += padded;
    return p;
  }

 private:
  std::deque<DeviceBuffer> chunks_;
  std::size_t chunk_ = 0;
  std::size_t used_ = 0;
};

// A graph per decode batch shape: the batch size and the context bucket (which fixes the attention's
// partitions).
struct GraphKey {
  std::size_t batch = 0;
  int context_bucket = 0;
  auto operator<=>(const GraphKey&) const = default;
};

// An instantiated graph and the number of backend kernel calls it was captured from (a replay must make the
// same calls, or the step is not the one captured).
class CudaGraph {
 public:
  CudaGraph(cudaGraph_t graph, std::size_t calls) : calls_(calls) {
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    CUDA_CHECK(status);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() { cudaGraphExecDestroy(exec_); }
  void launch(cudaStream_t stream) const { CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }
  std::size_t calls() const { return calls_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::size_t calls_ = 0;
};

// Graphs kept at most: continuous batching visits many batch sizes, and each graph holds host and device
// memory; shapes past this many run eagerly.
constexpr std::size_t kMaxGraphs = 512;
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
// Activations, cuBLAS's workspace and captured graphs come out of this much beside the KV cache.
constexpr std::size_t kActivationReserveBytes = std::size_t{2} << 30;

int next_pow2(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// The CUDA kernels rotate every layer with one RoPE and attend over every earlier position: a model whose
// layers differ (Gemma's local and global layers, SmolLM3's layers without RoPE, Gemma 2's soft-capped
// scores, gpt-oss's sinks) is refused at load, naming the first layer that asks for more.
void refuse_unimplemented_attention(const AttentionPlan& plan) {
  const auto refuse = [](const std::string& what) {
    throw std::invalid_argument("cuda backend: " + what +
                                ", which the CUDA kernels do not implement yet; run this model with --device cpu");
  };
  if (plan.ropes.size() != 1) {
    refuse("the layers rotate with " + std::to_string(plan.ropes.size()) + " different rotary embeddings");
  }
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& layer = plan.layers[i];
    const std::string name = "layer " + std::to_string(i);
    if (!layer.rope) refuse(name + " has no rotary embedding");
    if (layer.sliding_window != 0) {
      refuse(name + " attends over a sliding window of " + std::to_string(layer.sliding_window) + " positions");
    }
    if (layer.logit_softcap != 0) {
      refuse(name + " soft-caps its attention scores at " + std::to_string(layer.logit_softcap));
    }
    if (!layer.sinks.empty()) refuse(name + " has attention sinks");
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || options.device < 0 || options.device >= count) {
      cudaGetLastError();
      throw std::runtime_error(
          "--device cuda: GPU " + std::to_string(options.device) + " cannot be used (" +
          (status != cudaSuccess ? std::string(cudaGetErrorString(status))
                                 : std::to_string(count) + " CUDA device(s) visible") +
          "); check the driver with nvidia-smi and CUDA_VISIBLE_DEVICES, or run with --device cpu");
    }
    CUDA_CHECK(cudaSetDevice(options.device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
    multiprocessors_ = prop.multiProcessorCount;
    // Programmatic dependent launch exists from compute capability 9.0 (Hopper) on.
    queue_ = cuda::Stream(nullptr, options.overlap_kernels && prop.major >= 9);
    name_ = "cuda:" + std::to_string(options.device) + " (" + prop.name + ")";
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    queue_.stream = stream_;
    CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // No TF32: f32 checkpoints compute in full f32, as on the CPU.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    cublas_workspace_ = DeviceBuffer(kCublasWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.get(), kCublasWorkspaceBytes));
  }

  ~CudaBackend() override {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
    cudaStreamSynchronize(stream_);
    graphs_.clear();
    cublasDestroy(cublas_);
    cudaEventDestroy(upload_done_);
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return name_; }

  Weight add_weight(const WeightSource& source) override {
    if (source.expert) {
      throw std::invalid_argument(
          "cuda backend: mixture-of-experts models (Qwen3-MoE, Qwen2-MoE, Mixtral) are not supported on the GPU "
          "yet (the CPU backend runs them); serve this model with --device cpu");
    }
    if (!cuda::weight_type_supported(source.type)) {
      throw std::invalid_argument("cuda backend: " + std::string(quant::weight_type_name(source.type)) +
                                  " weights are not supported on the GPU yet (the CPU backend runs them); serve this "
                                  "model with --device cpu, or pick a checkpoint of another type (BF16 safetensors, "
                                  "a Q4_K_M or Q8_0 GGUF)");
    }
    const auto row_bytes = quant::row_bytes(source.type, source.cols);
    if (!row_bytes || *row_bytes * source.rows != source.bytes.size()) {
      throw std::invalid_argument("cuda backend: a " + std::string(quant::weight_type_name(source.type)) +
                                  " weight of " + std::to_string(source.rows) + " x " + std::to_string(source.cols) +
                                  " cannot be " + std::to_string(source.bytes.size()) + " bytes");
    }
    auto& w =
        weights_.emplace_back(DeviceWeight{source.type, source.rows, source.cols, DeviceBuffer(source.bytes.size())});
    CUDA_CHECK(cudaMemcpy(w.bytes.get(), source.bytes.data(), source.bytes.size(), cudaMemcpyHostToDevice));
    if (quant::block_elements(source.type) > 1 && source.rows > 1) {
      max_quantized_elements_ = std::max(max_quantized_elements_, source.rows * source.cols);
    }
    return Weight{source.type, source.rows, source.cols, &w};
  }

  std::optional<std::size_t> kv_cache_budget(double utilization) const override {
    std::size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double allowed = utilization * static_cast<double>(total_bytes);
    const double taken = static_cast<double>(total_bytes - free_bytes) + static_cast<double>(kActivationReserveBytes);
    if (allowed <= taken) return std::size_t{0};
    return static_cast<std::size_t>(allowed - taken);
  }

  using Backend::init_cache;
  void init_cache(const KvCacheShape& shape, const AttentionPlan& plan) override {
    check_attention_plan(plan, shape);
    refuse_unimplemented_attention(plan);
    const RopeSpec& rope = plan.ropes.front();
    if (shape.kv_type != WeightType::F32 && shape.kv_type != WeightType::BF16) {
      // The attention kernels read keys and values as f32 or bf16 only.
      throw std::invalid_argument("cuda backend: a " + std::string(quant::weight_type_name(shape.kv_type)) +
                                  " KV cache is not supported (the CUDA kernels store keys and values as F32 or "
                                  "BF16); use --kv-cache-dtype bfloat16, float32 or auto");
    }
    if (shape.num_blocks == 0 || shape.block_size == 0 || shape.num_kv_heads == 0) {
      throw std::invalid_argument("cuda backend: a KV cache of " + std::to_string(shape.num_blocks) + " blocks of " +
                                  std::to_string(shape.block_size) + " positions");
    }
    if (!cuda::attention_head_dim_supported(static_cast<int>(shape.head_dim))) {
      throw std::invalid_argument("cuda backend: head_dim " + std::to_string(shape.head_dim) +
                                  " is not one the attention kernels take (32, 64, 96, 128 or 256); run this model "
                                  "with --device cpu");
    }
    if (rope.inv_freq.size() * 2 != shape.head_dim) {
      throw std::invalid_argument("cuda backend: RoPE over " + std::to_string(rope.inv_freq.size() * 2) +
                                  " dimensions of heads of " + std::to_string(shape.head_dim) +
                                  " (partial rotary, Phi-4-mini's), which the CUDA kernels do not implement yet; run "
                                  "this model with --device cpu");
    }
    // Sliding windows are refused above, so one group holds every layer, each in its own slot.
    for (std::size_t layer = 0; layer < shape.num_layers; ++layer) {
      if (const auto place = shape.place(layer); place.group != 0 || place.slot != layer) {
        throw std::invalid_argument("cuda backend: a KV cache of " + std::to_string(shape.num_groups()) +
                                    " groups; the CUDA kernels keep every layer in one");
      }
    }
    shape_ = shape;
    rope_ = rope;
    cache_buffer_ = DeviceBuffer(shape.bytes_per_block() * shape.num_blocks);
    cache_ = cuda::KvCache{cache_buffer_.get(),
                           shape.kv_type == WeightType::BF16,
                           static_cast<int>(shape.num_layers),
                           static_cast<int>(shape.num_kv_heads),
                           static_cast<int>(shape.head_dim),
                           static_cast<int>(shape.block_size)};
    inv_freq_ = DeviceBuffer(rope.inv_freq.size() * sizeof(double));
    CUDA_CHECK(cudaMemcpy(inv_freq_.get(), rope.inv_freq.data(), rope.inv_freq.size() * sizeof(double),
                          cudaMemcpyHostToDevice));
  }
  const KvCacheShape& cache_shape() const override { return shape_; }

  void begin_step(const StepLayout& layout) override {
    if (cache_buffer_.get() == nullptr) throw std::logic_error("cuda backend: begin_step before init_cache");
    CUDA_CHECK(cudaSetDevice(options_.device));  // serverd steps on its own thread
    abandon_capture();
    mode_ = Mode::Eager;
    calls_ = 0;
    workspace_.reset();
    upload_layout(layout);

    const std::size_t tokens = layout.tokens.size();
    std::size_t longest_chunk = 0;
    int longest_context = 1;
    for (const auto& seq : layout.sequences) {
      longest_chunk = std::max(longest_chunk, seq.num_tokens);
      longest_context = std::max(longest_context, static_cast<int>(seq.start_position + seq.num_tokens));
    }
    decode_attention_ = longest_chunk <= 8;
    context_bucket_ = next_pow2(std::max(longest_context, 64));

    // Decode-only steps whose every token asks for logits can be graphs; the first of a shape runs eagerly
    // (sizing the workspace), the second is captured, the rest replay it.
    const bool decode_only = longest_chunk == 1 && layout.logit_rows.size() == tokens;
    bool identity_rows = decode_only;
    for (std::size_t i = 0; identity_rows && i < layout.logit_rows.size(); ++i) {
      identity_rows = layout.logit_rows[i] == i;
    }
    if (!options_.enforce_eager && identity_rows && tokens > 0) {
      key_ = GraphKey{tokens, context_bucket_};
      if (graphs_.contains(key_)) {
        mode_ = Mode::Replay;
      } else if (seen_.contains(key_) && graphs_.size() < kMaxGraphs) {
        mode_ = Mode::Capture;
        CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      } else {
        seen_.insert(key_);
      }
    }
  }

  Tensor alloc(std::size_t rows, std::size_t cols) override {
    return {workspace_.take(rows * cols, mode_ == Mode::Capture), rows, cols};
  }

  void embed(const Weight& table, Tensor out) override {
    const auto& w = device(table);
    if (largest_token_ >= 0 && static_cast<std::size_t>(largest_token_) >= w.rows) {
      throw std::out_of_range("token id " + std::to_string(largest_token_) + " is outside the model's vocabulary of " +
                              std::to_string(w.rows));
    }
    if (skip()) return;
    cuda::gather_weight_rows(w.type, w.bytes.get(), w.cols, meta_.tokens, static_cast<std::size_t>(meta_.num_tokens),
                             out.data, queue_);
  }

  void rms_norm(Tensor x, const Weight& weight, float eps, Tensor out) override {
    if (skip()) return;
    cuda::rms_norm(x.data, vector(weight), eps, out.data, x.rows * (x.cols / weight.cols),
                   static_cast<int>(weight.cols), queue_);
  }

  void matmul(Tensor x, const Weight& weight, const Weight* bias, Tensor out) override {
    if (skip()) return;
    project(x, device(weight), bias ? vector(*bias) : nullptr, out, false);
  }

  void matmul_add(Tensor in, const Weight& weight, Tensor /*product*/, Tensor x) override {
    if (skip()) return;
    project(in, device(weight), nullptr, x, true);
  }

  void matmul_group(Tensor x, std::span<const Projection> projections) override {
    if (!gemv_group(x, projections, {.x = x.data})) Backend::matmul_group(x, projections);
  }

  // Small batches: the GEMV normalises x as it reads it; no normed copy is written.
  void norm_matmul_group(Tensor x, const Weight& norm, float eps, Tensor normed,
                         std::span<const Projection> projections) override {
    if (!gemv_group(x, projections, {.x = x.data, .norm = vector(norm), .eps = eps})) {
      Backend::norm_matmul_group(x, norm, eps, normed, projections);
    }
  }

  // Small batches: silu(gate) * up is computed as the down projection reads it, and its products are added
  // into x as they are written.
  void swiglu_matmul_add(Tensor gate, Tensor up, const Weight& weight, Tensor product, Tensor x) override {
    if (gate.rows > cuda::kGemvMaxTokens) {
      Backend::swiglu_matmul_add(gate, up, weight, product, x);
      return;
    }
    if (skip()) return;
    const auto& w = device(weight);
    const cuda::GemvOutput output{w.bytes.get(), w.rows, nullptr, x.data, x.cols, true};
    cuda::weight_gemv_group(w.type, std::span(&output, 1), w.cols, {.x = gate.data, .up = up.data}, gate.rows, queue_);
  }

  // The kernels the CUDA backend does not have yet; init_cache refuses the models that need them
  // (refuse_unimplemented_attention: every such model has a layer whose attention the kernels lack).
  void scale(Tensor /*x*/, float /*factor*/) override {
    throw std::logic_error("cuda backend: scale (Gemma's embedding scale) is not implemented on CUDA");
  }
  void softcap(Tensor /*x*/, float /*cap*/) override {
    throw std::logic_error("cuda backend: softcap (Gemma 2's final logits) is not implemented on CUDA");
  }
  void gelu_tanh_mul(Tensor /*gate*/, Tensor /*up*/, Tensor /*out*/) override {
    throw std::logic_error("cuda backend: gelu_tanh_mul (GeGLU) is not implemented on CUDA");
  }

  void rope(std::size_t /*layer*/, Tensor q, Tensor k, std::size_t head_dim) override {
    if (skip()) return;
    norm_rope(q, k, nullptr, 0, nullptr, nullptr, 0.0f, head_dim);
  }

  void store_kv(std::size_t layer, Tensor k, Tensor v) override {
    if (skip()) return;
    cuda::store_kv(cache_, static_cast<int>(layer), k.data, v.data, meta_, queue_);
  }

  void qk_norm_rope_store(std::size_t layer, Tensor q, Tensor k, Tensor v, const Weight* q_norm, const Weight* k_norm,
                          float eps, std::size_t head_dim) override {
    if (skip()) return;
    norm_rope(q, k, v.data, layer, q_norm, k_norm, eps, head_dim);
  }

  void attention(std::size_t layer, Tensor q, float scale, Tensor out) override {
    const int q_heads = static_cast<int>(q.cols / shape_.head_dim);
    // The rope's factor on cos and sin, applied here as its square on q·k: the same arithmetic, since every
    // layer rotates whole heads with this one rope (init_cache refuses the others).
    scale *= static_cast<float>(rope_.attention_factor * rope_.attention_factor);
    // Enough partitions of the context to give every multiprocessor two blocks; powers of two, so that one
    // graph serves every context length of its bucket.
    // (A block serves a group of query heads that share a kv head.)
    const std::size_t blocks = std::max<std::size_t>(1, q.rows * shape_.num_kv_heads);
    const int wanted_splits = next_pow2(static_cast<int>(std::max<std::size_t>(1, 2 * multiprocessors_ / blocks)));
    const int partition = std::max(64, context_bucket_ / wanted_splits);
    const int splits = (context_bucket_ + partition - 1) / partition;
    float* partials = nullptr;
    unsigned* arrivals = nullptr;
    if (decode_attention_ && splits > 1) {
      partials = workspace_.take(q.rows * q_heads * splits * (shape_.head_dim + 2), mode_ == Mode::Capture);
      arrivals = attention_arrivals(q.rows * q_heads);
    }
    if (skip()) return;
    if (decode_attention_) {
      cuda::decode_attention(cache_, static_cast<int>(layer), q.data, q_heads, scale, out.data, splits, partition,
                             partials, arrivals, meta_, queue_);
    } else {
      cuda::prefill_attention(cache_, static_cast<int>(layer), q.data, q_heads, scale, out.data, meta_,
                              options_.tensor_core_attention, queue_);
    }
  }

  void silu_mul(Tensor gate, Tensor up, Tensor out) override {
    if (skip()) return;
    cuda::silu_mul(gate.data, up.data, out.data, gate.rows * gate.cols, queue_);
  }

  void add(Tensor x, Tensor y) override {
    if (skip()) return;
    cuda::add_inplace(x.data, y.data, x.rows * x.cols, queue_);
  }

  void gather_logit_rows(Tensor x, Tensor out) override {
    if (skip()) return;
    cuda::gather_logit_rows(x.data, x.cols, out.data, meta_, queue_);
  }

  void read(Tensor x, std::span<float> out) override {
    finish_graph();
    const std::size_t count = std::min(out.size(), x.rows * x.cols);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), x.data, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  bool samples_on_device() const override { return true; }
  int max_device_logprobs() const override { return cuda::kMaxTopLogprobs; }

  void sample(Tensor logits, std::span<const sampling::SamplingStep> steps,
              std::span<sampling::SampledToken> out) override {
    finish_graph();
    if (steps.size() != logits.rows || out.size() != logits.rows) {
      throw std::invalid_argument("cuda backend: " + std::to_string(steps.size()) + " sampling steps for " +
                                  std::to_string(logits.rows) + " logit rows");
    }
    const std::size_t mask_words = sampling::bitmask_words(logits.cols);
    std::size_t adjustments = 0;
    std::size_t masks = 0;
    for (const auto& step : steps) {
      adjustments += step.adjustments.size();
      if (step.allowed.empty()) continue;
      if (step.allowed.size() != mask_words) {
        throw std::invalid_argument("cuda backend: a token mask of " + std::to_string(step.allowed.size()) +
                                    " words for " + std::to_string(logits.cols) + " logits (" +
                                    std::to_string(mask_words) + " words)");
      }
      ++masks;
    }
    // One upload: the rows, then the adjustments, then the masks.
    const std::size_t rows_bytes = steps.size() * sizeof(cuda::SamplingRow);
    const std::size_t adjustments_bytes = adjustments * sizeof(cuda::Adjustment);
    const std::size_t upload_bytes = rows_bytes + adjustments_bytes + masks * mask_words * sizeof(std::uint32_t);
    auto* host = static_cast<std::byte*>(sampling_upload_.reserve(upload_bytes));
    auto* host_rows = reinterpret_cast<cuda::SamplingRow*>(host);
    auto* host_adjustments = reinterpret_cast<cuda::Adjustment*>(host + rows_bytes);
    auto* host_masks = reinterpret_cast<std::uint32_t*>(host + rows_bytes + adjustments_bytes);
    std::size_t at = 0;
    std::size_t mask_at = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto& step = steps[i];
      host_rows[i] = cuda::SamplingRow{step.params, static_cast<int>(at), static_cast<int>(step.adjustments.size())};
      host_rows[i].params.logprobs = std::min(step.params.logprobs, cuda::kMaxTopLogprobs);
      for (const auto& a : step.adjustments) host_adjustments[at++] = a;
      if (!step.allowed.empty()) {
        host_rows[i].mask_begin = static_cast<int>(mask_at);
        std::copy(step.allowed.begin(), step.allowed.end(), host_masks + mask_at);
        mask_at += mask_words;
      }
    }
    auto* device_upload = static_cast<std::byte*>(scratch(sampling_inputs_, upload_bytes));
    CUDA_CHECK(cudaMemcpyAsync(device_upload, host, upload_bytes, cudaMemcpyHostToDevice, stream_));
    auto* adjusted = static_cast<float*>(scratch(sampling_scratch_, logits.rows * logits.cols * sizeof(float)));
    auto* results =
        static_cast<cuda::SampleResult*>(scratch(sampling_results_, logits.rows * sizeof(cuda::SampleResult)));
    cuda::sample_rows(
        logits.data, adjusted, static_cast<int>(logits.cols), reinterpret_cast<const cuda::SamplingRow*>(device_upload),
        static_cast<int>(logits.rows), reinterpret_cast<const cuda::Adjustment*>(device_upload + rows_bytes),
        reinterpret_cast<const std::uint32_t*>(device_upload + rows_bytes + adjustments_bytes), results, stream_);
    auto* host_results =
        static_cast<cuda::SampleResult*>(sampling_download_.reserve(logits.rows * sizeof(cuda::SampleResult)));
    CUDA_CHECK(cudaMemcpyAsync(host_results, results, logits.rows * sizeof(cuda::SampleResult), cudaMemcpyDeviceToHost,
                               stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto& r = host_results[i];
      out[i].token = r.token;
      out[i].logprob = r.logprob;
      out[i].top.clear();
      for (int n = 0; n < std::min(steps[i].params.logprobs, cuda::kMaxTopLogprobs); ++n) {
        out[i].top.push_back({r.top_tokens[n], r.top_logprobs[n]});
      }
    }
  }

 private:
  enum class Mode { Eager, Capture, Replay };

  // Ends the step's graph at its logits: a captured graph is instantiated, and a captured or known one is
  // launched.
  void finish_graph() {
    if (mode_ == Mode::Capture) {
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      graphs_.emplace(std::piecewise_construct, std::forward_as_tuple(key_), std::forward_as_tuple(graph, calls_));
    }
    if (mode_ == Mode::Capture || mode_ == Mode::Replay) {
      const CudaGraph& graph = graphs_.at(key_);
      if (graph.calls() != calls_) {
        throw std::logic_error("cuda backend: a replayed step made " + std::to_string(calls_) +
                               " kernel calls, its graph " + std::to_string(graph.calls()));
      }
      graph.launch(stream_);
    }
    mode_ = Mode::Eager;
  }

  static const DeviceWeight& device(const Weight& w) { return *static_cast<const DeviceWeight*>(w.handle); }
  static const float* vector(const Weight& w) {
    const auto& d = device(w);
    if (d.type != WeightType::F32) {
      throw std::invalid_argument("cuda backend: a vector weight must be F32, not " +
                                  std::string(quant::weight_type_name(d.type)));
    }
    return static_cast<const float*>(d.bytes.get());
  }

  // out = x · wᵀ (+ bias), or with `accumulate` out += x · wᵀ (+ bias): the weight GEMV for up to
  // kGemvMaxTokens rows, cuBLAS past that.
  void project(Tensor x, const DeviceWeight& w, const float* bias, Tensor out, bool accumulate) {
    if (x.rows <= cuda::kGemvMaxTokens) {
      const cuda::GemvOutput output{w.bytes.get(), w.rows, bias, out.data, out.cols, accumulate};
      cuda::weight_gemv_group(w.type, std::span(&output, 1), w.cols, {.x = x.data}, x.rows, queue_);
      return;
    }
    const float one = 1.0f;
    const float beta = accumulate ? 1.0f : 0.0f;
    const int m = static_cast<int>(w.rows), n = static_cast<int>(x.rows), k = static_cast<int>(w.cols);
    // Column-major view: out (rows x tokens) = W (stored as cols x rows, transposed) · x (cols x tokens).
    if (w.type == WeightType::F32) {
      CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
                               static_cast<const float*>(w.bytes.get()), k, x.data, k, &beta, out.data, m));
    } else {
      const bool f16 = w.type == WeightType::F16;
      void* activations = scratch(activation_scratch_, x.rows * x.cols * 2);
      if (f16) {
        cuda::to_f16(x.data, activations, x.rows * x.cols, queue_);
      } else {
        cuda::to_bf16(x.data, activations, x.rows * x.cols, queue_);
      }
      const void* a = w.bytes.get();
      if (w.type != WeightType::BF16 && !f16) {
        // Quantized: decoded to bf16 for the tensor cores, the stored weight left as it is.
        void* decoded = scratch(weight_scratch_, max_quantized_elements_ * 2);
        cuda::dequantize_to_bf16(w.type, w.bytes.get(), 0, w.rows, w.cols, static_cast<__nv_bfloat16*>(decoded),
                                 queue_);
        a = decoded;
      }
      const cudaDataType_t type = f16 ? CUDA_R_16F : CUDA_R_16BF;
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, type, k, activations, type, k,
                                &beta, out.data, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    if (bias) cuda::add_bias(out.data, bias, x.rows, out.cols, queue_);
  }

  // Projections of one input over at most kGemvMaxTokens rows as weight GEMV launches, one per weight type
  // and width among them (a GGUF file may keep v in another type than q and k); false, having launched
  // nothing, for larger batches.
  bool gemv_group(Tensor x, std::span<const Projection> projections, const cuda::GemvInput& input) {
    if (projections.empty() || projections.size() > cuda::kMaxGemvOutputs || x.rows > cuda::kGemvMaxTokens) {
      return false;
    }
    if (skip()) return true;
    bool launched[cuda::kMaxGemvOutputs] = {};
    for (std::size_t i = 0; i < projections.size(); ++i) {
      if (launched[i]) continue;
      const auto& first = device(*projections[i].weight);
      cuda::GemvOutput outputs[cuda::kMaxGemvOutputs];
      std::size_t count = 0;
      for (std::size_t j = i; j < projections.size(); ++j) {
        const auto& p = projections[j];
        const auto& w = device(*p.weight);
        if (launched[j] || w.type != first.type || w.cols != first.cols) continue;
        outputs[count++] = {w.bytes.get(), w.rows, p.bias ? vector(*p.bias) : nullptr, p.out.data, p.out.cols};
        launched[j] = true;
      }
      cuda::weight_gemv_group(first.type, std::span(outputs, count), first.cols, input, x.rows, queue_);
    }
    return true;
  }

  // The q/k norms and rope, and with v the store of k and v into layer `layer`, in one kernel.
  void norm_rope(Tensor q, Tensor k, const float* v, std::size_t layer, const Weight* q_norm, const Weight* k_norm,
                 float eps, std::size_t head_dim) {
    cuda::qk_norm_rope(q.data, k.data, v, static_cast<int>(q.cols / head_dim), static_cast<int>(k.cols / head_dim),
                       static_cast<int>(head_dim), q_norm ? vector(*q_norm) : nullptr,
                       k_norm ? vector(*k_norm) : nullptr, eps, static_cast<const double*>(inv_freq_.get()),
                       rope_.interleaved, cache_, static_cast<int>(layer), meta_, queue_);
  }

  // Counts the call; true when it must not launch because a graph will replay it.
  bool skip() {
    ++calls_;
    return mode_ == Mode::Replay;
  }

  // A scratch buffer of at least `bytes`; growing it invalidates graphs that point at the old one.
  void* scratch(DeviceBuffer& buffer, std::size_t bytes) {
    if (buffer.size() < bytes) {
      if (mode_ == Mode::Capture) throw std::logic_error("cuda backend: a scratch buffer grew during capture");
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      buffer = DeviceBuffer(bytes);
      graphs_.clear();
    }
    return buffer.get();
  }

  // At least `count` counters for the decode attention's partitions, zero between its launches (each
  // launch leaves them as it found them); zeroed when the buffer is made.
  unsigned* attention_arrivals(std::size_t count) {
    const std::size_t bytes = count * sizeof(unsigned);
    if (arrivals_.size() < bytes) {
      void* fresh = scratch(arrivals_, bytes);
      CUDA_CHECK(cudaMemsetAsync(fresh, 0, bytes, stream_));
    }
    return static_cast<unsigned*>(arrivals_.get());
  }

  // A capture left open by a step that threw is closed and thrown away.
  void abandon_capture() {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();
    }
  }

  // Lays the step out in pinned memory and copies it up in one transfer.
  void upload_layout(const StepLayout& layout) {
    check_step_layout(layout, shape_, "cuda");
    const std::size_t tokens = layout.tokens.size();
    const std::size_t seqs = layout.sequences.size();
    std::size_t stride = 1;
    std::size_t tiles = 0;
    for (const auto& seq : layout.sequences) {
      stride = std::max(stride, seq.block_tables.front().size());
      tiles += (seq.num_tokens + cuda::kPrefillTile - 1) / cuda::kPrefillTile;
    }
    // The table stride only grows (in powers of two), so graphs keep their offsets.
    if (stride > table_stride_) {
      table_stride_ = static_cast<std::size_t>(next_pow2(static_cast<int>(stride)));
      graphs_.clear();
    }
    const std::size_t bytes =
        (4 * tokens + seqs * table_stride_ + layout.logit_rows.size() + 2 * tiles) * sizeof(std::int32_t);
    CUDA_CHECK(cudaEventSynchronize(upload_done_));  // the previous step's copy has read the pinned buffer
    if (bytes > meta_buffer_.size()) {
      const std::size_t capacity = std::max(bytes * 2, std::size_t{1} << 18);
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      meta_upload_.reserve(capacity);
      meta_buffer_ = DeviceBuffer(capacity);
      graphs_.clear();
    }
    auto* host = static_cast<std::int32_t*>(meta_upload_.reserve(bytes));
    auto* dev = static_cast<std::int32_t*>(meta_buffer_.get());
    std::size_t at = 0;
    auto section = [&](std::size_t count) {
      const std::size_t begin = at;
      at += count;
      return begin;
    };
    const std::size_t tokens_at = section(tokens), positions_at = section(tokens), slots_at = section(tokens),
                      seq_at = section(tokens), tables_at = section(seqs * table_stride_),
                      rows_at = section(layout.logit_rows.size()), tile_first_at = section(tiles),
                      tile_count_at = section(tiles);
    std::size_t t = 0, tile = 0;
    for (std::size_t s = 0; s < seqs; ++s) {
      const auto& seq = layout.sequences[s];
      for (std::size_t i = 0; i < seq.num_tokens; ++i, ++t) {
        const std::size_t p = seq.start_position + i;
        host[tokens_at + t] = layout.tokens[t];
        host[positions_at + t] = static_cast<std::int32_t>(p);
        host[slots_at + t] = static_cast<std::int32_t>(
            seq.block_tables.front()[p / shape_.block_size] * shape_.block_size + p % shape_.block_size);
        host[seq_at + t] = static_cast<std::int32_t>(s);
        if (i % cuda::kPrefillTile == 0) {
          host[tile_first_at + tile] = static_cast<std::int32_t>(t);
          host[tile_count_at + tile] =
              static_cast<std::int32_t>(std::min<std::size_t>(cuda::kPrefillTile, seq.num_tokens - i));
          ++tile;
        }
      }
      const auto table = seq.block_tables.front();
      std::copy(table.begin(), table.end(), host + tables_at + s * table_stride_);
    }
    for (std::size_t i = 0; i < layout.logit_rows.size(); ++i) {
      host[rows_at + i] = static_cast<std::int32_t>(layout.logit_rows[i]);
    }
    largest_token_ = -1;
    for (const auto id : layout.tokens) {
      if (id < 0) throw std::out_of_range("token id " + std::to_string(id) + " is negative");
      largest_token_ = std::max(largest_token_, id);
    }
    CUDA_CHECK(cudaMemcpyAsync(dev, host, at * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(upload_done_, stream_));
    meta_ = cuda::StepMeta{dev + tokens_at,
                           dev + positions_at,
                           dev + slots_at,
                           dev + seq_at,
                           dev + tables_at,
                           dev + rows_at,
                           dev + tile_first_at,
                           dev + tile_count_at,
                           static_cast<int>(tokens),
                           static_cast<int>(seqs),
                           static_cast<int>(layout.logit_rows.size()),
                           static_cast<int>(tiles),
                           static_cast<int>(table_stride_)};
  }

  CudaBackendOptions options_;
  std::string name_;
  int multiprocessors_ = 0;
  cudaStream_t stream_ = nullptr;
  cuda::Stream queue_{nullptr};  // stream_, overlapping kernels where the GPU can: what kernels launch on
  cudaEvent_t upload_done_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_workspace_;

  std::deque<DeviceWeight> weights_;
  std::size_t max_quantized_elements_ = 0;
  KvCacheShape shape_;
  RopeSpec rope_;
  DeviceBuffer cache_buffer_;
  cuda::KvCache cache_;
  DeviceBuffer inv_freq_;

  DeviceWorkspace workspace_;
  DeviceBuffer activation_scratch_;
  DeviceBuffer weight_scratch_;
  DeviceBuffer arrivals_;
  PinnedBuffer meta_upload_;
  DeviceBuffer meta_buffer_;
  PinnedBuffer sampling_upload_;
  PinnedBuffer sampling_download_;
  DeviceBuffer sampling_inputs_;
  DeviceBuffer sampling_scratch_;
  DeviceBuffer sampling_results_;
  std::size_t table_stride_ = 0;
  cuda::StepMeta meta_;

  std::int32_t largest_token_ = -1;
  bool decode_attention_ = true;
  int context_bucket_ = 64;

  Mode mode_ = Mode::Eager;
  GraphKey key_;
  std::size_t calls_ = 0;
  std::set<GraphKey> seen_;
  std::map<GraphKey, CudaGraph> graphs_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace engine::backend
