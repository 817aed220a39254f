#pragma once

// The AVX-512 VNNI integer kernels (vpdpbusd): quantized weights against activations quantized to integers held
// as two int8 bytes. Included by kernels_avx512vnni.cc (the avx512vnni table) and kernels_amx.cc, whose AMX
// tiles multiply the same decoded blocks and the same quantized tokens and hand the products to the same f32
// chain. Everything here has internal linkage (an unnamed namespace) and instantiates nothing from the
// standard library, as kernels.h requires.
//
// Numerics, the same for one token, a few or many, any row range and any thread count:
// - Each token is quantized once per matmul call (quantize_token): per block of 32, d = max|x| / 32512 and
//   q = x * (32512 / max|x|) rounded to nearest even, so |x - d q| <= d / 2 (32512 = 127 * 256). A block of
//   zeros has d = q = 0. q is kept as two signed bytes, q = 256 * high + low (high in [-127, 127], low in
//   [-128, 127]): one byte per value (d = max|x| / 127) moved the model's log-probabilities as far from the
//   float64 reference as llama.cpp's do, and the second byte brings them to the float levels' distance
//   (docs/cpu-kernels.md, "int8 activations").
// - Every (row, token, block of 32) dot product of weight integers and q is exact: vpdpbusd multiplies the
//   weights as unsigned bytes by the signed high bytes and by the low bytes, the two combine as
//   256 * high dot + low dot in int32 (at most about 4e8: no overflow), and a constant offset of the weights
//   (weight_offset: Q4_0 8, Q5_0 16, Q3_K 4, Q6_K 32, Q8_0 128 by an xor, IQ4_NL / IQ4_XS 128 in their levels)
//   comes off as that times the sum of q, in integers.
// - A row's result is one f32 chain over its blocks in order, from 0, then + bias. Per block of 32, with
//   s = d_x * (weight scale): acc = fma(dot, s, acc); then for the types with a min (Q4_K / Q5_K: dmin * min;
//   Q4_1 / Q5_1: -m) acc = fma(-min, d_x * sum(q), acc). Q6_K, Q3_K and Q2_K take the two 16-element halves
//   one after the other, each acc = fma(dot_half, s_half, acc), and Q2_K then subtracts each half's min times
//   d_x * (the half's sum of q). Weight scales are ggml's f32 products (d * scale). avx2int16 computes the same
//   chain, so the two levels give the same bits.
// - 16 rows sit side by side in the 16 lanes, so no lane reduction is needed, and a lane's chain does not
//   depend on the other lanes: rows past the matrix are zero-filled and never stored.

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*() and trip -Wuninitialized
// (GCC bug 105593); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

constexpr int kLanes = 16;                // rows per tile: one per int32 / f32 lane
constexpr int kGroups = 8;                // 4-byte groups per block of 32: the vpdpbusd steps of one block
constexpr std::size_t kChunkBlocks = 32;  // blocks of 32 of a row tile decoded together (20 KiB: stays in L1)
constexpr std::size_t kTokenBlock = 96;   // tokens whose accumulators and chunk activations stay in L1/L2
constexpr int kTokenTile = 8;             // tokens run against a decoded block while it is in registers

#define ENGINE_KERNEL_INLINE [[gnu::always_inline]] inline

// ---- activations -----------------------------------------------------------------------------------------

// A quantized token of `blocks` blocks of 32: every block's high bytes of q, then every block's low bytes,
// then per block its d (f32), sum of q, sum of its first 16 q (int32) and d * sum of q (f32), padded to whole
// cache lines.
std::size_t token_bytes(std::size_t cols) {
  const std::size_t blocks = cols / 32;
  return (blocks * 80 + 63) / 64 * 64;
}

struct QuantizedToken {
  const std::uint8_t* high;
  const std::uint8_t* low;
  const float* d;
  const std::int32_t* sum;
  const std::int32_t* sum_low;
  const float* scaled_sum;
};

ENGINE_KERNEL_INLINE QuantizedToken token_at(const std::byte* base, std::size_t blocks) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(base);
  return {p,
          p + 32 * blocks,
          reinterpret_cast<const float*>(p + 64 * blocks),
          reinterpret_cast<const std::int32_t*>(p + 68 * blocks),
          reinterpret_cast<const std::int32_t*>(p + 72 * blocks),
          reinterpret_cast<const float*>(p + 76 * blocks)};
}

// 16 values of q split into bytes: high = (q + 128) >> 8 (floor), low = q - 256 * high.
ENGINE_KERNEL_INLINE void store_split(__m512i q, std::int8_t* high, std::int8_t* low) {
  const __m512i h = _mm512_srai_epi32(_mm512_add_epi32(q, _mm512_set1_epi32(128)), 8);
  const __m512i l = _mm512_sub_epi32(q, _mm512_slli_epi32(h, 8));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(high), _mm512_cvtepi32_epi8(h));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(low), _mm512_cvtepi32_epi8(l));
}

void quantize_token(const float* x, std::size_t cols, std::byte* out) {
  const std::size_t blocks = cols / 32;
  auto* high = reinterpret_cast<std::int8_t*>(out);
  auto* low = reinterpret_cast<std::int8_t*>(out + 32 * blocks);
  auto* d = reinterpret_cast<float*>(out + 64 * blocks);
  auto* sum = reinterpret_cast<std::int32_t*>(out + 68 * blocks);
  auto* sum_low = reinterpret_cast<std::int32_t*>(out + 72 * blocks);
  auto* scaled_sum = reinterpret_cast<float*>(out + 76 * blocks);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + 32 * b);
    const __m512 hi = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(lo, magnitude), _mm512_and_ps(hi, magnitude)));
    const float inverse = amax > 0.0f ? kSteps / amax : 0.0f;
    d[b] = amax / kSteps;
    // Round to nearest even (the default MXCSR mode); |x * inverse| <= 32512 up to an f32 rounding, so q
    // never passes 32512, whose high byte is 127.
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(inverse)));
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(inverse)));
    store_split(qlo, high + 32 * b, low + 32 * b);
    store_split(qhi, high + 32 * b + 16, low + 32 * b + 16);
    sum_low[b] = _mm512_reduce_add_epi32(qlo);
    sum[b] = sum_low[b] + _mm512_reduce_add_epi32(qhi);
    scaled_sum[b] = d[b] * static_cast<float>(sum[b]);
  }
}

// ---- weights: a tile of 16 rows decoded block by block into lanes ---------------------------------------

