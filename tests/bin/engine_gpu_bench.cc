// engine-gpu-bench: the engine's speed on a GPU, every figure printed beside a physical bound measured in the
// same run: device-to-device copy bandwidth (the most a memory-bound decode can stream) and cuBLAS's bf16
// GEMM rate (the most a compute-bound prefill can reach). With --model it loads the model on the GPU and
// measures batch-1 decode (as GB/s of weights and KV read), output tokens/s at larger batches, prefill
// TFLOP/s and time to first token. A program that prints numbers, not a test; without a GPU it exits 2.
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/splitmix64.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_devices.h"
#include "engine/runtime/engine.h"
#include "engine/sampling/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;
using engine::runtime::Engine;
using engine::runtime::SequenceCache;
using engine::runtime::StepInput;

constexpr int kExitNoGpu = 2;
constexpr std::size_t kShortPrompt = 32;  // the batch-1 decode's prompt
constexpr std::size_t kDecodeWarmup = 8;  // untimed decode steps before batch 1's timed ones
constexpr std::size_t kBatchWarmup = 4;   // and before a larger batch's

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// ---- Physical bounds ------------------------------------------------------------------------------------

// Freed on every path out: a bound that throws must not keep gigabytes the engine then lacks.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class EventPair {
 public:
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

// GPU time of `work` on `stream` by CUDA events (no host launch gaps counted): `warmup` untimed runs, then
// the median of `reps` timed ones, in seconds.
template <typename Work>
double median_gpu_seconds(cudaStream_t stream, int warmup, int reps, Work&& work) {
  EventPair events;
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(events.start, stream));
    work();
    CUDA_CHECK(cudaEventRecord(events.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    times.push_back(ms * 1e-3);
  }
  return median(times);
}

struct CopyBound {
  std::size_t bytes = 0;  // one buffer
  double seconds = 0;
  double gb_per_s = 0;  // bytes read + bytes written
};

