// AMX-INT8 tiles: the avx512vnni table, with the quantized weight types' products for 16 tokens and more run
// on tile registers (a tile product: 16 tokens x 16 rows x 32 bytes per instruction, where vpdpbusd takes 1
// token x 16 rows x 4 bytes). Nothing from the standard library may be instantiated here (see kernels.h).
//
// The tiles compute the integers avx512vnni's kernels compute and hand them to the same f32 chain, so the
// results are avx512vnni's bit for bit, for any number of tokens:
// - The weights are decode_chunk's blocks (avx512vnni_impl.h): a block of 32 of 16 rows as 8 groups of 64
//   bytes, row r's bytes 4j .. 4j+3 in bytes 4r .. 4r+3 of group j, which is the layout a tile product reads
//   its second operand in, so a decoded block loads as a tile as it is. Where vpdpbusd needed them unsigned
//   (Q8_0 + 128, Q4_0's and Q6_K's unsigned codes), they are made signed again in the chunk (tdpbssd takes
//   signed bytes on both sides), so no offset times the sum of q comes off afterwards; Q4_K's and Q5_K's are
//   unsigned (tdpbsud).
// - The tokens are quantize_token's, and copied once per matmul, after them, per group of 16 into tile order
//   (pack_tokens): per block of 32, the 16 tokens' high bytes, then their low bytes; a last, partial group is
//   padded with zeros.
// - Per block of 32 (Q6_K: per half of 16, its two scales), one tile product against the high bytes and one
//   against the low bytes give every (token, row) exact int32 dot as 256 * high + low, vpdpbusd's integer, and
//   the chain after it is micro's, step for step.
// A block's products cannot be summed over a whole 64-byte tile row (two blocks) because every block of 32 has
// its own scales; so each block's result tiles are stored and the chain runs on them in AVX-512.

#include <cstddef>
#include <cstdint>

// (immintrin.h, with the AMX intrinsics at this unit's flags, comes in through avx512vnni_impl.h.)
#include "engine/cpu/avx512vnni_impl.h"
#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

constexpr std::size_t kTileTokens = 16;  // tokens per tile product: a tile's 16 rows
// Tokens whose quantized activations are run against each decoded chunk (more than avx512vnni's 96: the tile
// products are so much cheaper that decoding the chunk would otherwise be most of the time), bounded so that
// the token block's activations stay in L2.
constexpr std::size_t kMaxTokenBlock = 256;
constexpr std::size_t kTokenBlockBytes = std::size_t{1} << 20;

// A group of 16 tokens' bytes of one block of 32, packed for the tile loads: the 16 tokens' 32 high bytes, then
// their 32 low bytes (quantize_token's layout puts a token's blocks together, so a tile of 16 tokens read in
// place would gather 16 rows a token apart).
constexpr std::size_t kPackedBlockBytes = 2 * kTileTokens * 32;

// Table::packed_activation_bytes: every group of 16 tokens (the last one padded), kPackedBlockBytes per block.
// Nothing where the products do not take the tiles.
std::size_t packed_bytes(std::size_t tokens, std::size_t cols) {
  if (tokens < kTileTokens) return 0;
  return (tokens + kTileTokens - 1) / kTileTokens * (cols / 32) * kPackedBlockBytes;
}