// One block of 32 of 16 rows: w[j] holds, in lane r, row r's unsigned weight bytes 4j .. 4j+3 (the elements
// the activation's bytes 4j .. 4j+3 multiply); d the rows' scales of the block and m their second multiplier
// (Q4_K / Q5_K: dmin * min; Q4_1 / Q5_1: -min; Q6_K / Q3_K / Q2_K: the scale of the block's second half), and
// Q2_K's mins of its two halves.
struct DecodedBlock {
  alignas(64) std::uint8_t w[kGroups][64];
  alignas(64) float d[kLanes];
  alignas(64) float m[kLanes];
  alignas(64) float min0[kLanes];
  alignas(64) float min1[kLanes];
};

// 16 bytes at `offset` of each row's block, transposed: out[g] lane r = bytes 4g .. 4g+3 of row r's. Rows r,
// r+4, r+8, r+12 share a register (one per 128-bit lane), then a 4x4 transpose within the lanes.
ENGINE_KERNEL_INLINE void transpose_16x16(const std::uint8_t* const* block, std::size_t offset, __m512i* out) {
  __m512i z[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const auto load = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[r] + offset)); };
    __m512i v = _mm512_castsi128_si512(load(i));
    v = _mm512_inserti32x4(v, load(i + 4), 1);
    v = _mm512_inserti32x4(v, load(i + 8), 2);
    z[i] = _mm512_inserti32x4(v, load(i + 12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Where one ggml block of a tile's 16 rows is read from. dwords(offset, out): out[i] lane r = bytes
// offset + 4i .. offset + 4i + 3 of row r's block, for i < 4.
// - StoredBlocks: the rows' blocks as the file stores them (`block[r]`: row r's), transposed here.
// - RepackedBlock<Type>: repack_tiles' copy, whose dwords are already in lanes (repack_tiles says where).
struct StoredBlocks {
  const std::uint8_t* const* block;
  ENGINE_KERNEL_INLINE void dwords(std::size_t offset, __m512i* out) const { transpose_16x16(block, offset, out); }
};

// The bytes of a ggml block outside its 16-byte pieces, which repack_tiles keeps as columns: each field's 16
// rows' values side by side (a field of 2 bytes, an f16, or of 4, a word or two f16s), in the block's order,
// before the pieces (the head) or after them (the tail). A type's repacked block has one or the other.
struct Columns {
  int count;
  int width[4];
};

constexpr Columns head_columns(int type) {
  switch (type) {
    case kQ8_0:
    case kQ4_0:
    case kIQ4_NL: return {1, {2}};     // d
    case kQ4_1: return {1, {4}};       // d, m
    case kQ5_0: return {2, {2, 4}};    // d; the fifth bits
    case kQ5_1: return {2, {4, 4}};    // d, m; the fifth bits
    case kIQ4_XS: return {2, {4, 4}};  // d, the scales' top bits; their low nibbles
    default: return {0, {}};
  }
}

constexpr Columns tail_columns(int type) {
  switch (type) {
    case kQ6_K: return {1, {2}};           // d
    case kQ2_K: return {1, {4}};           // d, dmin
    case kQ3_K: return {4, {4, 4, 4, 2}};  // the 12 bytes of scales; d
    default: return {0, {}};
  }
}

constexpr std::size_t column_bytes(Columns columns) {
  std::size_t bytes = 0;
  for (int i = 0; i < columns.count; ++i) bytes += static_cast<std::size_t>(columns.width[i]);
  return bytes;
}

// The types whose weights the level repacks at load: what is left of a block besides its head and tail is
// whole 16-byte pieces.
constexpr bool repacks(int type) {
  return type == kQ4_K || type == kQ5_K || column_bytes(head_columns(type)) + column_bytes(tail_columns(type)) != 0;
}

// Where repack_tiles puts ggml block g of a tile of `blocks` blocks, from the tile's first byte: its columns
// (head or tail) and the dwords of its 16-byte pieces in lanes (64 bytes per dword). Blocks go in pairs, so
// that every block's pieces start on a cache line where one block's 16 * bb bytes are not whole lines (Q8_0:
// 544, Q4_0: 288, Q6_K: 3,360): per pair, both blocks' heads, both blocks' pieces, both blocks' tails; a last
// block without a pair alone, in the same order.
struct RepackedOffsets {
  std::size_t columns;
  std::size_t pieces;
};

template <int Type>
ENGINE_KERNEL_INLINE RepackedOffsets repacked_offsets(std::size_t g, std::size_t blocks) {
  constexpr std::size_t bb = block_bytes(Type), head = column_bytes(head_columns(Type));
  constexpr std::size_t tail = column_bytes(tail_columns(Type)), pieces = bb - head - tail;
  static_assert(head == 0 || tail == 0);
  const std::size_t start = (g & ~std::size_t{1}) * kLanes * bb, second = g & 1;
  const std::size_t in_unit = (g | 1) < blocks ? 2 : 1;
  const std::size_t pieces_at = start + in_unit * kLanes * head;
  const std::size_t tails_at = pieces_at + in_unit * kLanes * pieces;
  return {head != 0 ? start + second * kLanes * head : tails_at + second * kLanes * tail,
          pieces_at + second * kLanes * pieces};
}

// A column in lanes: a word as it is, an f16 in the low half.
ENGINE_KERNEL_INLINE __m512i column_lanes(const std::uint8_t* at, int width) {
  return width == 4 ? _mm512_loadu_si512(at)
                    : _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
}

// The fields of `fields` (their columns from `at`, the first at byte `first` of the block) that start at
// offset + 4 i, in out[i]; zero where none starts.
ENGINE_KERNEL_INLINE void fields_in_lanes(const std::uint8_t* at, Columns fields, std::size_t first, std::size_t offset,
                                          __m512i* out) {
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) out[i] = _mm512_setzero_si512();
  std::size_t field = first;
#pragma GCC unroll 4
  for (int c = 0; c < fields.count; ++c) {
    if (field >= offset && (field - offset) % 4 == 0 && field - offset < 16)
      out[(field - offset) / 4] = column_lanes(at, fields.width[c]);
    field += static_cast<std::size_t>(fields.width[c]);
    at += kLanes * static_cast<std::size_t>(fields.width[c]);
  }
}

template <int Type>
struct RepackedBlock {
  const std::uint8_t* columns;
  const std::uint8_t* pieces;

  ENGINE_KERNEL_INLINE static RepackedBlock in_tile(const std::uint8_t* tile, std::size_t g, std::size_t blocks) {
    const RepackedOffsets at = repacked_offsets<Type>(g, blocks);
    return {tile + at.columns, tile + at.pieces};
  }

  // As StoredBlocks::dwords for the bytes the kernels read: in the head or the tail, out[i] holds the field
  // starting at offset + 4 i (a 2-byte field in the dword's low half; zero where no field starts); at bb - 16 in
  // a block whose tail is one field, out[3] holds it in the dword's top bytes (out[0..2] zero); elsewhere the
  // pieces.
  ENGINE_KERNEL_INLINE void dwords(std::size_t offset, __m512i* out) const {
    constexpr Columns head = head_columns(Type), tail = tail_columns(Type);
    constexpr std::size_t head_bytes = column_bytes(head), tail_bytes = column_bytes(tail), bb = block_bytes(Type);
    if (offset < head_bytes) return fields_in_lanes(columns, head, 0, offset, out);
    if (tail_bytes != 0 && offset >= bb - tail_bytes)
      return fields_in_lanes(columns, tail, bb - tail_bytes, offset, out);
    if (tail.count == 1 && offset == bb - 16) {
      out[0] = out[1] = out[2] = _mm512_setzero_si512();
      out[3] = _mm512_slli_epi32(column_lanes(columns, tail.width[0]), 8 * (4 - tail.width[0]));
      return;
    }
    const std::uint8_t* at = pieces + 16 * (offset - head_bytes);  // bytes offset .. offset + 15: dwords in lanes
#pragma GCC unroll 4
    for (std::size_t i = 0; i < 4; ++i) out[i] = _mm512_loadu_si512(at + 64 * i);
  }
};

// 32 bytes at `offset` of each row's block, in lanes: out[0..7].
template <class Src>
ENGINE_KERNEL_INLINE void dwords32(const Src& src, std::size_t offset, __m512i* out) {
  src.dwords(offset, out);
  src.dwords(offset + 16, out + 4);
}

ENGINE_KERNEL_INLINE void store_weights(DecodedBlock& out, const __m512i* w) {
#pragma GCC unroll 8
  for (int j = 0; j < kGroups; ++j) _mm512_store_si512(out.w[j], w[j]);
}

ENGINE_KERNEL_INLINE __m512i low_nibbles(__m512i v) {
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

ENGINE_KERNEL_INLINE __m512i high_nibbles(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
}

// Q6_K's 6-bit values: `nibbles` | (bits 2k and 2k + 1 of each byte of `pairs`, at bits 4 and 5). One shift
// (none for k = 2) brings the pair to bits 4-5 and one ternary-logic op masks and ors it (0xF8: a | (b & c)).
ENGINE_KERNEL_INLINE __m512i with_high_pair(__m512i nibbles, __m512i pairs, int k) {
  __m512i at4;
  switch (k) {
    case 0: at4 = _mm512_slli_epi16(pairs, 4); break;
    case 1: at4 = _mm512_slli_epi16(pairs, 2); break;
    case 2: at4 = pairs; break;
    default: at4 = _mm512_srli_epi16(pairs, 2); break;
  }
  return _mm512_ternarylogic_epi32(nibbles, at4, _mm512_set1_epi8(0x30), 0xF8);
}

// Bits [shift, shift + 4) of each lane's dword spread to bit 4 of its four bytes, one bit a byte (Q5_0 / Q5_1:
// the fifth bits of a group's four elements). Bit i lands at 7 i by the multiply (no two copies overlap, so
// nothing carries) and at bit 8 i after the mask.
ENGINE_KERNEL_INLINE __m512i spread_bits(__m512i v, int shift) {
  const __m512i nibble = _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(0xF));
  const __m512i spread = _mm512_mullo_epi32(nibble, _mm512_set1_epi32(0x00204081));
  return _mm512_slli_epi32(_mm512_and_si512(spread, _mm512_set1_epi32(0x01010101)), 4);
}

// IQ4_NL's and IQ4_XS's 16 levels plus 128 (unsigned bytes: weight_offset takes the 128 off), made at compile
// time; iq4_levels() puts them in each 128-bit lane for vpshufb.
struct Iq4Levels {
  alignas(16) std::uint8_t value[16];
};

constexpr Iq4Levels unsigned_iq4_levels() {
  Iq4Levels levels{};
  for (int i = 0; i < 16; ++i) levels.value[i] = static_cast<std::uint8_t>(kIq4Values[i] + 128);
  return levels;
}

constexpr Iq4Levels kIq4UnsignedLevels = unsigned_iq4_levels();

ENGINE_KERNEL_INLINE __m512i iq4_levels() {
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4UnsignedLevels.value)));
}

