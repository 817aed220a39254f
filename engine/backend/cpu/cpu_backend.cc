// The CPU backend: weights used in place from the mapped checkpoint, the KV cache in host memory (f32, f16
// or bf16, laid out as engine/cpu/attention.h reads it), every kernel spread over a thread pool. Each row
// (token, head) is computed the same way whatever else is in the step, so a sequence's results do not
// depend on its batch.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cpu/activation.h"
#include "engine/cpu/attention.h"
#include "engine/cpu/huge_pages.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"

namespace engine::backend {

namespace {

// 64-byte aligned float storage (SIMD loads, no false sharing between rows handed to threads).
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;

AlignedFloats aligned_floats(std::size_t count) {
  const std::size_t bytes = std::max<std::size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return AlignedFloats(p);
}

// A bump allocator over chunks kept from step to step, so steady decoding allocates nothing.
class Workspace {
 public:
  void reset() {
    chunk_ = 0;
    used_ = 0;
  }
  float* take(std::size_t count) {
    const std::size_t padded = (count + 15) / 16 * 16;
    while (chunk_ < chunks_.size() && used_ + padded > sizes_[chunk_]) {
      ++chunk_;
      used_ = 0;
    }
    if (chunk_ == chunks_.size()) {
      const std::size_t size = std::max<std::size_t>(padded, 1u << 20);
      chunks_.push_back(aligned_floats(size));
      sizes_.push_back(size);
      used_ = 0;
    }
    float* p = chunks_[chunk_].get() + used_;
    used_ += padded;
    return p;
  }

 private:
  std::vector<AlignedFloats> chunks_;
  std::vector<std::size_t> sizes_;
  std::size_t chunk_ = 0;
  std::size_t used_ = 0;
};

// Drops the whole pages of `bytes`, which lie in a read-only file mapping, from the process's resident memory;
// pages touched again (an embedding lookup) are read back from the file. They are first advised against huge
// pages: where the page cache holds the file in 2 MiB folios, each row looked up would otherwise map a whole
// 2 MiB page (Qwen3-0.6B Q8_0, whose tied embedding is also the repacked output matrix, after a 2,048-token
// prompt: peak RSS 1,364 MB, 1,221 MB with the advice). Only advice: where the kernel declines, the pages stay
// resident and nothing else changes.
void release_file_pages(std::span<const std::byte> bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(bytes.data());
  const std::uintptr_t begin = (start + page - 1) / page * page, end = (start + bytes.size()) / page * page;
  if (end > begin) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_NOHUGEPAGE);
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

// Where each of the step's tokens sits: its sequence, its position and its KV cache slot.
struct TokenPlace {
  std::size_t sequence = 0;
  std::size_t position = 0;
  std::size_t offset = 0;  // position within its block
};

constexpr std::size_t kMaxBlockSize = 128;

// The most routed rows (token, expert) the mixture's experts run together: every one of a decode batch's (32
// tokens of 8 experts), in two hand-offs to the pool, where a prefill's experts, each with many rows, run a few
// at a time and keep the buffers small.
constexpr std::size_t kExpertGroupRows = 256;

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::size_t threads, std::span<const int> cpus)
      : pool_(cpus.empty() ? cpu::ThreadPool(threads) : cpu::ThreadPool(cpus)) {}

  std::string_view name() const override { return "cpu"; }

  Weight add_weight(const WeightSource& source) override {
    const auto row_bytes = quant::row_bytes(source.type, source.cols);
    if (!row_bytes || *row_bytes * source.rows != source.bytes.size()) {
      throw std::invalid_argument("cpu backend: a " + std::string(quant::weight_type_name(source.type)) +
                                  " weight of " + std::to_string(source.rows) + " x " + std::to_string(source.cols) +
                                  " cannot be " + std::to_string(source.bytes.size()) + " bytes");
    }
    auto& m = weights_.emplace_back(
        cpu::WeightMatrix{source.type, source.bytes.data(), source.rows, source.cols, nullptr, source.scales});
    if (source.lookup_only || source.expert) return Weight{source.type, source.rows, source.cols, &m};
    if (auto repacked = cpu::repack_weights(pool_, m, &arena_)) {
      m.repacked = repacked.get();
      repacked_.push_back(std::move(repacked));
      // The products read the repacking only, so the stored copy need not stay resident (docs/cpu-kernels.md).
      if (source.file_mapped) release_file_pages(source.bytes);
    }
    return Weight{source.type, source.rows, source.cols, &m};
  }