// The memory bandwidth a kernel can actually reach: one large device-to-device copy, counting what it reads
// and what it writes.
CopyBound measure_copy(std::size_t bytes, cudaStream_t stream) {
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // A smaller GPU gets a smaller copy; 64 MiB still exceeds the L2 cache (50 MB on H100 and H200), so the
  // figure stays one of DRAM.
  while (bytes > (std::size_t{64} << 20) && 2 * bytes + (std::size_t{512} << 20) > free_bytes) bytes /= 2;
  DeviceBuffer src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemsetAsync(src.get(), 0x5a, bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, bytes, stream));
  const double s = median_gpu_seconds(stream, 2, 9, [&] {
    CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return {bytes, s, 2.0 * static_cast<double>(bytes) / s / 1e9};
}

// Uniform values in [-1, 1) as bf16 (the top half of an f32's bits). Random, not zero: tensor cores draw
// less power on zeros and can clock higher than real data lets them.
void fill_random_bf16(std::vector<std::uint16_t>& out, std::uint64_t seed) {
  base::SplitMix64 random(seed);
  for (auto& value : out) {
    const auto draw = static_cast<std::int32_t>(random.next() >> 40);  // 24 bits
    const float f = static_cast<float>(draw - (1 << 23)) / static_cast<float>(1 << 23);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    value = static_cast<std::uint16_t>(bits >> 16);
  }
}

class CublasHandle {
 public:
  CublasHandle() { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

struct GemmBound {
  std::size_t n = 0;
  double seconds = 0;
  double tflops = 0;
  int cublas_version = 0;
};

// The dense bf16 rate the GPU reaches in practice: cuBLAS n×n×n, bf16 inputs, f32 accumulation and f32
// output (the engine's activations are f32). Transposed A as in the engine's x·Wᵀ.
GemmBound measure_gemm(std::size_t n, cudaStream_t stream) {
  const std::size_t elements = n * n;
  std::vector<std::uint16_t> host(elements);
  DeviceBuffer a(elements * 2), b(elements * 2), c(elements * 4);
  fill_random_bf16(host, 1);
  CUDA_CHECK(cudaMemcpy(a.get(), host.data(), elements * 2, cudaMemcpyHostToDevice));
  fill_random_bf16(host, 2);
  CUDA_CHECK(cudaMemcpy(b.get(), host.data(), elements * 2, cudaMemcpyHostToDevice));
  CublasHandle handle;
  CUBLAS_CHECK(cublasSetStream(handle.get(), stream));
  GemmBound bound;
  bound.n = n;
  CUBLAS_CHECK(cublasGetVersion(handle.get(), &bound.cublas_version));
  const float alpha = 1.0f, beta = 0.0f;
  const int dim = static_cast<int>(n);
  bound.seconds = median_gpu_seconds(stream, 3, 10, [&] {
    CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, dim, dim, dim, &alpha, a.get(), CUDA_R_16BF, dim,
                              b.get(), CUDA_R_16BF, dim, &beta, c.get(), CUDA_R_32F, dim, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  });
  const double nd = static_cast<double>(n);
  bound.tflops = 2.0 * nd * nd * nd / bound.seconds / 1e12;
  return bound;
}

// ---- The model -----------------------------------------------------------------------------------------

// What a token costs the model: bytes a decode step reads, multiply-adds it computes.
struct ModelCost {
  double weight_bytes = 0;           // read once per decode step: every matrix and norm, lm_head (a tied embedding
                                     // counted here, once), plus the one embedding row looked up
  double embed_row_bytes = 0;        // part of weight_bytes
  double kv_bytes_per_position = 0;  // every layer's keys and values for one cached position
  double matmul_params = 0;          // the layers' q, k, v, o, gate, up, down
  double lm_head_params = 0;
  double attention_width = 0;  // layers × query heads × head_dim: the multiply-adds per (query, key) pair / 2
};

ModelCost model_cost(const Engine& engine) {
  const auto& c = engine.config();
  const auto& w = engine.checkpoint().weights();
  ModelCost cost;
  cost.embed_row_bytes = static_cast<double>(w.embed.bytes.size()) / static_cast<double>(w.embed.rows);
  // Checkpoint::weight_bytes counts lm_head (the embedding itself when tied) but not the embedding lookup.
  cost.weight_bytes = static_cast<double>(engine.checkpoint().weight_bytes()) + cost.embed_row_bytes;
  // The engine's own cache blocks (f32 or bf16 keys and values), per position.
  const auto& cache = engine.cache_shape();
  cost.kv_bytes_per_position = static_cast<double>(cache.bytes_per_block()) / static_cast<double>(cache.block_size);
  for (const auto& l : w.layers) {
    for (const auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      cost.matmul_params += static_cast<double>(m->rows) * static_cast<double>(m->cols);
    }
  }
  cost.lm_head_params = static_cast<double>(w.lm_head.rows) * static_cast<double>(w.lm_head.cols);
  cost.attention_width = static_cast<double>(c.num_layers * c.num_heads * c.head_dim);
  return cost;
}

// FLOPs of `tokens` new tokens of one sequence after `cached` positions, with logits for `logit_rows` of them.
double sequence_flops(const ModelCost& m, std::size_t cached, std::size_t tokens, std::size_t logit_rows) {
  // Causal attention: the token at position p scores p + 1 keys (QKᵀ) and sums as many values (PV).
  const double t = static_cast<double>(tokens);
  const double pairs = t * static_cast<double>(cached) + t * (t + 1) / 2;
  return 2 * m.matmul_params * t + 2 * m.lm_head_params * static_cast<double>(logit_rows) +
         4 * m.attention_width * pairs;
}

// Pseudo-random ids below the vocabulary: with random weights any ids are as representative as text, and
// the bench needs no tokenizer.
std::vector<std::int32_t> random_tokens(std::size_t count, std::uint64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> ids(count);
  base::SplitMix64 random(seed);
  for (auto& id : ids) id = static_cast<std::int32_t>(random.next() % vocab);
  return ids;
}

// Sequences that give their blocks back on every path out, so one failed measurement leaves the pool whole.
class Sequences {
 public:
  Sequences(Engine& engine, std::size_t count) : engine_(engine), caches_(count) {}
  ~Sequences() {
    for (auto& cache : caches_) engine_.release(cache);
  }
  Sequences(const Sequences&) = delete;
  Sequences& operator=(const Sequences&) = delete;

  SequenceCache& operator[](std::size_t i) { return caches_[i]; }
  std::size_t size() const { return caches_.size(); }
  void reserve_all(std::size_t positions) {
    for (auto& cache : caches_) {
      if (!engine_.reserve(cache, positions)) {
        throw std::runtime_error(std::to_string(caches_.size()) + " sequences of " + std::to_string(positions) +
                                 " positions do not fit in the KV cache (" +
                                 std::to_string(engine_.kv_cache().num_blocks()) +
                                 " blocks); raise --gpu-memory-utilization or lower the batch");
      }
    }
  }

 private:
  Engine& engine_;
  std::vector<SequenceCache> caches_;
};

struct DecodeResult {
  std::size_t batch = 0;
  std::size_t steps = 0;
  double step_seconds = 0;  // inside Engine::step_and_sample: the forward pass and the sampling
  double kv_bytes = 0;      // keys and values attention read over the timed steps
  double flops = 0;
  double tokens() const { return static_cast<double>(batch * steps); }
  double tokens_per_s() const { return tokens() / step_seconds; }
};

// `batch` sequences decoding together: each prompt prefilled first (whole prompts, as many per step as fit
// in `token_budget` tokens), `warmup` untimed decode steps (a GPU backend may capture a graph per batch
// size on first use), then `steps` timed greedy decode steps. With `profile_last`, the last step runs
// between cudaProfilerStart and cudaProfilerStop (for a profiler started with profiling off).
DecodeResult run_decode(Engine& engine, const ModelCost& cost, std::size_t batch, std::size_t prompt_len,
                        std::size_t warmup, std::size_t steps, std::size_t token_budget, bool profile_last = false) {
  const std::size_t vocab = engine.config().vocab_size;
  Sequences seqs(engine, batch);
  seqs.reserve_all(prompt_len + warmup + steps);
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t b = 0; b < batch; ++b) prompts.push_back(random_tokens(prompt_len, vocab, 1000 + b));

  // Greedy samplers: serverd's path, the tokens chosen where the logits are.
  engine::sampling::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<std::unique_ptr<engine::sampling::SequenceSampler>> samplers;
  std::vector<engine::sampling::SequenceSampler*> sampler_ptrs;
  for (std::size_t b = 0; b < batch; ++b) {
    samplers.push_back(std::make_unique<engine::sampling::SequenceSampler>(greedy, prompts[b]));
    sampler_ptrs.push_back(samplers.back().get());
  }
  std::vector<std::int32_t> next(batch);
  std::vector<engine::sampling::SampledToken> sampled;
  std::vector<StepInput> inputs;
  for (std::size_t first = 0; first < batch;) {
    inputs.clear();
    std::size_t end = first;
    for (std::size_t tokens = 0; end < batch && (inputs.empty() || tokens + prompt_len <= token_budget); ++end) {
      inputs.push_back({&seqs[end], prompts[end]});
      tokens += prompt_len;
    }
    engine.step_and_sample(inputs, std::span(sampler_ptrs).subspan(first, end - first), sampled);
    for (std::size_t b = first; b < end; ++b) next[b] = sampled[b - first].token;
    first = end;
  }

  // Each input reads its token from next[b], which every step overwrites in place.
  inputs.clear();
  for (std::size_t b = 0; b < batch; ++b) inputs.push_back({&seqs[b], std::span(&next[b], 1)});
  DecodeResult result{batch, steps};
  for (std::size_t s = 0; s < warmup + steps; ++s) {
    const bool timed = s >= warmup;
    if (timed) {
      for (std::size_t b = 0; b < batch; ++b) {
        result.kv_bytes += static_cast<double>(seqs[b].cached + 1) * cost.kv_bytes_per_position;
        result.flops += sequence_flops(cost, seqs[b].cached, 1, 1);
      }
    }
    const bool profiled = profile_last && s + 1 == warmup + steps;
    if (profiled) CUDA_CHECK(cudaProfilerStart());
    const auto start = Clock::now();
    engine.step_and_sample(inputs, sampler_ptrs, sampled);
    if (timed) result.step_seconds += seconds_since(start);
    if (profiled) CUDA_CHECK(cudaProfilerStop());
    for (std::size_t b = 0; b < batch; ++b) next[b] = sampled[b].token;
  }
  return result;
}

struct PrefillResult {
  std::size_t sequences = 0;
  std::size_t tokens_each = 0;
  double seconds = 0;  // median wall time of the step, from the call to the logits returned
  double min_seconds = 0, max_seconds = 0;
  double flops = 0;
  double tokens() const { return static_cast<double>(sequences * tokens_each); }
};

// One step prefilling `sequences` fresh prompts of `tokens_each` tokens, logits of each one's last token
// only: one untimed step, then the median of `reps`, fresh sequences each time.
PrefillResult run_prefill(Engine& engine, const ModelCost& cost, std::size_t sequences, std::size_t tokens_each,
                          int reps) {
  PrefillResult result{sequences, tokens_each};
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t b = 0; b < sequences; ++b) {
    prompts.push_back(random_tokens(tokens_each, engine.config().vocab_size, 5000 + b));
    result.flops += sequence_flops(cost, 0, tokens_each, 1);
  }
  std::vector<double> times;
  std::vector<float> logits;
  for (int rep = -1; rep < reps; ++rep) {
    Sequences seqs(engine, sequences);
    seqs.reserve_all(tokens_each);
    std::vector<StepInput> inputs;
    for (std::size_t b = 0; b < sequences; ++b) inputs.push_back({&seqs[b], prompts[b]});
    const auto start = Clock::now();
    engine.step(inputs, logits);
    if (rep >= 0) times.push_back(seconds_since(start));
  }
  result.seconds = median(times);
  result.min_seconds = *std::min_element(times.begin(), times.end());
  result.max_seconds = *std::max_element(times.begin(), times.end());
  return result;
}

// ---- Output --------------------------------------------------------------------------------------------

struct Row {
  std::string name, value, bound, share;
};

__attribute__((format(printf, 1, 2))) std::string format(const char* fmt, ...) {
  char buffer[256];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

void print_table(const std::vector<Row>& rows) {
  std::size_t w0 = 0, w1 = 0, w2 = 0;
  for (const auto& r : rows) {
    w0 = std::max(w0, r.name.size());
    w1 = std::max(w1, r.value.size());
    w2 = std::max(w2, r.bound.size());
  }
  for (const auto& r : rows) {
    std::printf("| %-*s | %-*s | %-*s | %s |\n", static_cast<int>(w0), r.name.c_str(), static_cast<int>(w1),
                r.value.c_str(), static_cast<int>(w2), r.bound.c_str(), r.share.c_str());
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buffer;
}

std::vector<std::size_t> parse_batches(const std::string& list) {
  std::vector<std::size_t> batches;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    std::size_t used = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value == 0) {
      throw base::UsageError("--batches " + list + ": \"" + item + "\" is not a positive whole number");
    }
    batches.push_back(value);
    pos = comma + 1;
  }
  return batches;
}

struct Options {
  std::string model;
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  bool no_overlap_kernels = false;
  bool profile_decode_step = false;
  std::uint64_t cuda_device = 0;
  std::uint64_t max_model_len = 4096;
  std::uint64_t copy_mib = 4096;
  std::uint64_t gemm_n = 8192;
  std::uint64_t decode_steps = 128;
  std::string batches = "64,256";
  std::uint64_t batch_prompt = 128;
  std::uint64_t batch_steps = 64;
  std::uint64_t prefill_chunk = 8192;
  std::uint64_t prefill_seqs = 8;
  std::uint64_t prefill_len = 512;
  std::uint64_t ttft_len = 512;
};

// Measures the model and appends its rows to the table; throws when the model cannot be loaded or run.
void bench_model(const Options& o, const CopyBound& copy, const GemmBound& gemm, std::vector<Row>& table) {
  engine::runtime::EngineOptions options;
  options.device = engine::runtime::Device::Cuda;
  options.cuda_device = static_cast<int>(o.cuda_device);
  options.gpu_memory_utilization = o.gpu_memory_utilization;
  options.enforce_eager = o.enforce_eager;
  options.overlap_kernels = !o.no_overlap_kernels;
  // Never shorter than the longest sequence measured here.
  options.max_model_len = std::max({static_cast<std::size_t>(o.max_model_len), static_cast<std::size_t>(o.prefill_len),
                                    static_cast<std::size_t>(o.ttft_len),
                                    kShortPrompt + kDecodeWarmup + static_cast<std::size_t>(o.decode_steps),
                                    static_cast<std::size_t>(o.batch_prompt + kBatchWarmup + o.batch_steps)});
  const auto load_start = Clock::now();
  auto engine = Engine::load(o.model, options);
  const double load_s = seconds_since(load_start);
  const ModelCost cost = model_cost(*engine);
  if (o.profile_decode_step) {
    const auto d = run_decode(*engine, cost, 1, kShortPrompt, kDecodeWarmup, 1, o.prefill_chunk, true);
    std::printf("profiled         one batch-1 decode step after a %zu-token prompt and %zu warm-up steps: %.3f ms\n",
                kShortPrompt, kDecodeWarmup, 1e3 * d.step_seconds);
    return;
  }
  const double bandwidth = copy.gb_per_s * 1e9;  // bytes/s
  const double peak = gemm.tflops * 1e12;        // FLOP/s
  std::printf("\nmodel            %s on %s (%s), loaded in %.2f s\n", o.model.c_str(),
              std::string(engine->device_name()).c_str(), o.enforce_eager ? "eager" : "CUDA graphs allowed", load_s);
  std::printf(
      "per decode token %.3f GB of weights (tied embedding once, as lm_head; + one %.0f-byte embedding "
      "row), %.1f KB of KV per cached position\n",
      cost.weight_bytes / 1e9, cost.embed_row_bytes, cost.kv_bytes_per_position / 1e3);
  std::printf("matmul params    %.1f M in the layers + %.1f M lm_head; KV cache %zu blocks of %zu positions\n",
              cost.matmul_params / 1e6, cost.lm_head_params / 1e6, engine->kv_cache().num_blocks(),
              engine->block_size());
  std::printf("(greedy tokens chosen by Engine::step_and_sample, as serverd chooses them)\n");

  // Batch-1 decode: memory-bound, so its figure is the bytes it must read per second.
  const auto d1 = run_decode(*engine, cost, 1, kShortPrompt, kDecodeWarmup, o.decode_steps, o.prefill_chunk);
  const double d1_bytes = cost.weight_bytes * static_cast<double>(d1.steps) + d1.kv_bytes;
  const double d1_rate = d1_bytes / d1.step_seconds;
  std::printf(
      "decode batch 1   %.1f tokens/s (%.3f ms/token); "
      "%.0f GB/s of weights + KV = %.1f%% of copy bandwidth (%llu steps after a %zu-token prompt)\n",
      d1.tokens_per_s(), 1e3 * d1.step_seconds / d1.tokens(), d1_rate / 1e9, 100 * d1_rate / bandwidth,
      static_cast<unsigned long long>(o.decode_steps), kShortPrompt);
  table.push_back({"decode batch 1, tokens/s", format("%.1f", d1.tokens_per_s()),
                   format("%.1f (copy bandwidth / bytes per token)", bandwidth / (d1_bytes / d1.tokens())),
                   format("%.1f%%", 100 * d1_rate / bandwidth)});
  table.push_back({"decode batch 1, weights + KV read", format("%.0f GB/s", d1_rate / 1e9),
                   format("%.0f GB/s copy", copy.gb_per_s),
                   format("%.1f%% (target >= 60%%)", 100 * d1_rate / bandwidth)});

  // Larger batches: the weights are read once per step for all sequences; the bound is the roofline of the
  // step (its bytes at copy bandwidth or its FLOPs at the cuBLAS rate, whichever takes longer).
  for (const std::size_t batch : parse_batches(o.batches)) {
    const auto d = run_decode(*engine, cost, batch, o.batch_prompt, kBatchWarmup, o.batch_steps, o.prefill_chunk);
    const double bytes = cost.weight_bytes * static_cast<double>(d.steps) + d.kv_bytes;
    const double roofline = d.tokens() / std::max(bytes / bandwidth, d.flops / peak);
    std::printf(
        "decode batch %-4zu%.0f output tokens/s (%.2f ms/step); "
        "%.0f GB/s, %.1f TFLOP/s (%llu steps after %llu-token prompts)\n",
        batch, d.tokens_per_s(), 1e3 * d.step_seconds / static_cast<double>(d.steps), bytes / d.step_seconds / 1e9,
        d.flops / d.step_seconds / 1e12, static_cast<unsigned long long>(o.batch_steps),
        static_cast<unsigned long long>(o.batch_prompt));
    table.push_back({format("decode batch %zu, output tokens/s", batch), format("%.0f", d.tokens_per_s()),
                     format("%.0f (roofline: copy bandwidth, cuBLAS peak)", roofline),
                     format("%.1f%%", 100 * d.tokens_per_s() / roofline)});
  }

  // Prefill: compute-bound, so its figure is FLOP/s beside the cuBLAS rate.
  const auto p = run_prefill(*engine, cost, o.prefill_seqs, o.prefill_len, 3);
  const double p_tflops = p.flops / p.seconds / 1e12;
  std::printf(
      "prefill          %zu x %zu tokens in one step: %.0f tokens/s, %.1f TFLOP/s (%.2f TFLOP in %.2f ms, "
      "median of 3, %.2f-%.2f ms)\n",
      p.sequences, p.tokens_each, p.tokens() / p.seconds, p_tflops, p.flops / 1e12, 1e3 * p.seconds,
      1e3 * p.min_seconds, 1e3 * p.max_seconds);
  table.push_back({format("prefill %zu x %zu, tokens/s", p.sequences, p.tokens_each),
                   format("%.0f", p.tokens() / p.seconds), "", ""});
  table.push_back({format("prefill %zu x %zu, TFLOP/s", p.sequences, p.tokens_each), format("%.1f", p_tflops),
                   format("%.1f cuBLAS bf16", gemm.tflops), format("%.1f%%", 100 * p_tflops / gemm.tflops)});

  // Time to first token: one prompt on an idle engine, from the step call to its logits on the host.
  const auto t = run_prefill(*engine, cost, 1, o.ttft_len, 5);
  const double ideal = std::max(t.flops / peak, cost.weight_bytes / bandwidth);
  std::printf("first token      %zu-token prompt: %.2f ms median of 5 (%.2f-%.2f ms), %.1f TFLOP/s\n", t.tokens_each,
              1e3 * t.seconds, 1e3 * t.min_seconds, 1e3 * t.max_seconds, t.flops / t.seconds / 1e12);
  table.push_back({format("time to first token, %zu tokens", t.tokens_each), format("%.2f ms", 1e3 * t.seconds),
                   format("%.2f ms (roofline)", 1e3 * ideal), format("%.1f%%", 100 * ideal / t.seconds)});
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  base::FlagParser flags(
      "usage: engine-gpu-bench [--model PATH] [--enforce-eager] [--gpu-memory-utilization X] [--cuda-device N] ...");
  flags.add_string("model", "PATH", "model directory or .gguf file (Qwen3-0.6B-shaped); without it, bounds only",
                   &o.model);
  flags.add_double("gpu-memory-utilization", "X", "share of the GPU's memory the engine may take (default 0.9)",
                   &o.gpu_memory_utilization, 0.05, 1.0);
  flags.add_switch("enforce-eager", "run every step kernel by kernel (no CUDA graphs)", &o.enforce_eager);
  flags.add_switch("profile-decode-step",
                   "only load the model and run one warmed-up batch-1 decode step between cudaProfilerStart and "
                   "cudaProfilerStop (for ncu --profile-from-start off); no bounds, no table",
                   &o.profile_decode_step);
  flags.add_switch("no-overlap-kernels", "launch each kernel after the one before finishes (no programmatic launch)",
                   &o.no_overlap_kernels);
  flags.add_uint("cuda-device", "N", "GPU index (default 0)", &o.cuda_device, 0, 1023);
  flags.add_uint("max-model-len", "N", "the engine's max_model_len (default 4096)", &o.max_model_len, 1);
  flags.add_uint("copy-mib", "N", "bytes of each buffer of the bandwidth copy, MiB (default 4096)", &o.copy_mib, 64,
                 1 << 20);
  flags.add_uint("gemm-n", "N", "size of the cuBLAS n x n x n GEMM (default 8192)", &o.gemm_n, 256, 32768);
  flags.add_uint("decode-steps", "N", "timed batch-1 decode steps (default 128)", &o.decode_steps, 1);
  flags.add_string("batches", "B,B", "batch sizes for output tokens/s (default 64,256)", &o.batches);
  flags.add_uint("batch-prompt", "N", "prompt tokens of each batched sequence (default 128)", &o.batch_prompt, 1);
  flags.add_uint("batch-steps", "N", "timed decode steps per batch size (default 64)", &o.batch_steps, 1);
  flags.add_uint("prefill-chunk", "N", "most prompt tokens per step when prefilling a batch (default 8192)",
                 &o.prefill_chunk, 1);
  flags.add_uint("prefill-seqs", "N", "sequences in the prefill step (default 8)", &o.prefill_seqs, 1);
  flags.add_uint("prefill-len", "N", "tokens of each sequence in the prefill step (default 512)", &o.prefill_len, 1);
  flags.add_uint("ttft-len", "N", "prompt tokens for time to first token (default 512)", &o.ttft_len, 1);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    parse_batches(o.batches);  // refuse a bad list before minutes of measuring
    if (o.profile_decode_step && o.model.empty()) {
      throw base::UsageError("--profile-decode-step needs --model");
    }
  } catch (const base::UsageError& e) {
    std::cerr << "engine-gpu-bench: " << e.what() << "\n" << flags.help();
    return 2;
  }

  // Every figure here is a GPU's; without one there is nothing to measure.
  const auto gpus = engine::cuda::list_cuda_devices();
  if (gpus.devices.empty()) {
    std::cerr << "engine-gpu-bench: no CUDA GPU to measure (" << gpus.unavailable_reason
              << "); run it on a machine with an NVIDIA GPU and its driver\n";
    return kExitNoGpu;
  }
  if (o.cuda_device >= gpus.devices.size()) {
    std::cerr << "engine-gpu-bench: --cuda-device " << o.cuda_device << ": this machine has " << gpus.devices.size()
              << " CUDA GPU(s)\n";
    return kExitNoGpu;
  }

  try {
    const int device = static_cast<int>(o.cuda_device);
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    int driver = 0, runtime = 0, mem_clock_khz = 0, bus_bits = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    // Nominal DRAM bandwidth (double data rate × bus width), for scale beside the measured copy.
    const bool have_nominal =
        cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess;
    cudaGetLastError();  // an attribute a driver does not report must not linger as a sticky error
    const double nominal_gb_s = have_nominal ? 2.0 * mem_clock_khz * 1e3 * bus_bits / 8 / 1e9 : 0;
    const std::string date = utc_now();

    std::printf("engine-gpu-bench %s\n", date.c_str());
    std::printf("gpu              %s (sm_%d%d, %d SMs, %.1f GiB), driver %d.%d, runtime %d.%d\n", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30),
                driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);

    if (o.profile_decode_step) {
      std::vector<Row> unused;
      bench_model(o, CopyBound{}, GemmBound{}, unused);
      return 0;
    }
    CopyBound copy;
    GemmBound gemm;
    {
      // Freed before the engine loads: it sizes its KV cache from the memory it finds free.
      Stream stream;
      copy = measure_copy(static_cast<std::size_t>(o.copy_mib) << 20, stream.get());
      std::printf("copy bandwidth   %.0f GB/s (device-to-device copy of %.0f MiB, read + write, median of 9)%s\n",
                  copy.gb_per_s, static_cast<double>(copy.bytes) / (1 << 20),
                  have_nominal ? format("; nominal %.0f GB/s", nominal_gb_s).c_str() : "");
      gemm = measure_gemm(o.gemm_n, stream.get());
      std::printf(
          "cuBLAS bf16      %.1f TFLOP/s (%zu^3 GEMM, f32 accumulate and output, random data, median of 10: "
          "%.3f ms; cuBLAS %d)\n",
          gemm.tflops, gemm.n, 1e3 * gemm.seconds, gemm.cublas_version);
    }

    std::vector<Row> table = {
        {"measurement", "result", "bound (this run)", "share of bound"},
        {"---", "---", "---", "---"},
        {"memory bandwidth, D2D copy", format("%.0f GB/s", copy.gb_per_s),
         have_nominal ? format("%.0f GB/s nominal", nominal_gb_s) : "",
         have_nominal ? format("%.1f%%", 100 * copy.gb_per_s / nominal_gb_s) : ""},
        {format("cuBLAS bf16 GEMM %zu^3", gemm.n), format("%.1f TFLOP/s", gemm.tflops), "", ""},
    };
    std::string model_error;
    if (!o.model.empty()) {
      try {
        bench_model(o, copy, gemm, table);
      } catch (const std::exception& e) {
        model_error = e.what();
      }
    }

    std::printf("\n%s, %s, %s%s%s\n\n", prop.name, date.c_str(), o.model.empty() ? "no model" : o.model.c_str(),
                o.enforce_eager ? ", --enforce-eager" : "", o.no_overlap_kernels ? ", --no-overlap-kernels" : "");
    print_table(table);
    if (!model_error.empty()) {
      std::fprintf(stderr, "engine-gpu-bench: the model was not measured: %s\n", model_error.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "engine-gpu-bench: " << e.what() << '\n';
    return 1;
  }
}