// The K-quants whose blocks of 32 are bit fields of 32-byte runs: Q4_K and Q5_K nibbles (two blocks per run,
// at 16 and 48), Q2_K and Q3_K two-bit fields (four per run, at 16 and 32); Q5_K's fifth bits (at 16) and Q3_K's
// third (at 0) in a plane of 32 bytes, bit i of byte j for element j of block i.
struct FieldLayout {
  int runs;   // byte of the first run
  int width;  // bits per field
  int plane;  // byte of the top bits' plane, or -1
};

constexpr bool bit_fields(int type) {
  return type == kQ4_K || type == kQ5_K || type == kQ2_K || type == kQ3_K;
}

constexpr FieldLayout field_layout(int type) {
  switch (type) {
    case kQ4_K: return {16, 4, -1};
    case kQ5_K: return {48, 4, 16};
    case kQ2_K: return {16, 2, -1};
    default: return {32, 2, 0};  // kQ3_K
  }
}

// Field f of each byte (unsigned).
template <FieldLayout Layout>
ENGINE_KERNEL_INLINE __m512i field_of(__m512i v, int f) {
  const __m512i mask = _mm512_set1_epi8(static_cast<char>((1 << Layout.width) - 1));
  if (f == 0) return _mm512_and_si512(v, mask);
  return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(Layout.width * f)), mask);
}

// Bit `bit` of each byte of the plane, moved above the field's bits.
template <FieldLayout Layout>
ENGINE_KERNEL_INLINE __m512i top_bit_of(__m512i plane, int bit) {
  const __m512i one = _mm512_and_si512(_mm512_srl_epi16(plane, _mm_cvtsi32_si128(bit)), _mm512_set1_epi8(1));
  return _mm512_sll_epi16(one, _mm_cvtsi32_si128(Layout.width));
}

