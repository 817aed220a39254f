#pragma once

// The loop of the integer-activation kernels (Table::int8_matmul), written once over an ISA type and
// included by each such translation unit (kernels_avx512vnni.cc, kernels_avx2int16.cc). Everything here has
// internal linkage (an unnamed namespace) and instantiates nothing from the standard library, as kernels.h
// requires.
//
// Beside the loop, what both units share: the weight types' block sizes, a zero block, the activations' steps.
//
// The ISA type gives:
//   kLanes                 rows per tile, one per int32 / f32 lane (no lane reduction: a lane is a row)
//   kChunkBlocks           blocks of 32 of a row tile decoded together (the chunk stays in L1)
//   kTokenBlock            tokens whose accumulators and chunk activations stay in L1/L2
//   kTokenTile             tokens run against a decoded block while it is in registers
//   kPrefetchTiles         how far ahead, in tiles, decode prefetches
//   Decoded                one decoded block of 32 of a tile
//   token_bytes(cols)      bytes of one quantized token
//   decode<Type>(tile, row_bytes, rows, first, count, prefetch, chunk)
//                          blocks [first, first + count) of the tile's rows into `chunk`; rows >= `rows`
//                          zero; prefetches the tile at `prefetch` into L2 at the rate this one is read
//   multiply<Type, T>(chunk, first, count, x, stride, blocks, acc)
//                          T quantized tokens (x, stride apart) against the chunk, into acc[t * kLanes ...]
// and, for one token (int_gemv, no chunk):
//   Acc                    the tile's f32 accumulators, row r in lane r (a vector of kLanes floats)
//   kGemvPrefetchLocality  __builtin_prefetch's locality for the tile ahead
//   kGemvPrefetchSteps     over how many blocks of 32 a ggml block's prefetches are spread (1: all at its first)
//   decode_scales<Type>(rows, scales)
//                          one ggml block's scales of the tile's rows into BlockScales<kLanes>[sub_blocks]
//   gemv_step<Type>(rows, sub, x, blocks, k, scales, acc)
//                          block of 32 `sub` (the token's block k) of the rows' ggml blocks into acc

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/quant/ggml_blocks.h"

