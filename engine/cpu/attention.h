#pragma once

// Causal attention over a paged KV cache in host memory, and the cache's layout: keys and values stored as
// f32, f16 or bf16, read by tiled kernels at the SIMD level in use (docs/cpu-kernels.md, "Attention").

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"

namespace engine::cpu {

// One block of the cache holds `block_size` positions of every layer: per layer, the keys then the values
// of each kv head, each a block_size × head_dim piece. Keys are stored transposed ([head_dim][block_size]),
// so the scores of a run of positions are one vector load per dimension; values are [block_size][head_dim].
struct KvCacheLayout {
  quant::WeightType type = quant::WeightType::F32;  // F32, F16 or BF16
  std::size_t num_layers = 0;
  std::size_t num_kv_heads = 0;
  std::size_t head_dim = 0;
  std::size_t block_size = 0;

  std::size_t element_bytes() const { return type == quant::WeightType::F32 ? 4 : 2; }
  std::size_t piece_bytes() const { return block_size * head_dim * element_bytes(); }
  std::size_t block_bytes() const { return num_layers * 2 * num_kv_heads * piece_bytes(); }
  std::size_t key_offset(std::size_t layer, std::size_t head) const {
    return ((layer * 2) * num_kv_heads + head) * piece_bytes();
  }
  std::size_t value_offset(std::size_t layer, std::size_t head) const {
    return ((layer * 2 + 1) * num_kv_heads + head) * piece_bytes();
  }
};

// Throws std::invalid_argument naming what is wrong: a type other than F32, F16 or BF16, or a zero size.
void check_kv_cache_layout(const KvCacheLayout& layout);

// Writes one position's keys and values (num_kv_heads × head_dim floats each, head after head) into `block`
// at `offset` within it, for layer `layer`, rounded to the cache's type to nearest even.
void store_kv(const KvCacheLayout& layout, std::byte* block, std::size_t layer, std::size_t offset, const float* k,
              const float* v);

// One sequence's queries in an attention call: rows [first_row, first_row + num_queries) of q and out, at
// positions start_position, start_position + 1, ...; each attends to the cached positions up to its own
// (the call's keys and values stored before), found through the block table.
struct AttentionSequence {
  std::size_t first_row = 0;
  std::size_t start_position = 0;
  std::size_t num_queries = 0;
  std::span<const std::int32_t> block_table;
};

// A layer's attention for a step: q and out are rows of num_q_heads × head_dim floats; q head h reads kv
// head h / (num_q_heads / num_kv_heads).
struct AttentionBatch {
  const KvCacheLayout* layout = nullptr;
  const std::byte* cache = nullptr;  // block 0
  std::size_t layer = 0;
  const float* q = nullptr;
  float* out = nullptr;
  std::size_t num_q_heads = 0;
  float scale = 1.0f;
  std::span<const AttentionSequence> sequences;
  std::size_t window = 0;  // sliding-window attention: a query sees its own and the window - 1 positions before
  float softcap = 0;       // scores become softcap * tanh(score / softcap) before the softmax (Gemma 2)
  // Attention sinks (gpt-oss): one logit per q head, a key of value 0 in each of its queries' softmax, so a head
  // may attend to nothing; empty: none.
  std::span<const float> sinks{};
};

// out = softmax(scale · q · kᵀ) · v per query and head, causally (within the window, when there is one). Work is spread
// over the pool in pieces of (sequence, kv head, block of queries); a query's result is the same bits whatever else is
// in the batch, however its sequence's queries are split into calls, and with any number of threads.
void attention(ThreadPool& pool, const AttentionBatch& batch);
// The same at a given SIMD level (tests compare levels; std::invalid_argument for one the CPU does not run).
void attention_at_level(std::string_view level, ThreadPool& pool, const AttentionBatch& batch);

}  // namespace engine::cpu