// One ggml block of 16 rows into its sub_blocks(Type) blocks of 32, in order: sink(i, w) with w[j] lane r row
// r's unsigned weight bytes 4j .. 4j+3 of block of 32 number i.
template <int Type, class Src, class Sink>
ENGINE_KERNEL_INLINE void decode_block(const Src& block, Sink&& sink) {
  __m512i w[kGroups];
  if constexpr (Type == kQ8_0) {
    // q + 128 as an unsigned byte.
    dwords32(block, 2, w);
#pragma GCC unroll 8
    for (int j = 0; j < kGroups; ++j) w[j] = _mm512_xor_si512(w[j], _mm512_set1_epi8(static_cast<char>(0x80)));
    sink(0, w);
  } else if constexpr (is_nibble32_type(Type)) {
    // Byte i of the nibbles at the layout's qs holds element i (low nibble) and element i + 16 (high nibble);
    // Q5's fifth bits (bit j of the word at qh: element j's) on top.
    constexpr Nibble32Layout layout = nibble32_layout(Type);
    __m512i packed[4], fifth[4];
    block.dwords(static_cast<std::size_t>(layout.qs), packed);
    if constexpr (layout.qh >= 0) block.dwords(static_cast<std::size_t>(layout.qh), fifth);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      w[g] = low_nibbles(packed[g]);
      w[4 + g] = high_nibbles(packed[g]);
      if constexpr (layout.qh >= 0) {
        w[g] = _mm512_or_si512(w[g], spread_bits(fifth[0], 4 * g));
        w[4 + g] = _mm512_or_si512(w[4 + g], spread_bits(fifth[0], 16 + 4 * g));
      }
    }
    sink(0, w);
  } else if constexpr (Type == kIQ4_NL || Type == kIQ4_XS) {
    // Q4_0's nibbles (IQ4_XS: 16 bytes per block of 32 from byte 8), each replaced by its level.
    const __m512i levels = iq4_levels();
    for (int sub = 0; sub < static_cast<int>(sub_blocks(Type)); ++sub) {
      __m512i packed[4];
      block.dwords(Type == kIQ4_NL ? 2 : 8 + 16 * static_cast<std::size_t>(sub), packed);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        w[g] = _mm512_shuffle_epi8(levels, low_nibbles(packed[g]));
        w[4 + g] = _mm512_shuffle_epi8(levels, high_nibbles(packed[g]));
      }
      sink(sub, w);
    }
  } else if constexpr (bit_fields(Type)) {
    // Run r of 32 bytes holds blocks of 32 kFields r .. kFields r + kFields - 1, a field of each byte each; the
    // plane's bit i of byte j is element j's top bit of block i.
    constexpr FieldLayout layout = field_layout(Type);
    constexpr int kFields = 8 / layout.width;
    __m512i plane[kGroups];
    if constexpr (layout.plane >= 0) dwords32(block, static_cast<std::size_t>(layout.plane), plane);
#pragma GCC unroll 4
    for (int run = 0; run < 8 / kFields; ++run) {
      __m512i packed[kGroups];
      dwords32(block, static_cast<std::size_t>(layout.runs + 32 * run), packed);
#pragma GCC unroll 4
      for (int f = 0; f < kFields; ++f) {
        const int sub = kFields * run + f;
#pragma GCC unroll 8
        for (int g = 0; g < kGroups; ++g) {
          w[g] = field_of<layout>(packed[g], f);
          if constexpr (layout.plane >= 0) w[g] = _mm512_or_si512(w[g], top_bit_of<layout>(plane[g], sub));
        }
        sink(sub, w);
      }
    }
  } else {
    // Q6_K: per 128 elements, 64 bytes of low nibbles (bytes 0-31: blocks 0 and 2 of the four, 32-63: 1 and
    // 3; low nibbles for 0 and 1, high for 2 and 3) and 32 bytes of high pairs (bits 2k for block k).
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i low[2][kGroups], pairs[kGroups];
      dwords32(block, 64 * static_cast<std::size_t>(h), low[0]);
      dwords32(block, 64 * static_cast<std::size_t>(h) + 32, low[1]);
      dwords32(block, 128 + 32 * static_cast<std::size_t>(h), pairs);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 8
        for (int j = 0; j < kGroups; ++j) {
          const __m512i nibbles = k < 2 ? low_nibbles(low[k & 1][j]) : high_nibbles(low[k & 1][j]);
          w[j] = with_high_pair(nibbles, pairs[j], k);
        }
        sink(4 * h + k, w);
      }
    }
  }
}

// 16 f16 values, one per lane: the low 16 bits of each lane's dword, or the high ones.
ENGINE_KERNEL_INLINE __m512 halves(__m512i v, bool high) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(high ? _mm512_srli_epi32(v, 16) : v));
}

// Byte i of each lane's dword as a float, unsigned or signed.
ENGINE_KERNEL_INLINE __m512 unsigned_byte(__m512i v, int i) {
  return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * i), _mm512_set1_epi32(0xFF)));
}
ENGINE_KERNEL_INLINE __m512 signed_byte(__m512i v, int i) {
  return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24));
}