// Table::pack_activations: groups [first, last) of the `tokens` tokens (x, token_bytes(cols) apart) into
// `packed`, group g's block k at packed + (g * blocks + k) * kPackedBlockBytes: the 16 tokens' high bytes of
// the block, then their low bytes; the last group's missing tokens are zeros.
void pack_tokens(const std::byte* x, std::size_t cols, std::size_t tokens, std::size_t first, std::size_t last,
                 std::byte* packed) {
  const std::size_t blocks = cols / 32, stride = token_bytes(cols);
  for (std::size_t t = first * kTileTokens; t < last * kTileTokens; ++t) {
    auto* out =
        reinterpret_cast<std::uint8_t*>(packed) + t / kTileTokens * blocks * kPackedBlockBytes + 32 * (t % kTileTokens);
    const bool padding = t >= tokens;
    const QuantizedToken token = token_at(x + (padding ? 0 : t) * stride, blocks);
    for (std::size_t k = 0; k < blocks; ++k) {
      const __m256i high = padding ? _mm256_setzero_si256() : load256(token.high + 32 * k);
      const __m256i low = padding ? _mm256_setzero_si256() : load256(token.low + 32 * k);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + k * kPackedBlockBytes), high);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + k * kPackedBlockBytes + 16 * 32), low);
    }
  }
}

// A decoded chunk's weight bytes made signed where decode_chunk offset them for vpdpbusd (weight_offset).
template <int Type>
void make_signed(DecodedBlock* chunk, std::size_t count) {
  constexpr std::int32_t offset = weight_offset(Type);
  if constexpr (offset != 0) {
    const __m512i by = _mm512_set1_epi8(static_cast<char>(offset));
    for (std::size_t b = 0; b < count; ++b) {
#pragma GCC unroll 8
      for (int j = 0; j < kGroups; ++j) {
        __m512i* w = reinterpret_cast<__m512i*>(chunk[b].w[j]);
        _mm512_store_si512(w, _mm512_sub_epi8(_mm512_load_si512(w), by));
      }
    }
  }
}

// Tile registers, by number (GCC's tile intrinsics take them as literals): 0 and 5 two row tiles' weights, 1 and 2
// the tokens' high and low bytes, 3 and 4 the first row tile's dots with them, 6 and 7 the second's.

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  std::uint8_t palette;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t bytes_per_row[16];
  std::uint8_t rows[16];
};

