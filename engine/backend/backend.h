#pragma once

// The interface between the model graph and a device. A backend owns the weights it was given, the
// paged KV cache and the kernels; the graph (engine/model/transformer) is written once against it and
// runs unchanged on the CPU and on a GPU.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/quant/quant.h"
#include "engine/sampling/sampler.h"

namespace engine::backend {

// A weight as the checkpoint stores it, in host memory (usually a mapped file that outlives the backend):
// a matrix of `rows` output features × `cols` input features, or a vector (rows == 1).
struct WeightSource {
  quant::WeightType type = quant::WeightType::F32;
  std::span<const std::byte> bytes;
  std::size_t rows = 0;
  std::size_t cols = 0;
  // The bytes lie in a read-only mapping of a file: a backend that keeps its own copy (repacked, uploaded) may
  // drop their pages from memory, and whatever touches them again reads them back from the file.
  bool file_mapped = false;
  // Only whole rows are read from it, a few per step (an embedding table the output does not share): the CPU
  // backend reads it where it is rather than repack what no product streams (a GPU backend still uploads it,
  // for its lookups run on the device).
  bool lookup_only = false;
  // One expert of a mixture-of-experts layer: a step reads only the experts its tokens are routed to. The CPU
  // backend computes from the stored bytes in place (repacking every expert would hold the whole model in memory;
  // in place, only the experts in use stay resident). A backend that runs no mixtures refuses it by name.
  bool expert = false;
  // An FP8 matrix's scales (quant::BlockScales), as f32 values that live as long as `bytes`; empty otherwise.
  quant::BlockScales scales{};
};

// A weight the backend holds (in place, or uploaded). Owned by the backend; valid while it lives.
struct Weight {
  quant::WeightType type = quant::WeightType::F32;
  std::size_t rows = 0;
  std::size_t cols = 0;
  const void* handle = nullptr;  // backend-specific
};

// An f32 row-major activation matrix in the backend's memory, from the step's workspace.
struct Tensor {
  float* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

// Layers that keep the same positions share blocks: a group's blocks hold its layers' keys and values, slot
// by slot, and each sequence has a block table per group. A sliding-window group keeps only the blocks its
// window still reaches (the blocks behind it are given back, their table entries the null block), so that
// Gemma's and Mistral's local layers cost their window, not the context (vLLM's hybrid allocator).
struct KvCacheGroup {
  std::size_t sliding_window = 0;   // 0: full attention
  std::vector<std::size_t> layers;  // the model's layers in this group, by slot

  bool operator==(const KvCacheGroup&) const = default;
};

// The KV cache's geometry: `num_blocks` blocks of `block_size` positions; each block belongs to one group at a
// time and holds its layers' keys and values for those positions.
struct KvCacheShape {
  std::size_t num_layers = 0;
  std::size_t num_kv_heads = 0;
  std::size_t head_dim = 0;
  std::size_t block_size = 0;  // the engine sets it from EngineOptions::block_size (--block-size)
  std::size_t num_blocks = 0;
  // How keys and values are stored (--kv-cache-dtype): F32, or BF16 or F16 to hold twice the positions and
  // read half the bytes. The CPU backend takes all three; the CUDA backend F32 and BF16.
  quant::WeightType kv_type = quant::WeightType::F32;
  // Empty: one full-attention group of every layer.
  std::vector<KvCacheGroup> groups;

  std::size_t num_groups() const { return groups.empty() ? 1 : groups.size(); }
  // The layers a block holds: the largest group's.
  std::size_t layers_per_block() const;
  // The group of layer `layer` and its slot in that group's blocks.
  struct LayerPlace {
    std::size_t group = 0;
    std::size_t slot = 0;
  };
  LayerPlace place(std::size_t layer) const;
  // Whether a group slides: block kNullBlock then stands in for blocks given back, and is never written.
  bool has_null_block() const;