// The rows' scales of one ggml block into its decoded blocks, row r in lane r: ggml's f32 products (a
// sub-block scale times d), as the float kernels compute them.
// (Out: DecodedBlock, or BlockScales<kLanes> for the one-token product.)
template <int Type, class Src, class Out>
ENGINE_KERNEL_INLINE void decode_scales(const Src& block, Out* out) {
  __m512i head[4];
  if constexpr (block_elements(Type) == 32) {
    // An f16 d at byte 0; Q4_1 / Q5_1 an f16 min after it, kept as -min (an exact negation) so that the min's
    // term is the K-quants' d q - m.
    block.dwords(0, head);
    _mm512_store_ps(out[0].d, halves(head[0], false));
    if constexpr (Type == kQ4_1 || Type == kQ5_1) {
      const __m512i min = _mm512_castps_si512(halves(head[0], true));
      _mm512_store_ps(out[0].m, _mm512_castsi512_ps(_mm512_xor_si512(min, _mm512_set1_epi32(INT32_MIN))));
    }
  } else if constexpr (Type == kIQ4_XS) {
    // d and the eight scales' top two bits (bits 2j of the word after d), then their low nibbles (nibble j of
    // the next word): d (s - 32) per block of 32.
    block.dwords(0, head);
    const __m512 d = halves(head[0], false);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i low = _mm512_and_si512(_mm512_srli_epi32(head[1], 4 * j), _mm512_set1_epi32(0xF));
      const __m512i top = _mm512_and_si512(_mm512_srli_epi32(head[0], 16 + 2 * j), _mm512_set1_epi32(3));
      const __m512i scale = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(top, 4)), _mm512_set1_epi32(32));
      _mm512_store_ps(out[j].d, _mm512_mul_ps(d, _mm512_cvtepi32_ps(scale)));
    }
  } else if constexpr (Type == kQ2_K) {
    // 16 bytes of a scale (low nibble) and a min (high nibble) per 16 elements, then d and dmin at 80 (the
    // last word read from 68): the halves' d * scale and dmin * min.
    __m512i tail[4];
    block.dwords(0, head);
    block.dwords(68, tail);
    const __m512 d = halves(tail[3], false), dmin = halves(tail[3], true);
    const __m512i four = _mm512_set1_epi32(0x0F0F0F0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i scales = _mm512_and_si512(head[i], four);
      const __m512i mins = _mm512_and_si512(_mm512_srli_epi32(head[i], 4), four);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        auto& block32 = out[2 * i + h];
        _mm512_store_ps(block32.d, _mm512_mul_ps(d, unsigned_byte(scales, 2 * h)));
        _mm512_store_ps(block32.m, _mm512_mul_ps(d, unsigned_byte(scales, 2 * h + 1)));
        _mm512_store_ps(block32.min0, _mm512_mul_ps(dmin, unsigned_byte(mins, 2 * h)));
        _mm512_store_ps(block32.min1, _mm512_mul_ps(dmin, unsigned_byte(mins, 2 * h + 1)));
      }
    }
  } else if constexpr (Type == kQ3_K) {
    // 12 bytes of sixteen 6-bit scales at 96 (low nibbles: bytes 0-7, scale j's in byte j % 8, high for j >= 8;
    // top two bits: bits 2 (j / 4) of byte 8 + j % 4), then d: d (s - 32), two per block of 32 (d, m). As
    // stored, from the 16 bytes at 94 (the block's last: 96 would read past its end), realigned by two bytes;
    // repacked, from its tail's columns.
    __m512i word[4];
    __m512 d;
    if constexpr (requires { block.block; }) {
      __m512i last[4];
      block.dwords(94, last);
#pragma GCC unroll 3
      for (int i = 0; i < 3; ++i) {
        word[i] = _mm512_or_si512(_mm512_srli_epi32(last[i], 16), _mm512_slli_epi32(last[i + 1], 16));
      }
      d = halves(last[3], true);
    } else {
      block.dwords(96, word);
      d = halves(word[3], false);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512i low = _mm512_srli_epi32(word[(j % 8) / 4], 8 * (j % 4) + (j < 8 ? 0 : 4));
      const __m512i top = _mm512_srli_epi32(word[2], 8 * (j % 4) + 2 * (j / 4));
      const __m512i scale =
          _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi32(0xF)),
                                           _mm512_slli_epi32(_mm512_and_si512(top, _mm512_set1_epi32(3)), 4)),
                           _mm512_set1_epi32(32));
      _mm512_store_ps(j % 2 == 0 ? out[j / 2].d : out[j / 2].m, _mm512_mul_ps(d, _mm512_cvtepi32_ps(scale)));
    }
  } else if constexpr (Type == kQ4_K || Type == kQ5_K) {
    // d and dmin, then the 12 bytes of 6-bit scales and mins as three words u0, u1, u2: scales and mins 0-3
    // are the low 6 bits of u0's and u1's bytes; 4-7 a nibble of u2's bytes (low: scales, high: mins) with
    // their top two bits from the top of u0's (scales) and u1's (mins) bytes.
    block.dwords(0, head);
    const __m512 d = halves(head[0], false), dmin = halves(head[0], true);
    const __m512i six = _mm512_set1_epi32(0x3F3F3F3F), four = _mm512_set1_epi32(0x0F0F0F0F);
    const __m512i two = _mm512_set1_epi32(0x03030303);
    const __m512i scales[2] = {
        _mm512_and_si512(head[1], six),
        _mm512_or_si512(_mm512_and_si512(head[3], four),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(head[1], 6), two), 4))};
    const __m512i mins[2] = {
        _mm512_and_si512(head[2], six),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(head[3], 4), four),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(head[2], 6), two), 4))};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      _mm512_store_ps(out[j].d, _mm512_mul_ps(unsigned_byte(scales[j / 4], j % 4), d));
      _mm512_store_ps(out[j].m, _mm512_mul_ps(unsigned_byte(mins[j / 4], j % 4), dmin));
    }
  } else {
    // Q6_K: 16 signed scales at byte 192, d at 208 (the top half of the last word read from 194).
    __m512i tail[4];
    block.dwords(192, head);
    block.dwords(194, tail);
    const __m512 d = halves(tail[3], true);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      _mm512_store_ps(out[j].d, _mm512_mul_ps(signed_byte(head[j / 2], 2 * (j % 2)), d));
      _mm512_store_ps(out[j].m, _mm512_mul_ps(signed_byte(head[j / 2], 2 * (j % 2) + 1), d));
    }
  }
}

// Blocks of 32 [first, first + count) of a tile into `chunk` (both whole ggml blocks), ggml block g read from
// source(g) (StoredBlocks or RepackedBlock). Prefetches (into L2) the tile at `prefetch` at the rate this one is
// read (a tile's bytes are contiguous in either layout, ggml block g's 16 * bb of them at 16 * bb * g).
template <int Type, class Source>
ENGINE_KERNEL_INLINE void decode_blocks(Source&& source, std::size_t first, std::size_t count,
                                        const std::uint8_t* prefetch, DecodedBlock* chunk) {
  constexpr std::size_t bb = block_bytes(Type), per_block = sub_blocks(Type);
  for (std::size_t b = 0; b < count; b += per_block) {
    const std::size_t ggml_block = (first + b) / per_block;
    const auto src = source(ggml_block);
    decode_scales<Type>(src, chunk + b);
    const std::uint8_t* ahead = prefetch + ggml_block * kLanes * bb;
#pragma GCC unroll 16
    for (std::size_t i = 0; i < kLanes * bb; i += 64) __builtin_prefetch(ahead + i, 0, 1);
    decode_block<Type>(src, [&](int i, const __m512i* w) { store_weights(chunk[b + static_cast<std::size_t>(i)], w); });
  }
}

// decode_blocks over a tile as stored: row r's blocks at tile + r * row_bytes; rows >= `rows` are zeros.
template <int Type>
void decode_chunk(const std::uint8_t* tile, std::size_t row_bytes, std::size_t rows, std::size_t first,
                  std::size_t count, const std::uint8_t* prefetch, DecodedBlock* chunk) {
  const std::uint8_t* block[kLanes];
  const auto source = [&](std::size_t ggml_block) {
#pragma GCC unroll 16
    for (int r = 0; r < kLanes; ++r) {
      block[r] =
          static_cast<std::size_t>(r) < rows ? tile + r * row_bytes + ggml_block * block_bytes(Type) : kZeroBlock;
    }
    return StoredBlocks{block};
  };
  decode_blocks<Type>(source, first, count, prefetch, chunk);
}

// ---- repacked weights ------------------------------------------------------------------------------------