  using Backend::init_cache;
  void init_cache(const KvCacheShape& shape, const AttentionPlan& plan) override {
    if (shape.num_blocks == 0 || shape.block_size == 0 || shape.block_size > kMaxBlockSize) {
      throw std::invalid_argument("cpu backend: a KV cache of " + std::to_string(shape.num_blocks) + " blocks of " +
                                  std::to_string(shape.block_size) + " positions (1 to " +
                                  std::to_string(kMaxBlockSize) + " per block)");
    }
    // A block's layers are its group's: the cache kernels see a group's slot where the model has a layer.
    layout_ = {shape.kv_type, shape.layers_per_block(), shape.num_kv_heads, shape.head_dim, shape.block_size};
    try {
      cpu::check_kv_cache_layout(layout_);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("cpu backend: ") + e.what());
    }
    check_attention_plan(plan, shape);
    shape_ = shape;
    plan_ = plan;
    layer_places_.clear();
    for (std::size_t layer = 0; layer < shape.num_layers; ++layer) layer_places_.push_back(shape.place(layer));
    // Pages are only touched as blocks are first written: a large cache costs memory as it fills (2 MiB at a
    // time where it is in huge pages, about one block of a model's layers).
    cache_ = cpu::allocate_huge_pages(layout_.block_bytes() * shape.num_blocks);
    if (shape.has_null_block())
      std::memset(cache_.get() + kNullBlock * layout_.block_bytes(), 0, layout_.block_bytes());
  }
  const KvCacheShape& cache_shape() const override { return shape_; }

  void begin_step(const StepLayout& layout) override {
    if (!cache_) throw std::logic_error("cpu backend: begin_step before init_cache");
    check_step_layout(layout, shape_, "cpu");
    workspace_.reset();
    places_.clear();
    tokens_ = layout.tokens;
    logit_rows_ = layout.logit_rows;
    for (std::size_t s = 0; s < layout.sequences.size(); ++s) {
      const auto& seq = layout.sequences[s];
      for (std::size_t p = seq.start_position; p < seq.start_position + seq.num_tokens; ++p) {
        places_.push_back({s, p, p % shape_.block_size});
      }
    }
    // Per group: each token's block, and the sequences as its attention reads them.
    sequences_ = layout.sequences;
    token_blocks_.resize(shape_.num_groups());
    attention_sequences_.resize(shape_.num_groups());
    for (std::size_t g = 0; g < shape_.num_groups(); ++g) {
      token_blocks_[g].clear();
      attention_sequences_[g].clear();
      for (const auto& place : places_) {
        token_blocks_[g].push_back(
            static_cast<std::size_t>(sequences_[place.sequence].block_tables[g][place.position / shape_.block_size]));
      }
      std::size_t first_row = 0;
      for (const auto& seq : sequences_) {
        attention_sequences_[g].push_back({first_row, seq.start_position, seq.num_tokens, seq.block_tables[g]});
        first_row += seq.num_tokens;
      }
    }
    // cos/sin of every token's angles for each of the model's rotary embeddings, computed in double so long
    // positions keep their precision, times the rope's attention factor (vLLM's and transformers' form).
    angles_.clear();
    for (const auto& rope : plan_.ropes) {
      const std::size_t half = rope.inv_freq.size();
      RopeAngles& a = angles_.emplace_back(
          RopeAngles{workspace_.take(places_.size() * half), workspace_.take(places_.size() * half)});
      for (std::size_t t = 0; t < places_.size(); ++t) {
        for (std::size_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(places_[t].position) * rope.inv_freq[i];
          a.cos[t * half + i] = static_cast<float>(std::cos(angle) * rope.attention_factor);
          a.sin[t * half + i] = static_cast<float>(std::sin(angle) * rope.attention_factor);
        }
      }
    }
  }

  Tensor alloc(std::size_t rows, std::size_t cols) override { return {workspace_.take(rows * cols), rows, cols}; }

  void embed(const Weight& table, Tensor out) override {
    const auto& m = matrix(table);
    for (std::size_t t = 0; t < tokens_.size(); ++t) {
      const auto id = tokens_[t];
      if (id < 0 || static_cast<std::size_t>(id) >= m.rows) {
        throw std::out_of_range("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                                std::to_string(m.rows));
      }
      cpu::dequantize_rows(m, static_cast<std::size_t>(id), 1, out.data + t * out.cols);
    }
  }

  void rms_norm(Tensor x, const Weight& weight, float eps, Tensor out) override {
    const std::size_t width = weight.cols;
    const float* w = vector(weight);
    const std::size_t segments = x.rows * (x.cols / width);
    pool_.parallel_for(segments, grain(width), [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) {
        const float* in = x.data + s * width;
        float* o = out.data + s * width;
        double sum = 0;
        for (std::size_t i = 0; i < width; ++i) sum += static_cast<double>(in[i]) * in[i];
        const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(width) + eps));
        for (std::size_t i = 0; i < width; ++i) o[i] = in[i] * inv * w[i];
      }
    });
  }

  void matmul(Tensor x, const Weight& w, const Weight* bias, Tensor out) override {
    cpu::matmul(pool_, matrix(w), x.data, x.rows, out.data, bias ? vector(*bias) : nullptr);
  }

  void matmul_group(Tensor x, std::span<const Projection> projections) override {
    std::vector<cpu::MatmulTarget> targets;
    targets.reserve(projections.size());
    for (const auto& p : projections) {
      targets.push_back({&matrix(*p.weight), p.out.data, p.bias ? vector(*p.bias) : nullptr});
    }
    cpu::matmul_group(pool_, targets, x.data, x.rows);
  }

  void scale(Tensor x, float factor) override {
    const std::size_t n = x.rows * x.cols;
    for (std::size_t i = 0; i < n; ++i) x.data[i] *= factor;
  }

  void softcap(Tensor x, float cap) override {
    const std::size_t n = x.rows * x.cols;
    for (std::size_t i = 0; i < n; ++i) x.data[i] = cap * std::tanh(x.data[i] / cap);
  }

  void rope(std::size_t layer, Tensor q, Tensor k, std::size_t head_dim) override {
    const auto which = plan_.layers.at(layer).rope;
    if (!which) return;
    // The first 2 half dimensions of each head rotate (all of them but for partial rotary); the rest pass.
    const std::size_t half = plan_.ropes[*which].inv_freq.size();
    const bool interleaved = plan_.ropes[*which].interleaved;
    const RopeAngles& angles = angles_[*which];
    auto rotate = [&](Tensor x) {
      const std::size_t heads = x.cols / head_dim;
      pool_.parallel_for(x.rows, grain(x.cols), [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) {
          const float* c = angles.cos + t * half;
          const float* s = angles.sin + t * half;
          for (std::size_t h = 0; h < heads; ++h) {
            float* v = x.data + t * x.cols + h * head_dim;
            for (std::size_t i = 0; i < half; ++i) {
              const std::size_t a = interleaved ? 2 * i : i;
              const std::size_t b = interleaved ? 2 * i + 1 : i + half;
              const float x0 = v[a];
              const float x1 = v[b];
              v[a] = x0 * c[i] - x1 * s[i];
              v[b] = x1 * c[i] + x0 * s[i];
            }
          }
        }
      });
    };
    rotate(q);
    rotate(k);
  }

  void store_kv(std::size_t layer, Tensor k, Tensor v) override {
    const std::size_t block_bytes = layout_.block_bytes();
    const auto [group, slot] = layer_places_.at(layer);
    const auto& blocks = token_blocks_[group];
    pool_.parallel_for(places_.size(), grain(2 * k.cols), [&](std::size_t begin, std::size_t end) {
      for (std::size_t t = begin; t < end; ++t) {
        cpu::store_kv(layout_, cache_.get() + blocks[t] * block_bytes, slot, places_[t].offset, k.data + t * k.cols,
                      v.data + t * v.cols);
      }
    });
  }

  void attention(std::size_t layer, Tensor q, float scale, Tensor out) override {
    const auto [group, slot] = layer_places_.at(layer);
    cpu::attention(pool_, {.layout = &layout_,
                           .cache = cache_.get(),
                           .layer = slot,
                           .q = q.data,
                           .out = out.data,
                           .num_q_heads = q.cols / shape_.head_dim,
                           .scale = scale,
                           .sequences = attention_sequences_[group],
                           .window = plan_.layers.at(layer).sliding_window,
                           .softcap = plan_.layers.at(layer).logit_softcap,
                           .sinks = plan_.layers.at(layer).sinks});
  }

  void silu_mul(Tensor gate, Tensor up, Tensor out) override {
    cpu::silu_mul(pool_, gate.data, up.data, gate.rows * gate.cols, out.data);
  }

  void gelu_tanh_mul(Tensor gate, Tensor up, Tensor out) override {
    cpu::gelu_tanh_mul(pool_, gate.data, up.data, gate.rows * gate.cols, out.data);
  }

  void moe_add(Tensor h, const MoeBlock& block, Tensor x) override {
    const std::size_t tokens = h.rows, hidden = h.cols;
    const std::size_t num_experts = block.router->rows;
    if (block.experts.size() != num_experts || block.top_k == 0 || block.top_k > num_experts) {
      throw std::invalid_argument("cpu backend: a mixture of " + std::to_string(block.experts.size()) +
                                  " experts, a router over " + std::to_string(num_experts) + ", top " +
                                  std::to_string(block.top_k));
    }
    const Tensor scores = alloc(tokens, num_experts);
    matmul(h, *block.router, block.router_bias, scores);
    // Each expert's tokens, in token order, with their weights; the shared expert's last, every token's.
    expert_tokens_.resize(num_experts + 1);
    for (auto& list : expert_tokens_) list.clear();
    std::vector<ExpertChoice> choices(block.top_k);
    for (std::size_t t = 0; t < tokens; ++t) {
      route_token(std::span<const float>(scores.data + t * num_experts, num_experts), block.top_k,
                  block.normalize_top_k, choices);
      for (const auto& c : choices) expert_tokens_[c.expert].push_back({t, c.weight});
    }
    if (block.shared_expert != nullptr) {
      const float* gate = vector(*block.shared_expert_gate);
      for (std::size_t t = 0; t < tokens; ++t) {
        const float* row = h.data + t * hidden;
        double dot = 0;
        for (std::size_t i = 0; i < hidden; ++i) dot += static_cast<double>(row[i]) * gate[i];
        expert_tokens_[num_experts].push_back({t, static_cast<float>(1.0 / (1.0 + std::exp(-dot)))});
      }
    }
    const Tensor sum = alloc(tokens, hidden);
    std::fill(sum.data, sum.data + tokens * hidden, 0.0f);
    // The experts in ascending order (the shared one last), in groups of up to kExpertGroupRows routed rows: a
    // decode step's in one group, whose gate and up products take one hand-off to the pool and its down products
    // another. A token's sum is added up in the same order whatever else is in the step.
    std::vector<std::size_t> group;
    std::size_t group_rows = 0;
    for (std::size_t e = 0; e <= num_experts; ++e) {
      const std::size_t rows = expert_tokens_[e].size();
      if (rows == 0) continue;
      if (group_rows > 0 && group_rows + rows > kExpertGroupRows) {
        run_experts(h, block, group, sum);
        group.clear();
        group_rows = 0;
      }
      group.push_back(e);
      group_rows += rows;
    }
    if (!group.empty()) run_experts(h, block, group, sum);
    add(x, sum);
  }

  void add(Tensor x, Tensor y) override {
    const std::size_t n = x.rows * x.cols;
    for (std::size_t i = 0; i < n; ++i) x.data[i] += y.data[i];
  }

  void gather_logit_rows(Tensor x, Tensor out) override {
    for (std::size_t i = 0; i < logit_rows_.size(); ++i) {
      std::memcpy(out.data + i * out.cols, x.data + logit_rows_[i] * x.cols, x.cols * sizeof(float));
    }
  }

  void read(Tensor x, std::span<float> out) override {
    std::memcpy(out.data(), x.data, std::min(out.size(), x.rows * x.cols) * sizeof(float));
  }

 private:
  // The experts of `group` (indices into expert_tokens_; num_experts: the shared expert) over the rows routed
  // to them: each expert's tokens gathered, silu(in . gateᵀ) * (in . upᵀ) (gpt-oss: with biases, clamped) through
  // down, added into `sum` times each token's weight.
  void run_experts(Tensor h, const MoeBlock& block, std::span<const std::size_t> group, Tensor sum) {
    const std::size_t hidden = h.cols;
    const auto expert_of = [&](std::size_t e) -> const ExpertWeights& {
      return e < block.experts.size() ? block.experts[e] : *block.shared_expert;
    };
    // Where each expert's rows start in the group's buffers: inputs and outputs hidden wide, gate and up the
    // expert's width.
    std::size_t rows = 0, inter_floats = 0;
    for (const auto e : group) {
      rows += expert_tokens_[e].size();
      inter_floats += expert_tokens_[e].size() * expert_of(e).gate->rows;
    }
    const std::size_t needed = 2 * rows * hidden + 2 * inter_floats;
    if (needed > moe_scratch_floats_) {
      moe_scratch_ = aligned_floats(needed);
      moe_scratch_floats_ = needed;
    }
    float* const in = moe_scratch_.get();
    float* const out = in + rows * hidden;
    float* const gate = out + rows * hidden;
    float* const up = gate + inter_floats;
    std::vector<cpu::MatmulJob> gate_up, down;
    std::size_t row = 0, inter_at = 0;
    for (const auto e : group) {
      const auto& routed = expert_tokens_[e];
      const ExpertWeights& expert = expert_of(e);
      for (std::size_t j = 0; j < routed.size(); ++j) {
        std::memcpy(in + (row + j) * hidden, h.data + routed[j].first * hidden, hidden * sizeof(float));
      }
      const auto bias = [](const Weight* b) { return b != nullptr ? vector(*b) : nullptr; };
      gate_up.push_back(
          {&matrix(*expert.gate), in + row * hidden, routed.size(), gate + inter_at, bias(expert.gate_bias)});
      gate_up.push_back({&matrix(*expert.up), in + row * hidden, routed.size(), up + inter_at, bias(expert.up_bias)});
      down.push_back(
          {&matrix(*expert.down), gate + inter_at, routed.size(), out + row * hidden, bias(expert.down_bias)});
      row += routed.size();
      inter_at += routed.size() * expert.gate->rows;
    }
    cpu::matmul_batch(pool_, gate_up);
    if (block.clamped_swiglu) {
      cpu::clamped_swiglu_mul(pool_, gate, up, inter_floats, block.clamped_swiglu->alpha, block.clamped_swiglu->limit,
                              gate);
    } else {
      cpu::silu_mul(pool_, gate, up, inter_floats, gate);
    }
    cpu::matmul_batch(pool_, down);
    row = 0;
    for (const auto e : group) {
      for (const auto& [token, weight] : expert_tokens_[e]) {
        float* to = sum.data + token * hidden;
        const float* from = out + row++ * hidden;
        for (std::size_t i = 0; i < hidden; ++i) to[i] += weight * from[i];
      }
    }
  }

  static const cpu::WeightMatrix& matrix(const Weight& w) { return *static_cast<const cpu::WeightMatrix*>(w.handle); }
  static const float* vector(const Weight& w) { return reinterpret_cast<const float*>(matrix(w).data); }
  // Rows per chunk so each chunk does at least ~16k values of work.
  static std::size_t grain(std::size_t width) {
    return std::max<std::size_t>(1, (1u << 14) / std::max<std::size_t>(width, 1));
  }

  cpu::ThreadPool pool_;
  std::deque<cpu::WeightMatrix> weights_;
  cpu::HugePagesArena arena_;  // the repackings' bytes
  std::vector<std::unique_ptr<cpu::RepackedWeights>> repacked_;
  // One rotary embedding's cos and sin for the step's tokens, token after token (head_dim / 2 each).
  struct RopeAngles {
    float* cos;
    float* sin;
  };

  KvCacheShape shape_;
  AttentionPlan plan_;
  cpu::KvCacheLayout layout_;
  cpu::HugePagesBuffer cache_;
  Workspace workspace_;
  std::vector<KvCacheShape::LayerPlace> layer_places_;  // by layer: its group and slot
  std::vector<TokenPlace> places_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::size_t> logit_rows_;
  std::vector<StepSequence> sequences_;
  std::vector<std::vector<std::size_t>> token_blocks_;                    // by group, the step's tokens' blocks
  std::vector<std::vector<cpu::AttentionSequence>> attention_sequences_;  // by group
  std::vector<RopeAngles> angles_;                                        // by AttentionPlan::ropes
  // moe_add's: each expert's (token, weight) pairs (the shared expert's last), and the buffer its groups of
  // experts' inputs and products use.
  std::vector<std::vector<std::pair<std::size_t, float>>> expert_tokens_;
  AlignedFloats moe_scratch_;
  std::size_t moe_scratch_floats_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::size_t threads, std::span<const int> cpus) {
  return std::make_unique<CpuBackend>(threads, cpus);
}

}  // namespace engine::backend
