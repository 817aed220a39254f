#include "engine/cpu/attention.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/simd_levels.h"

namespace engine::cpu {

namespace {

// Rows (queries × the q heads of one kv head) per piece of work: their queries, outputs and scores stay in
// L1/L2 while every key tile up to their positions streams past once.
constexpr std::size_t kRowsPerPiece = 64;

void write_element(quant::WeightType type, std::byte* at, float value) {
  if (type == quant::WeightType::F32) {
    std::memcpy(at, &value, sizeof value);
    return;
  }
  const std::uint16_t bits = type == quant::WeightType::BF16 ? quant::f32_to_bf16(value) : quant::f32_to_f16(value);
  std::memcpy(at, &bits, sizeof bits);
}

// A thread's kernel scratch, kept from call to call (a step runs attention once per layer).
std::byte* thread_scratch(std::size_t bytes) {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<std::byte, Free> buffer;
  thread_local std::size_t size = 0;
  if (size < bytes) {
    const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.reset(static_cast<std::byte*>(std::aligned_alloc(64, rounded)));
    if (!buffer) throw std::bad_alloc();
    size = rounded;
  }
  return buffer.get();
}

struct Piece {
  std::size_t sequence;
  std::size_t kv_head;
  std::size_t first_query;  // within the sequence's queries
  std::size_t queries;
  std::size_t cost;  // rows × positions attended to by the last query
};

void run_attention(const kernels::Table& table, ThreadPool& pool, const AttentionBatch& batch) {
  if (batch.layout == nullptr) throw std::invalid_argument("attention without a KV cache layout");
  const KvCacheLayout& layout = *batch.layout;
  check_kv_cache_layout(layout);
  if (batch.layer >= layout.num_layers) {
    throw std::invalid_argument("attention of layer " + std::to_string(batch.layer) + " in a cache of " +
                                std::to_string(layout.num_layers) + " layers");
  }
  if (batch.num_q_heads == 0 || batch.num_q_heads % layout.num_kv_heads != 0) {
    throw std::invalid_argument("attention: " + std::to_string(batch.num_q_heads) + " query heads do not share " +
                                std::to_string(layout.num_kv_heads) + " kv heads evenly");
  }
  if (!batch.sinks.empty() && batch.sinks.size() != batch.num_q_heads) {
    throw std::invalid_argument("attention: " + std::to_string(batch.sinks.size()) + " sinks for " +
                                std::to_string(batch.num_q_heads) + " query heads (one each)");
  }
  const std::size_t group = batch.num_q_heads / layout.num_kv_heads;
  const std::size_t queries_per_piece = std::max<std::size_t>(1, kRowsPerPiece / group);
  std::vector<Piece> pieces;
  for (std::size_t s = 0; s < batch.sequences.size(); ++s) {
    const AttentionSequence& seq = batch.sequences[s];
    const std::size_t end = seq.start_position + seq.num_queries;
    if (seq.block_table.size() * layout.block_size < end) {
      throw std::invalid_argument("attention: a block table of " + std::to_string(seq.block_table.size()) +
                                  " blocks of " + std::to_string(layout.block_size) + " positions does not cover " +
                                  std::to_string(end) + " positions");
    }
    for (std::size_t first = 0; first < seq.num_queries; first += queries_per_piece) {
      const std::size_t queries = std::min(queries_per_piece, seq.num_queries - first);
      for (std::size_t g = 0; g < layout.num_kv_heads; ++g) {
        pieces.push_back({s, g, first, queries, queries * group * (seq.start_position + first + queries)});
      }
    }
  }
  if (pieces.empty()) return;
  if (batch.q == nullptr || batch.out == nullptr || batch.cache == nullptr) {
    throw std::invalid_argument("attention without queries, output or cache");
  }
  // The longest pieces first, so that the last ones to be claimed are short.
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.cost > b.cost; });
  const std::size_t d = layout.head_dim;
  const std::size_t row_floats = batch.num_q_heads * d;
  const std::size_t scratch_bytes = table.attention_scratch_bytes(d, queries_per_piece * group);
  pool.parallel_for(pieces.size(), 1, [&](std::size_t begin, std::size_t end) {
    std::byte* scratch = thread_scratch(scratch_bytes);
    for (std::size_t i = begin; i < end; ++i) {
      const Piece& piece = pieces[i];
      const AttentionSequence& seq = batch.sequences[piece.sequence];
      const std::size_t row = seq.first_row + piece.first_query;
      const std::size_t head_floats = piece.kv_head * group * d;
      const kernels::AttentionTask task{
          .kv_type = static_cast<int>(layout.type),
          .head_dim = d,
          .block_size = layout.block_size,
          .block_bytes = layout.block_bytes(),
          .cache = batch.cache,
          .key_offset = layout.key_offset(batch.layer, piece.kv_head),
          .value_offset = layout.value_offset(batch.layer, piece.kv_head),
          .block_table = seq.block_table.data(),
          .first_position = seq.start_position + piece.first_query,
          .queries = piece.queries,
          .group = group,
          .q = batch.q + row * row_floats + head_floats,
          .q_stride = row_floats,
          .out = batch.out + row * row_floats + head_floats,
          .out_stride = row_floats,
          .scale = batch.scale,
          .window = batch.window,
          .softcap = batch.softcap,
          .sinks = batch.sinks.empty() ? nullptr : batch.sinks.data() + piece.kv_head * group,
      };
      table.attention(task, scratch);
    }
  });
}

}  // namespace

void check_kv_cache_layout(const KvCacheLayout& layout) {
  using quant::WeightType;
  if (layout.type != WeightType::F32 && layout.type != WeightType::F16 && layout.type != WeightType::BF16) {
    throw std::invalid_argument("a KV cache of " + std::string(quant::weight_type_name(layout.type)) +
                                ": the CPU stores keys and values as F32, F16 or BF16");
  }
  if (layout.num_layers == 0 || layout.num_kv_heads == 0 || layout.head_dim == 0 || layout.block_size == 0) {
    throw std::invalid_argument("a KV cache of " + std::to_string(layout.num_layers) + " layers, " +
                                std::to_string(layout.num_kv_heads) + " kv heads of " +
                                std::to_string(layout.head_dim) + " dimensions and blocks of " +
                                std::to_string(layout.block_size) + " positions: none may be 0");
  }
}

void store_kv(const KvCacheLayout& layout, std::byte* block, std::size_t layer, std::size_t offset, const float* k,
              const float* v) {
  const std::size_t d = layout.head_dim, bs = layout.block_size, e = layout.element_bytes();
  for (std::size_t g = 0; g < layout.num_kv_heads; ++g) {
    std::byte* keys = block + layout.key_offset(layer, g) + offset * e;
    for (std::size_t i = 0; i < d; ++i) write_element(layout.type, keys + i * bs * e, k[g * d + i]);
    std::byte* values = block + layout.value_offset(layer, g) + offset * d * e;
    for (std::size_t i = 0; i < d; ++i) write_element(layout.type, values + i * e, v[g * d + i]);
  }
}

void attention(ThreadPool& pool, const AttentionBatch& batch) {
  run_attention(active_table(), pool, batch);
}

void attention_at_level(std::string_view level, ThreadPool& pool, const AttentionBatch& batch) {
  run_attention(table_or_throw(level), pool, batch);
}

}  // namespace engine::cpu