// Tiles [first, last) of 16 rows of `m` repacked. A tile keeps its 16 * row_bytes bytes and its place; inside
// it, ggml block g's bytes go where repacked_offsets says: its head's or tail's fields as columns (Columns), and
// for each 16-byte piece of the block, dword i of the 16 rows' pieces in the 64 bytes at 64 i. Rows past the
// matrix are zeros.
template <int Type>
void repack_tiles(const Rows& m, std::size_t first, std::size_t last, std::byte* out) {
  constexpr Columns head_fields = head_columns(Type), tail_fields = tail_columns(Type);
  constexpr std::size_t bb = block_bytes(Type), head = column_bytes(head_fields), tail = column_bytes(tail_fields);
  static_assert(repacks(Type) && (bb - head - tail) % 16 == 0 && bb <= sizeof kZeroBlock);
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  auto* dst = reinterpret_cast<std::uint8_t*>(out);
  const std::size_t blocks = m.row_bytes / bb;
  for (std::size_t tile = first; tile < last; ++tile) {
    const std::size_t r0 = tile * kLanes;
    for (std::size_t g = 0; g < blocks; ++g) {
      const std::uint8_t* block[kLanes];
      for (std::size_t r = 0; r < kLanes; ++r)
        block[r] = r0 + r < m.rows ? w + (r0 + r) * m.row_bytes + g * bb : kZeroBlock;
      const RepackedOffsets at = repacked_offsets<Type>(g, blocks);
      std::uint8_t* base = dst + r0 * m.row_bytes;
      // The head's or the tail's fields, each a column of the 16 rows' values.
      const Columns fields = head != 0 ? head_fields : tail_fields;
      std::size_t field = head != 0 ? 0 : bb - tail, column = at.columns;
      for (int c = 0; c < fields.count; ++c) {
        const auto width = static_cast<std::size_t>(fields.width[c]);
        for (std::size_t r = 0; r < kLanes; ++r) std::memcpy(base + column + width * r, block[r] + field, width);
        field += width;
        column += kLanes * width;
      }
      for (std::size_t piece = head; piece < bb - tail; piece += 16) {
        __m512i v[4];
        transpose_16x16(block, piece, v);
#pragma GCC unroll 4
        for (std::size_t i = 0; i < 4; ++i) _mm512_storeu_si512(base + at.pieces + 16 * (piece - head) + 64 * i, v[i]);
      }
    }
  }
}

// decode_blocks over a repacked tile (`tile`: its first row's repacking, of rows of `row_bytes`); the same
// decoded blocks as stored.
template <int Type>
void decode_repacked_chunk(const std::uint8_t* tile, std::size_t row_bytes, std::size_t first, std::size_t count,
                           const std::uint8_t* prefetch, DecodedBlock* chunk) {
  const std::size_t blocks = row_bytes / block_bytes(Type);
  const auto source = [&](std::size_t ggml_block) { return RepackedBlock<Type>::in_tile(tile, ggml_block, blocks); };
  decode_blocks<Type>(source, first, count, prefetch, chunk);
}

// ---- the product ---------------------------------------------------------------------------------------

// The constant the unsigned weight bytes exceed the signed weights by (0: the weights are unsigned, with a
// separate min term).
constexpr std::int32_t weight_offset(int type) {
  switch (type) {
    case kQ8_0:
    case kIQ4_NL:
    case kIQ4_XS: return 128;
    case kQ4_0: return 8;
    case kQ5_0: return 16;
    case kQ6_K: return 32;
    case kQ3_K: return 4;
    default: return 0;
  }
}

// Groups [first, last) of a block against one byte of a token's q, from `dot`.
template <int First, int Last>
ENGINE_KERNEL_INLINE __m512i dot_groups(__m512i dot, const __m512i* w, const std::uint8_t* q) {
#pragma GCC unroll 8
  for (int j = First; j < Last; ++j) dot = _mm512_dpbusd_epi32(dot, w[j], _mm512_set1_epi32(load_i32(q + 4 * j)));
  return dot;
}

// Groups [first, last) against the token's q = 256 * high + low, from `start`: exact in int32.
template <int First, int Last>
ENGINE_KERNEL_INLINE __m512i dot_q(__m512i start, const __m512i* w, const std::uint8_t* high, const std::uint8_t* low) {
  const __m512i h = dot_groups<First, Last>(_mm512_setzero_si512(), w, high);
  return _mm512_add_epi32(_mm512_slli_epi32(h, 8), dot_groups<First, Last>(start, w, low));
}

// One block of 32 of 16 rows (`w` as decode_block gives it; d and m its rows' scales) against block k of a
// token, added to acc: the chain of the header comment, one lane per row.
//
// The chain's two forms after the integer dots (the offset's term already in them), shared with gemv_block:
// a whole block of 32, then its min's term (has_min types);
template <int Type, class Scales>
ENGINE_KERNEL_INLINE __m512 add_whole(__m512 acc, __m512i dot, const Scales& scales, const QuantizedToken& token,
                                      std::size_t k) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(_mm512_load_ps(scales.d), _mm512_set1_ps(token.d[k])),
                        acc);
  if constexpr (has_min(Type))
    acc = _mm512_fnmadd_ps(_mm512_load_ps(scales.m), _mm512_set1_ps(token.scaled_sum[k]), acc);
  return acc;
}

// or its two halves of 16, each with its scale, then (Q2_K) each half's min times d_x * the half's sum of q.
template <int Type, class Scales>
ENGINE_KERNEL_INLINE __m512 add_halves(__m512 acc, __m512i dot_low, __m512i dot_high, const Scales& scales,
                                       const QuantizedToken& token, std::size_t k) {
  const __m512 dx = _mm512_set1_ps(token.d[k]);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_low), _mm512_mul_ps(_mm512_load_ps(scales.d), dx), acc);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_high), _mm512_mul_ps(_mm512_load_ps(scales.m), dx), acc);
  if constexpr (half_mins(Type)) {
    const std::int32_t first_half = token.sum_low[k], second_half = token.sum[k] - first_half;
    acc =
        _mm512_fnmadd_ps(_mm512_load_ps(scales.min0), _mm512_set1_ps(token.d[k] * static_cast<float>(first_half)), acc);
    acc = _mm512_fnmadd_ps(_mm512_load_ps(scales.min1), _mm512_set1_ps(token.d[k] * static_cast<float>(second_half)),
                           acc);
  }
  return acc;
}