  std::size_t element_bytes() const { return kv_type == quant::WeightType::F32 ? 4 : 2; }
  std::size_t bytes_per_block() const {
    return layers_per_block() * 2 * num_kv_heads * block_size * head_dim * element_bytes();
  }
};

// The block a sliding-window group's table names for positions its window no longer reaches. Backends keep it
// holding zeros (finite keys and values that a tile reading past a window's start multiplies by 0).
inline constexpr std::int32_t kNullBlock = 0;

// What one forward step computes: for every sequence, its new tokens at consecutive positions starting at
// `start_position`, written into the KV cache through its block tables, attending to every earlier position.
struct StepSequence {
  std::size_t start_position = 0;
  std::size_t num_tokens = 0;
  // One per cache group, each covering start_position + num_tokens positions.
  std::vector<std::span<const std::int32_t>> block_tables;
};

struct StepLayout {
  std::vector<StepSequence> sequences;
  std::vector<std::int32_t> tokens;     // every sequence's new tokens, in order
  std::vector<std::size_t> logit_rows;  // the tokens (indices into `tokens`) whose logits the step returns
};

// Rotary embedding: the inverse frequency of each pair of rotated dimensions, how they pair up, and the factor
// on cos and sin. It rotates the first 2 inv_freq.size() dimensions of each head (all of them, or Phi-3's
// partial rotary); the rest pass through.
struct RopeSpec {
  std::vector<double> inv_freq;   // rotated dimensions / 2 values, scaling already applied
  bool interleaved = false;       // pairs (2i, 2i+1) instead of (i, i + rotated / 2)
  double attention_factor = 1.0;  // YaRN's and LongRoPE's: rotated values times it (so their q·k times its square)
};

// How one layer attends. Gemma's local layers rotate with a base of their own and see only a window of the
// latest positions, its global layers use the model's scaled RoPE over every position; SmolLM3 leaves RoPE
// out of some layers; Gemma 2 caps the scores.
struct LayerAttention {
  std::optional<std::size_t> rope = 0;  // index into AttentionPlan::ropes; nullopt: no rotary embedding
  std::size_t sliding_window = 0;       // a query sees its own and the sliding_window - 1 positions before; 0: all
  float logit_softcap = 0;              // scores become cap * tanh(score / cap); 0: left as they are
  // Attention sinks (gpt-oss): one logit per q head, a key of value 0 in each query's softmax; empty: none.
  std::vector<float> sinks{};
};

// Every distinct rotary embedding of a model and which one each layer uses.
struct AttentionPlan {
  std::vector<RopeSpec> ropes;
  std::vector<LayerAttention> layers;  // one per layer of the cache
};

// One product of matmul_group: out = x · weightᵀ (+ bias).
struct Projection {
  const Weight* weight = nullptr;
  const Weight* bias = nullptr;
  Tensor out;
};

// One gated MLP of a mixture: silu(h . gateᵀ) * (h . upᵀ), through down; gpt-oss's experts add a bias to each
// product (vectors of gate's rows and down's rows).
struct ExpertWeights {
  const Weight* gate = nullptr;
  const Weight* up = nullptr;
  const Weight* down = nullptr;
  const Weight* gate_bias = nullptr;
  const Weight* up_bias = nullptr;
  const Weight* down_bias = nullptr;
};

// gpt-oss's clamped SwiGLU in place of silu: (clamp(up, -limit, limit) + 1) · g · sigmoid(alpha g) with
// g = min(gate, limit).
struct ClampedSwiglu {
  float alpha = 1.702f;
  float limit = 7.0f;
};

// A mixture-of-experts feed-forward block (engine/model's MoeConfig): the router scores each token's experts,
// the softmax of the scores picks the top_k best, and their outputs are summed weighted by those probabilities
// (renormalized to sum to 1 where normalize_top_k; gpt-oss's softmax over the top_k scores is the same). The shared
// expert, where there is one, adds its output on every token, times sigmoid(h . shared_expert_gate).
struct MoeBlock {
  const Weight* router = nullptr;  // num_experts x hidden
  std::span<const ExpertWeights> experts;
  std::size_t top_k = 0;
  bool normalize_top_k = false;
  const ExpertWeights* shared_expert = nullptr;
  const Weight* shared_expert_gate = nullptr;     // a vector of hidden values
  const Weight* router_bias = nullptr;            // gpt-oss: num_experts values added to the router's scores
  std::optional<ClampedSwiglu> clamped_swiglu{};  // gpt-oss's activation of the experts, in place of silu
};

// The experts a token is routed to and their weights, best first (route_token).
struct ExpertChoice {
  std::uint32_t expert = 0;
  float weight = 0;
};

// Routes one token from its router scores (one per expert): softmax over them (in double), the `top_k`
// largest probabilities, ties to the lower expert index (torch.topk's order on the CPU), best first, and
// those renormalized to sum to 1 where `normalize`. `out` receives top_k choices.
void route_token(std::span<const float> scores, std::size_t top_k, bool normalize, std::span<ExpertChoice> out);

// Checks a step against the cache before a backend uses it: each sequence has a block table per group, each
// covering its positions, naming only blocks the cache has and, where a query reads or writes, not the null
// block; the sequences' tokens add up to the step's; the logit rows are among them. Throws
// std::invalid_argument naming the backend and the numbers that disagree.
void check_step_layout(const StepLayout& layout, const KvCacheShape& shape, std::string_view backend);
// Checks a plan against the cache: one entry per layer, rope indices among the plan's ropes, each rope 1 to
// head_dim / 2 frequencies and a positive attention factor, every layer in exactly one group that keeps all
// it reads. Throws std::invalid_argument naming the layer, rope or group and its numbers.
void check_attention_plan(const AttentionPlan& plan, const KvCacheShape& shape);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "cpu", "cuda:0"