// The tiles for products over `k` bytes (32: a block; 16: a half): weights k / 4 rows of 16 matrix rows' 4 bytes,
// tokens 16 rows of k bytes, dots 16 tokens x 16 matrix rows of int32.
void configure_tiles(int k) {
  TileConfig config{};
  config.palette = 1;
  const auto set = [&](int tile, int rows, int bytes) {
    config.rows[tile] = static_cast<std::uint8_t>(rows);
    config.bytes_per_row[tile] = static_cast<std::uint16_t>(bytes);
  };
  constexpr int tokens = static_cast<int>(kTileTokens);
  constexpr int weights[] = {0, 5}, token_tiles[] = {1, 2}, dots[] = {3, 4, 6, 7};
  for (const int tile : weights) set(tile, k / 4, 64);
  for (const int tile : token_tiles) set(tile, tokens, k);
  for (const int tile : dots) set(tile, tokens, 64);
  // GCC 12's _tile_loadconfig tells the compiler it reads only the first 8 bytes of the configuration, which
  // lets the stores of the rest be dropped; this operand is the whole of it.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

// Tokens [0, n) of a group of 16 (x, stride apart; n <= 16, the group's packed bytes zero-padded) against
// `count` decoded blocks (blocks [first, first + count)) of two row tiles, accumulating into acc[i][t * 16 ...]
// for tile i: micro's chain, its integer dots from the tiles. Two row tiles share each load of the tokens, and
// their products are independent, so one tile's products run while the other's are stored.
template <int Type>
void tile_tokens(const DecodedBlock* const* chunk, std::size_t first, std::size_t count, const std::byte* x,
                 std::size_t n, std::size_t stride, std::size_t blocks, const std::uint8_t* packed, float* const* acc) {
  constexpr int parts = halves(Type) ? 2 : 1;
  constexpr std::size_t part_bytes = 32 / parts;
  constexpr bool has_min_term = Type == kQ4_K || Type == kQ5_K;
  QuantizedToken token[kTileTokens];
  for (std::size_t t = 0; t < n; ++t) token[t] = token_at(x + t * stride, blocks);
  alignas(64) std::int32_t dot_high[2][kTileTokens][kLanes];
  alignas(64) std::int32_t dot_low[2][kTileTokens][kLanes];
  for (std::size_t b = 0; b < count; ++b) {
    const std::size_t k = first + b;
#pragma GCC unroll 2
    for (int part = 0; part < parts; ++part) {
      const std::uint8_t* group = packed + kPackedBlockBytes * k + part_bytes * static_cast<std::size_t>(part);
      _tile_loadd(1, group, 32);
      _tile_loadd(2, group + 16 * 32, 32);
      _tile_loadd(0, chunk[0][b].w[4 * part], 64);
      _tile_loadd(5, chunk[1][b].w[4 * part], 64);
      _tile_zero(3);
      _tile_zero(4);
      _tile_zero(6);
      _tile_zero(7);
      if constexpr (has_min_term) {
        _tile_dpbsud(3, 1, 0);
        _tile_dpbsud(4, 2, 0);
        _tile_dpbsud(6, 1, 5);
        _tile_dpbsud(7, 2, 5);
      } else {
        _tile_dpbssd(3, 1, 0);
        _tile_dpbssd(4, 2, 0);
        _tile_dpbssd(6, 1, 5);
        _tile_dpbssd(7, 2, 5);
      }
      _tile_stored(3, dot_high[0], 64);
      _tile_stored(4, dot_low[0], 64);
      _tile_stored(6, dot_high[1], 64);
      _tile_stored(7, dot_low[1], 64);
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const DecodedBlock& w = chunk[i][b];
        const __m512 dw = _mm512_load_ps(part == 0 ? w.d : w.m);
        for (std::size_t t = 0; t < n; ++t) {
          const __m512i high = _mm512_slli_epi32(_mm512_load_si512(dot_high[i][t]), 8);
          const __m512i dot = _mm512_add_epi32(high, _mm512_load_si512(dot_low[i][t]));
          float* a = acc[i] + t * kLanes;
          __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(token[t].d[k])),
                                     _mm512_load_ps(a));
          if constexpr (has_min_term) {
            v = _mm512_fnmadd_ps(_mm512_load_ps(w.m), _mm512_set1_ps(token[t].scaled_sum[k]), v);
          }
          _mm512_store_ps(a, v);
        }
      }
    }
  }
}