namespace engine::cpu::kernels {
namespace {

using namespace quant::ggml_blocks;  // the type ids and block layouts

// Steps of q per max|x| of a block of 32: 127 for avx512vnni's high byte times 256 for its low one (avx2int16
// quantizes alike, into one int16).
constexpr float kSteps = 127.0f * 256.0f;

// The blocks of 32 in a ggml block of the type.
constexpr std::size_t sub_blocks(int type) {
  return block_elements(type) / 32;
}
// Types whose blocks of 32 have a scale per 16 weights (the decoded block's d and m are the two halves'):
// their products take the two halves' dots one after the other.
constexpr bool halves(int type) {
  return type == kQ6_K || type == kQ3_K || type == kQ2_K;
}
// Q2_K: a min per 16 weights, so its products subtract each half's min times the token's scaled sum of that
// half's q (the block scales' min0 and min1).
constexpr bool half_mins(int type) {
  return type == kQ2_K;
}
// Types whose weights are d q - m (the K-quants' dmin * min) or d q + m (Q4_1, Q5_1, kept as d q - (-m)): their
// products subtract m times the token's scaled sum of q.
constexpr bool has_min(int type) {
  return type == kQ4_K || type == kQ5_K || type == kQ4_1 || type == kQ5_1;
}

// A ggml block of zeros for the rows of a partial tile (its scales are zero as well).
alignas(64) constexpr std::uint8_t kZeroBlock[256] = {};

[[gnu::always_inline]] inline std::int32_t load_i32(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One ggml block's scales of a tile's rows, row r in lane r: what int_gemv keeps of a decoded block.
template <std::size_t Lanes>
struct BlockScales {
  alignas(64) float d[Lanes];
  alignas(64) float m[Lanes];
  alignas(64) float min0[Lanes];  // half_mins types: the two halves' mins
  alignas(64) float min1[Lanes];
};

// Isa::multiply<Type, T> for n <= T tokens (T at compile time, n at run time).
template <typename Isa, int Type, int T>
void multiply_tokens(int n, const typename Isa::Decoded* chunk, std::size_t first, std::size_t count,
                     const std::byte* x, std::size_t stride, std::size_t blocks, float* acc) {
  if (n == T) return Isa::template multiply<Type, T>(chunk, first, count, x, stride, blocks, acc);
  if constexpr (T > 1) multiply_tokens<Isa, Type, T - 1>(n, chunk, first, count, x, stride, blocks, acc);
}

// Rows of `m` against `tokens` quantized tokens (`x`, Isa::token_bytes(cols) apart). Tokens are taken in
// blocks of kTokenBlock; for each, every row tile is decoded chunk by chunk, and each chunk, while in L1, is
// run against every token of the block: one token streams the weights once, many reuse each decoded chunk.
template <typename Isa, int Type>
void int_matmul(const Rows& m, const std::byte* x, std::size_t tokens, float* out, std::size_t out_stride,
                const float* bias) {
  constexpr std::size_t lanes = Isa::kLanes, token_block = Isa::kTokenBlock, token_tile = Isa::kTokenTile;
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t blocks = m.cols / 32;
  const std::size_t stride = Isa::token_bytes(m.cols);
  typename Isa::Decoded chunk[Isa::kChunkBlocks];
  alignas(64) float acc[token_block * lanes];
  const auto smaller = [](std::size_t a, std::size_t b) { return a < b ? a : b; };
  for (std::size_t t0 = 0; t0 < tokens; t0 += token_block) {
    const std::size_t tn = smaller(token_block, tokens - t0);
    for (std::size_t r0 = 0; r0 < m.rows; r0 += lanes) {
      const std::size_t nr = smaller(lanes, m.rows - r0);
      const std::uint8_t* tile = w + r0 * m.row_bytes;
      // The tile Isa::kPrefetchTiles ahead. Prefetches never fault: past the matrix's end they are merely
      // wasted.
      const std::uint8_t* prefetch = tile + Isa::kPrefetchTiles * lanes * m.row_bytes;
      for (std::size_t i = 0; i < tn * lanes; ++i) acc[i] = 0.0f;
      // Tokens per step: at most kTokenTile, spread evenly (8 tokens at a tile of 6 go as 4 + 4, not 6 + 2).
      const std::size_t steps = (tn + token_tile - 1) / token_tile, per_step = (tn + steps - 1) / steps;
      for (std::size_t b0 = 0; b0 < blocks; b0 += Isa::kChunkBlocks) {
        const std::size_t bn = smaller(Isa::kChunkBlocks, blocks - b0);
        Isa::template decode<Type>(tile, m.row_bytes, nr, b0, bn, prefetch, chunk);
        for (std::size_t t = 0; t < tn; t += per_step) {
          const auto n = static_cast<int>(smaller(per_step, tn - t));
          multiply_tokens<Isa, Type, static_cast<int>(token_tile)>(n, chunk, b0, bn, x + (t0 + t) * stride, stride,
                                                                   blocks, acc + t * lanes);
        }
      }
      for (std::size_t t = 0; t < tn; ++t) {
        float* row_out = out + (t0 + t) * out_stride + r0;
        for (std::size_t r = 0; r < nr; ++r) {
          const float s = acc[t * lanes + r];
          row_out[r] = bias != nullptr ? s + bias[r0 + r] : s;
        }
      }
    }
  }
}

// One quantized token against the rows of `m`, without a chunk: each tile's ggml blocks are read in place
// (nothing is reused at batch 1, so decoding into lanes would be pure cost), their scales decoded once per
// ggml block, and Isa::gemv_step folds each block of 32 into the tile's accumulators. The step computes the
// same exact integer dots and the same f32 chain as multiply, so a token's result is int_matmul's bit for bit.
template <typename Isa, int Type>
void int_gemv(const Rows& m, const std::byte* x, float* out, const float* bias) {
  constexpr std::size_t lanes = Isa::kLanes, bb = block_bytes(Type), per_block = sub_blocks(Type);
  // Bytes of the tile ahead prefetched per block of 32: a ggml block's share over its first kGemvPrefetchSteps.
  constexpr std::size_t spread = per_block < Isa::kGemvPrefetchSteps ? per_block : Isa::kGemvPrefetchSteps;
  constexpr std::size_t kPrefetchStep = (lanes * bb / spread + 63) / 64 * 64;
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t blocks = m.cols / 32;
  for (std::size_t r0 = 0; r0 < m.rows; r0 += lanes) {
    const std::uint8_t* tile = w + r0 * m.row_bytes;
    const std::uint8_t* ahead = tile + Isa::kPrefetchTiles * lanes * m.row_bytes;
    // Rows past the matrix read the zero block and stay on it.
    const std::uint8_t* row[lanes];
    std::size_t step[lanes];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < lanes; ++r) {
      const bool inside = r0 + r < m.rows;
      row[r] = inside ? tile + r * m.row_bytes : kZeroBlock;
      step[r] = inside ? bb : 0;
    }
    typename Isa::Acc acc{};
    for (std::size_t g = 0; g < blocks / per_block; ++g) {
      BlockScales<lanes> scales[per_block];
#pragma GCC unroll 8
      for (std::size_t s = 0; s < per_block; ++s) {
        // The tile ahead's lines for this ggml block, a share per block of 32 (Isa::kGemvPrefetchSteps), the
        // first before the block's scales are decoded.
        for (std::size_t i = s * kPrefetchStep; i < (s + 1) * kPrefetchStep && i < lanes * bb; i += 64) {
          __builtin_prefetch(ahead + i, 0, Isa::kGemvPrefetchLocality);
        }
        if (s == 0) Isa::template decode_scales<Type>(row, scales);
        Isa::template gemv_step<Type>(row, static_cast<int>(s), x, blocks, g * per_block + s, scales[s], acc);
      }
      ahead += lanes * bb;
#pragma GCC unroll 16
      for (std::size_t r = 0; r < lanes; ++r) row[r] += step[r];
    }
    alignas(64) float sums[lanes];
    static_assert(sizeof(typename Isa::Acc) == sizeof sums, "Isa::Acc holds one float per lane");
    std::memcpy(sums, &acc, sizeof sums);
    for (std::size_t r = 0; r < lanes && r0 + r < m.rows; ++r) {
      out[r0 + r] = bias != nullptr ? sums[r] + bias[r0 + r] : sums[r];
    }
  }
}

// Table::int8_matmul: one token by int_gemv, more by int_matmul (the same bits for each token either way).
template <typename Isa, int Type>
void int_product(const Rows& m, const std::byte* x, std::size_t tokens, float* out, std::size_t out_stride,
                 const float* bias) {
  if (tokens == 1) return int_gemv<Isa, Type>(m, x, out, bias);
  int_matmul<Isa, Type>(m, x, tokens, out, out_stride, bias);
}

}  // namespace
}  // namespace engine::cpu::kernels