  // Takes a weight for the rest of the backend's life. `source` must stay readable until the backend is
  // destroyed (the CPU backend computes from it in place).
  virtual Weight add_weight(const WeightSource& source) = 0;

  // Bytes the KV cache may take on a device whose memory the process may use `utilization` (0..1] of, with
  // the weights already added and room kept for a step's activations; nullopt for host memory.
  virtual std::optional<std::size_t> kv_cache_budget(double /*utilization*/) const { return std::nullopt; }

  // Allocates the KV cache (once, after the weights, before the first step) and sets how each layer attends.
  // A backend that lacks what a layer asks for refuses here (std::invalid_argument naming the layer and it).
  virtual void init_cache(const KvCacheShape& shape, const AttentionPlan& plan) = 0;
  // init_cache with one rotary embedding for every layer and full attention.
  void init_cache(const KvCacheShape& shape, const RopeSpec& rope) {
    init_cache(shape, AttentionPlan{{rope}, std::vector<LayerAttention>(shape.num_layers)});
  }
  virtual const KvCacheShape& cache_shape() const = 0;

  // Starts a step: the workspace of the previous step is released, the layout (positions, where each new
  // token's keys and values go) is made available to the kernels.
  virtual void begin_step(const StepLayout& layout) = 0;
  // A workspace tensor that lives until the next begin_step.
  virtual Tensor alloc(std::size_t rows, std::size_t cols) = 0;