// int_matmul (int_matmul_impl.h) on the tiles: each pair of row tiles is decoded chunk by chunk, and each
// chunk, while in L1, is run against every group of 16 tokens of the token block.
template <int Type>
void tile_matmul(const Rows& m, const std::byte* x, std::size_t tokens, float* out, std::size_t out_stride,
                 const float* bias) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t blocks = m.cols / 32;
  const std::size_t stride = token_bytes(m.cols);
  const auto smaller = [](std::size_t a, std::size_t b) { return a < b ? a : b; };
  const auto larger = [](std::size_t a, std::size_t b) { return a > b ? a : b; };
  const std::size_t token_block =
      smaller(kMaxTokenBlock, larger(kTileTokens, kTokenBlockBytes / stride / kTileTokens * kTileTokens));
  // Two row tiles at a time (the second one zeros past the matrix's end).
  DecodedBlock chunks[2][kChunkBlocks];
  alignas(64) float accs[2][kMaxTokenBlock * kLanes];
  const DecodedBlock* const chunk[2] = {chunks[0], chunks[1]};
  float* const acc[2] = {accs[0], accs[1]};
  // pack_tokens's groups, right after the tokens (matmul's quantize_input).
  const auto* packed = reinterpret_cast<const std::uint8_t*>(x + tokens * stride);
  configure_tiles(halves(Type) ? 16 : 32);
  for (std::size_t t0 = 0; t0 < tokens; t0 += token_block) {
    const std::size_t tn = smaller(token_block, tokens - t0);
    for (std::size_t r0 = 0; r0 < m.rows; r0 += 2 * kLanes) {
      const std::size_t nr[2] = {smaller(kLanes, m.rows - r0),
                                 m.rows - r0 > kLanes ? smaller(kLanes, m.rows - r0 - kLanes) : 0};
      const std::uint8_t* tile = w + r0 * m.row_bytes;
      const std::uint8_t* prefetch = tile + 2 * kLanes * m.row_bytes;
      for (std::size_t i = 0; i < tn * kLanes; ++i) accs[0][i] = accs[1][i] = 0.0f;
      for (std::size_t b0 = 0; b0 < blocks; b0 += kChunkBlocks) {
        const std::size_t bn = smaller(kChunkBlocks, blocks - b0);
        decode_chunk<Type>(tile, m.row_bytes, nr[0], b0, bn, prefetch, chunks[0]);
        decode_chunk<Type>(tile + kLanes * m.row_bytes, m.row_bytes, nr[1], b0, bn, prefetch + kLanes * m.row_bytes,
                           chunks[1]);
        make_signed<Type>(chunks[0], bn);
        make_signed<Type>(chunks[1], bn);
        for (std::size_t t = 0; t < tn; t += kTileTokens) {
          float* const at[2] = {acc[0] + t * kLanes, acc[1] + t * kLanes};
          tile_tokens<Type>(chunk, b0, bn, x + (t0 + t) * stride, smaller(kTileTokens, tn - t), stride, blocks,
                            packed + (t0 + t) / kTileTokens * blocks * kPackedBlockBytes, at);
        }
      }
      for (int i = 0; i < 2 && nr[i] > 0; ++i) {
        const std::size_t r = r0 + static_cast<std::size_t>(i) * kLanes;
        const __mmask16 rows = static_cast<__mmask16>((1u << nr[i]) - 1);
        const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(rows, bias + r) : _mm512_setzero_ps();
        for (std::size_t t = 0; t < tn; ++t) {
          __m512 v = _mm512_load_ps(acc[i] + t * kLanes);
          if (bias != nullptr) v = _mm512_add_ps(v, b);
          _mm512_mask_storeu_ps(out + (t0 + t) * out_stride + r, rows, v);
        }
      }
    }
  }
  // Back to the initial tile state, so that the thread's context switches do not save tile data.
  _tile_release();
}

// Table::int8_matmul: fewer than 16 tokens as at avx512vnni (one by int_gemv), more on the tiles.
template <int Type>
void tile_product(const Rows& m, const std::byte* x, std::size_t tokens, float* out, std::size_t out_stride,
                  const float* bias) {
  if (tokens < kTileTokens) return int_product<Vnni, Type>(m, x, tokens, out, out_stride, bias);
  tile_matmul<Type>(m, x, tokens, out, out_stride, bias);
}

Table make_amx_table() {
  Table table = avx512vnni_table();
  table.name = "amx";
  // avx512vnni's quantizer and layout (the header's functions, this unit's copies).
  table.quantize_activations = quantize_token;
  table.quantized_token_bytes = token_bytes;
  table.packed_activation_bytes = packed_bytes;
  table.pack_activations = pack_tokens;
  table.int8_matmul[kQ8_0] = tile_product<kQ8_0>;
  table.int8_matmul[kQ4_0] = tile_product<kQ4_0>;
  table.int8_matmul[kQ4_K] = tile_product<kQ4_K>;
  table.int8_matmul[kQ5_K] = tile_product<kQ5_K>;
  table.int8_matmul[kQ6_K] = tile_product<kQ6_K>;
  // The tiles read the blocks as stored: this level does not repack (avx512vnni's repacked kernels are not
  // measured on an AMX machine yet).
  for (int type = 0; type < kTypeCount; ++type) {
    table.repack_weights[type] = nullptr;
    table.int8_matmul_repacked[type] = nullptr;
  }
  return table;
}

}  // namespace

const Table& amx_table() {
  static const Table kTable = make_amx_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