template <int Type, class Scales>
ENGINE_KERNEL_INLINE __m512 add_block(__m512 acc, const __m512i* w, const Scales& scales, const QuantizedToken& token,
                                      std::size_t k) {
  constexpr std::int32_t offset = weight_offset(Type);
  const std::uint8_t* high = token.high + 32 * k;
  const std::uint8_t* low = token.low + 32 * k;
  if constexpr (halves(Type)) {
    const std::int32_t first_half = token.sum_low[k];
    const __m512i dot_low = dot_q<0, 4>(_mm512_set1_epi32(-offset * first_half), w, high, low);
    const __m512i dot_high = dot_q<4, 8>(_mm512_set1_epi32(-offset * (token.sum[k] - first_half)), w, high, low);
    return add_halves<Type>(acc, dot_low, dot_high, scales, token, k);
  } else {
    // Two chains of four vpdpbusd each instead of one of eight: half the latency per block (integer sums, so
    // the same bits).
    const __m512i first = dot_q<0, kGroups / 2>(_mm512_set1_epi32(-offset * token.sum[k]), w, high, low);
    const __m512i second = dot_q<kGroups / 2, kGroups>(_mm512_setzero_si512(), w, high, low);
    return add_whole<Type>(acc, _mm512_add_epi32(first, second), scales, token, k);
  }
}

// T tokens against `count` decoded blocks (blocks [first, first + count) of the row), accumulating into
// acc[t * 16 ...].
template <int Type, int T>
void micro(const DecodedBlock* chunk, std::size_t first, std::size_t count, const std::byte* x, std::size_t stride,
           std::size_t blocks, float* acc) {
  QuantizedToken token[T];
  __m512 a[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    token[t] = token_at(x + t * stride, blocks);
    a[t] = _mm512_load_ps(acc + t * kLanes);
  }
  for (std::size_t b = 0; b < count; ++b) {
    __m512i w[kGroups];
#pragma GCC unroll 8
    for (int j = 0; j < kGroups; ++j) w[j] = _mm512_load_si512(chunk[b].w[j]);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) a[t] = add_block<Type>(a[t], w, chunk[b], token[t], first + b);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_store_ps(acc + t * kLanes, a[t]);
}

// ---- one token: no transpose ---------------------------------------------------------------------------

ENGINE_KERNEL_INLINE __m256i load256(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 32 bytes at a (low half) and at b (high half).
ENGINE_KERNEL_INLINE __m512i load_pair(const std::uint8_t* a, const std::uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

// Block of 32 `sub` of two rows' ggml blocks (a in the low 256 bits, b in the high) as unsigned bytes in
// element order: the same bytes decode_block puts in lanes (weight_offset above them).
template <int Type>
ENGINE_KERNEL_INLINE __m512i pair_values(const std::uint8_t* a, const std::uint8_t* b, int sub) {
  if constexpr (Type == kQ8_0) {
    return _mm512_xor_si512(load_pair(a + 2, b + 2), _mm512_set1_epi8(static_cast<char>(0x80)));
  } else if constexpr (is_nibble32_type(Type) || Type == kIQ4_NL || Type == kIQ4_XS) {
    // Byte i holds element i (low nibble) and element i + 16 (high nibble): each row's 16 bytes twice, the
    // second copy shifted down by 4. Q5's fifth bits (bit j of the word at qh: element j's) add 16 where set;
    // IQ4's nibbles index its levels.
    std::size_t qs = 2;
    if constexpr (is_nibble32_type(Type)) qs = static_cast<std::size_t>(nibble32_layout(Type).qs);
    if constexpr (Type == kIQ4_XS) qs = 8 + 16 * static_cast<std::size_t>(sub);
    const auto load = [&](const std::uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs)); };
    __m512i v = _mm512_castsi128_si512(load(a));
    v = _mm512_inserti32x4(v, load(a), 1);
    v = _mm512_inserti32x4(v, load(b), 2);
    v = _mm512_inserti32x4(v, load(b), 3);
    const __m512i nibbles = low_nibbles(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4));
    if constexpr (Type == kIQ4_NL || Type == kIQ4_XS) return _mm512_shuffle_epi8(iq4_levels(), nibbles);
    if constexpr (is_nibble32_type(Type) && nibble32_layout(Type).qh >= 0) {
      constexpr std::size_t qh = nibble32_layout(Type).qh;
      const auto bits = static_cast<std::uint64_t>(static_cast<std::uint32_t>(load_i32(a + qh))) |
                        static_cast<std::uint64_t>(static_cast<std::uint32_t>(load_i32(b + qh))) << 32;
      return _mm512_mask_add_epi8(nibbles, _cvtu64_mask64(bits), nibbles, _mm512_set1_epi8(0x10));
    }
    return nibbles;
  } else if constexpr (bit_fields(Type)) {
    // Layout in decode_block.
    constexpr FieldLayout layout = field_layout(Type);
    constexpr int kFields = 8 / layout.width;
    const std::size_t at = static_cast<std::size_t>(layout.runs + 32 * (sub / kFields));
    const __m512i value = field_of<layout>(load_pair(a + at, b + at), sub % kFields);
    if constexpr (layout.plane < 0) return value;
    constexpr auto plane = static_cast<std::size_t>(layout.plane);
    return _mm512_or_si512(value, top_bit_of<layout>(load_pair(a + plane, b + plane), sub));
  } else {
    // Q6_K (layout in decode_block).
    const auto half = static_cast<std::size_t>(sub / 4);
    const int k = sub % 4;
    const std::size_t at = 64 * half + 32 * static_cast<std::size_t>(k & 1);
    const __m512i low = load_pair(a + at, b + at);
    const __m512i nibbles = k < 2 ? low_nibbles(low) : high_nibbles(low);
    return with_high_pair(nibbles, load_pair(a + 128 + 32 * half, b + 128 + 32 * half), k);
  }
}

// The rows in the two halves of pair register i, chosen so that reduce() leaves row r in lane r.
constexpr int kPairLow[8] = {0, 1, 2, 3, 8, 9, 10, 11};
constexpr int kPairHigh[8] = {4, 5, 6, 7, 12, 13, 14, 15};

// v[i] holds 8 int32 partial dots of row kPairLow[i] (lanes 0-7) and of kPairHigh[i] (8-15); lanes 0-3 of
// each half cover a block's elements 0-15, 4-7 elements 16-31. Lane r of first / second: row r's sum over
// elements 0-15 / 16-31 (integer sums: the same in any order).
ENGINE_KERNEL_INLINE void reduce(const __m512i* v, __m512i& first, __m512i& second) {
  __m512i a[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    a[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  }
  // Each 128-bit lane of b[i]: the four rows of registers 4i .. 4i+3 (one half's), summed over 16 elements.
  const __m512i b0 = _mm512_add_epi32(_mm512_unpacklo_epi64(a[0], a[1]), _mm512_unpackhi_epi64(a[0], a[1]));
  const __m512i b1 = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2], a[3]), _mm512_unpackhi_epi64(a[2], a[3]));
  // 128-bit lanes 0 and 2 of b: elements 0-15 of the low and the high rows; 1 and 3: elements 16-31.
  first = _mm512_shuffle_i32x4(b0, b1, 0x88);
  second = _mm512_shuffle_i32x4(b0, b1, 0xDD);
}