  // ---- kernels; every Tensor comes from alloc() ----
  // out[t] = table row tokens[t] (every new token of the step).
  virtual void embed(const Weight& table, Tensor out) = 0;
  // out[r] = x[r] / rms(x[r]) * weight, row by row; x.cols may be a multiple of weight.cols (per-head
  // norms: each head_dim slice is normalised on its own). out may be x.
  virtual void rms_norm(Tensor x, const Weight& weight, float eps, Tensor out) = 0;
  // out = x · wᵀ (+ bias).
  virtual void matmul(Tensor x, const Weight& w, const Weight* bias, Tensor out) = 0;
  // Several products of one input (q, k and v; gate and up), which a backend may run as one pass.
  virtual void matmul_group(Tensor x, std::span<const Projection> projections) {
    for (const auto& p : projections) matmul(x, *p.weight, p.bias, p.out);
  }
  // matmul_group of rms_norm(x) · norm: a sub-block's norm and its input projections. `normed` receives
  // the normed input where a backend computes it first; a GPU GEMV normalises x as it reads it instead.
  virtual void norm_matmul_group(Tensor x, const Weight& norm, float eps, Tensor normed,
                                 std::span<const Projection> projections) {
    rms_norm(x, norm, eps, normed);
    matmul_group(normed, projections);
  }
  // x += in · wᵀ: an output projection added into the residual stream. `product` receives in · wᵀ where a
  // backend computes it first.
  virtual void matmul_add(Tensor in, const Weight& w, Tensor product, Tensor x) {
    matmul(in, w, nullptr, product);
    add(x, product);
  }
  // x *= factor, element-wise (Gemma's embedding times sqrt(hidden_size)).
  virtual void scale(Tensor x, float factor) = 0;
  // x = cap * tanh(x / cap), element-wise (Gemma 2's final logits).
  virtual void softcap(Tensor x, float cap) = 0;
  // Rotates every head of q and k in place at each token's position, with layer `layer`'s rotary embedding
  // (none: left as they are).
  virtual void rope(std::size_t layer, Tensor q, Tensor k, std::size_t head_dim) = 0;
  // Stores k and v for the step's tokens into layer `layer` of the cache.
  virtual void store_kv(std::size_t layer, Tensor k, Tensor v) = 0;
  // Causal attention of q over each sequence's cached positions in layer `layer`, this step's keys and
  // values included (stored before: a token attends to itself and to earlier tokens of the step).
  // Grouped-query: q heads share kv heads evenly. The layer's sliding window and soft-cap (init_cache) apply.
  virtual void attention(std::size_t layer, Tensor q, float scale, Tensor out) = 0;
  // out = silu(gate) * up, element-wise. out may be gate.
  virtual void silu_mul(Tensor gate, Tensor up, Tensor out) = 0;
  // out = gelu_tanh(gate) * up, element-wise (GeGLU, Gemma's), GELU's tanh approximation. out may be gate.
  virtual void gelu_tanh_mul(Tensor gate, Tensor up, Tensor out) = 0;
  // x += (silu(gate) * up) · wᵀ: SwiGLU's product through the down projection into the residual stream
  // (one kernel on a GPU for small batches). gate may be overwritten; `product` as for matmul_add.
  virtual void swiglu_matmul_add(Tensor gate, Tensor up, const Weight& w, Tensor product, Tensor x) {
    silu_mul(gate, up, gate);
    matmul_add(gate, w, product, x);
  }
  // x += the mixture's output for h (the normed input of each token of x): each token through the experts it
  // is routed to, a step reading each chosen expert once for all its tokens. A backend without mixtures has
  // refused the experts' weights at add_weight.
  virtual void moe_add(Tensor h, const MoeBlock& block, Tensor x) {
    (void)h, (void)block, (void)x;
    throw std::logic_error(std::string(name()) + " backend: no mixture-of-experts blocks");
  }
  // x += y.
  virtual void add(Tensor x, Tensor y) = 0;
  // The optional per-head q and k norms, rope, then store_kv of k and v into layer `layer` (one kernel on
  // a GPU).
  virtual void qk_norm_rope_store(std::size_t layer, Tensor q, Tensor k, Tensor v, const Weight* q_norm,
                                  const Weight* k_norm, float eps, std::size_t head_dim) {
    if (q_norm) rms_norm(q, *q_norm, eps, q);
    if (k_norm) rms_norm(k, *k_norm, eps, k);
    rope(layer, q, k, head_dim);
    store_kv(layer, k, v);
  }
  // out[i] = x[layout.logit_rows[i]] for the step's layout.
  virtual void gather_logit_rows(Tensor x, Tensor out) = 0;
  // Copies a tensor to host memory (rows × cols floats).
  virtual void read(Tensor x, std::span<float> out) = 0;

  // Whether sample() chooses tokens where the logits are (else the engine reads them and samples on the host).
  virtual bool samples_on_device() const { return false; }
  // The most top log-probabilities sample() reports for a row; the engine reads a row that asks for more
  // back and finds them itself.
  virtual int max_device_logprobs() const { return 0; }
  // Chooses each logit row's next token as SequenceSampler::sample would: steps[i] is row i's (its top
  // log-probabilities cut to max_device_logprobs()).
  virtual void sample(Tensor /*logits*/, std::span<const sampling::SamplingStep> /*steps*/,
                      std::span<sampling::SampledToken> /*out*/) {
    throw std::logic_error(std::string(name()) + " backend: no device sampling");
  }
};

// The CPU backend: `threads` 0 means one per CPU the process may run on; a non-empty `cpus` instead runs one
// thread pinned to each of them (cpu::ThreadPool's two constructors).
std::unique_ptr<Backend> make_cpu_backend(std::size_t threads = 0, std::span<const int> cpus = {});

}  // namespace engine::backend