// micro's chain for one token and block of 32 without a chunk (int_gemv): two rows' 32 weights of the block
// per register in element order, vpdpbusd against the token's high and low bytes broadcast to both halves, the
// partial dots summed into lane r by reduce(): the same exact integer dots, so the same bits as the chunked
// product, with no transpose and no chunk to store and reload.
template <int Type>
ENGINE_KERNEL_INLINE void gemv_block(const std::uint8_t* const* row, int sub, const std::byte* x, std::size_t blocks,
                                     std::size_t k, const BlockScales<kLanes>& scales, __m512& acc) {
  constexpr std::int32_t offset = weight_offset(Type);
  const QuantizedToken token = token_at(x, blocks);
  const __m512i high = _mm512_broadcast_i64x4(load256(token.high + 32 * k));
  const __m512i low = _mm512_broadcast_i64x4(load256(token.low + 32 * k));
  __m512i dots[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const __m512i values = pair_values<Type>(row[kPairLow[i]], row[kPairHigh[i]], sub);
    const __m512i h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), values, high);
    dots[i] = _mm512_add_epi32(_mm512_slli_epi32(h, 8), _mm512_dpbusd_epi32(_mm512_setzero_si512(), values, low));
  }
  __m512i first, second;
  reduce(dots, first, second);
  if constexpr (halves(Type)) {
    const std::int32_t first_half = token.sum_low[k];
    const __m512i dot_low = _mm512_add_epi32(first, _mm512_set1_epi32(-offset * first_half));
    const __m512i dot_high = _mm512_add_epi32(second, _mm512_set1_epi32(-offset * (token.sum[k] - first_half)));
    acc = add_halves<Type>(acc, dot_low, dot_high, scales, token, k);
  } else {
    const __m512i dot = _mm512_add_epi32(_mm512_add_epi32(first, second), _mm512_set1_epi32(-offset * token.sum[k]));
    acc = add_whole<Type>(acc, dot, scales, token, k);
  }
}

struct Vnni {
  static constexpr std::size_t kLanes = kernels::kLanes;
  static constexpr std::size_t kChunkBlocks = kernels::kChunkBlocks;
  static constexpr std::size_t kTokenBlock = kernels::kTokenBlock;
  static constexpr std::size_t kTokenTile = kernels::kTokenTile;
  static constexpr std::size_t kPrefetchTiles = 1;
  static constexpr int kGemvPrefetchLocality = 1;
  // All at a ggml block's first block of 32, as before avx2int16 spread them (spreading is not measured here yet).
  static constexpr std::size_t kGemvPrefetchSteps = 1;
  using Decoded = DecodedBlock;
  using Acc = __m512;

  static std::size_t token_bytes(std::size_t cols) { return kernels::token_bytes(cols); }

  template <int Type>
  static void decode_scales(const std::uint8_t* const* rows, BlockScales<kLanes>* scales) {
    kernels::decode_scales<Type>(StoredBlocks{rows}, scales);
  }

  template <int Type>
  static void gemv_step(const std::uint8_t* const* rows, int sub, const std::byte* x, std::size_t blocks, std::size_t k,
                        const BlockScales<kLanes>& scales, __m512& acc) {
    gemv_block<Type>(rows, sub, x, blocks, k, scales, acc);
  }

  template <int Type>
  static void decode(const std::uint8_t* tile, std::size_t row_bytes, std::size_t rows, std::size_t first,
                     std::size_t count, const std::uint8_t* prefetch, DecodedBlock* chunk) {
    decode_chunk<Type>(tile, row_bytes, rows, first, count, prefetch, chunk);
  }

  template <int Type, int T>
  static void multiply(const DecodedBlock* chunk, std::size_t first, std::size_t count, const std::byte* x,
                       std::size_t stride, std::size_t blocks, float* acc) {
    micro<Type, T>(chunk, first, count, x, stride, blocks, acc);
  }
};

// One token against repacked rows (Rows.w: a tile's first row's repacking): each ggml block's dwords are loaded
// in lanes as they are, so the step is micro's for one token with no transpose, no reduction and no chunk: the
// same exact integer dots and f32 chain, so int_gemv's and int_matmul's bits.
template <int Type>
void repacked_gemv(const Rows& m, const std::byte* x, float* out, const float* bias) {
  constexpr std::size_t bb = block_bytes(Type), per_block = sub_blocks(Type);
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t blocks = m.cols / 32;
  const QuantizedToken token = token_at(x, blocks);
  for (std::size_t r0 = 0; r0 < m.rows; r0 += kLanes) {
    const std::uint8_t* tile = w + r0 * m.row_bytes;
    // The next tile, at the rate this one is read (prefetches past the matrix's end never fault).
    const std::uint8_t* ahead = tile + kLanes * m.row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (std::size_t g = 0; g < blocks / per_block; ++g) {
      const auto src = RepackedBlock<Type>::in_tile(tile, g, blocks / per_block);
#pragma GCC unroll 16
      for (std::size_t i = 0; i < kLanes * bb; i += 64)
        __builtin_prefetch(ahead + g * kLanes * bb + i, 0, Vnni::kGemvPrefetchLocality);
      BlockScales<kLanes> scales[per_block];
      decode_scales<Type>(src, scales);
      decode_block<Type>(src, [&](int i, const __m512i* wv) {
        acc = add_block<Type>(acc, wv, scales[i], token, g * per_block + static_cast<std::size_t>(i));
      });
    }
    const __mmask16 rows =
        m.rows - r0 >= kLanes ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (m.rows - r0)) - 1);
    if (bias != nullptr) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(rows, bias + r0));
    _mm512_mask_storeu_ps(out + r0, rows, acc);
  }
}

// int_matmul's Isa over repacked rows: Vnni's but for reading the blocks.
struct VnniRepacked : Vnni {
  template <int Type>
  static void decode(const std::uint8_t* tile, std::size_t row_bytes, std::size_t, std::size_t first, std::size_t count,
                     const std::uint8_t* prefetch, DecodedBlock* chunk) {
    decode_repacked_chunk<Type>(tile, row_bytes, first, count, prefetch, chunk);
  }
};

// Table::int8_matmul_repacked: one token by repacked_gemv, more by int_matmul over the repacked tiles.
template <int Type>
void repacked_product(const Rows& m, const std::byte* x, std::size_t tokens, float* out, std::size_t out_stride,
                      const float* bias) {
  if (tokens == 1) return repacked_gemv<Type>(m, x, out, bias);
  int_matmul<VnniRepacked, Type>(m, x, tokens, out, out_stride, bias);
}

#undef ENGINE_KERNEL_INLINE

}  // namespace
}  // namespace engine::cpu::kernels
