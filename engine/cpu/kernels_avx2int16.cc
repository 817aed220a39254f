// AVX2 with integer activations (vpmaddwd): quantized weights against activations quantized to 16-bit
// integers, for CPUs without AVX-512 VNNI (AMD Zen 2 and 3, Intel before Ice Lake). The avx2 table with an
// integer kernel for each quantized weight type (Table::int8_matmul); float weights keep avx2's kernels.
// Nothing from the standard library may be instantiated here (see kernels.h).
//
// The numerics are avx512vnni's (kernels_avx512vnni.cc), bit for bit:
// - Each token is quantized once per matmul call, per block of 32: d = max|x| / 32512 and
//   q = x * (32512 / max|x|) rounded to nearest even, kept here as one int16 per value.
// - Every (row, token, block of 32) dot product of weight integers and q is exact: the weights are widened
//   to signed int16 (Q4_0: q - 8, Q5_0: q - 16, Q6_K: q - 32, Q8_0 as stored, Q4_1, Q5_1 and the other K-quants
//   unsigned), vpmaddwd adds
//   pairs of products into int32 lanes and vpaddd sums them (at most 32 * 128 * 32512, about 1.3e8).
// - A row's result is the same f32 chain over its blocks, from 0, then + bias: Q8_0 / Q4_0 / Q5_0
//   acc = fma(dot, d_w * d_x, acc); Q4_K / Q5_K then acc = fma(-(dmin * min), d_x * sum(q), acc), Q4_1 / Q5_1
//   acc = fma(m, d_x * sum(q), acc); Q6_K
//   the two 16-element halves one after the other with their own scales.
// - 8 rows sit side by side in the 8 lanes (a lane's int32 holds a pair of its row's weights), so no lane
//   reduction is needed; rows past the matrix are zero-filled and never stored.
//
// vpmaddwd does 16 multiply-adds per instruction against an FMA's 8, and needs no second chain for a
// second activation byte (vpmaddubsw takes one byte, and its unsigned-by-signed pairs saturate at 16 bits).

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

#define ENGINE_KERNEL_INLINE [[gnu::always_inline]] inline

ENGINE_KERNEL_INLINE std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

ENGINE_KERNEL_INLINE __m256i load256(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// ---- activations -----------------------------------------------------------------------------------------

// A quantized token of `blocks` blocks of 32: every block's q as int16, then per block its d and d * sum of
// q, then per block d * the sums of its two halves' q (f32; Q2_K's mins), then per block the sums of its two
// halves' q (int32: what one-token products take back for the weights' offsets), padded to whole cache lines.
std::size_t token_bytes(std::size_t cols) {
  const std::size_t blocks = cols / 32;
  return (blocks * 88 + 63) / 64 * 64;
}

ENGINE_KERNEL_INLINE float max_lane(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

ENGINE_KERNEL_INLINE std::int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 16 int32 values (at most 32512 in magnitude) as int16 in order: vpackssdw packs within 128-bit halves, so
// the quarters come out as a0 b0 a1 b1 and one permute puts them back.
ENGINE_KERNEL_INLINE void store_int16(__m256i a, __m256i b, std::uint8_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8));
}

void quantize_token(const float* x, std::size_t cols, std::byte* out) {
  const std::size_t blocks = cols / 32;
  auto* q = reinterpret_cast<std::uint8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + 64 * blocks);
  auto* scaled_sum = reinterpret_cast<float*>(out + 68 * blocks);
  auto* half_sums = reinterpret_cast<float*>(out + 72 * blocks);
  auto* integer_half_sums = reinterpret_cast<std::int32_t*>(out + 80 * blocks);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (std::size_t b = 0; b < blocks; ++b) {
    __m256 v[4];
    __m256 largest = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 32 * b + 8 * static_cast<std::size_t>(i));
      largest = _mm256_max_ps(largest, _mm256_and_ps(v[i], magnitude));
    }
    const float amax = max_lane(largest);
    const float inverse = amax > 0.0f ? kSteps / amax : 0.0f;
    d[b] = amax / kSteps;
    // Round to nearest even (the default MXCSR mode); |x * inverse| <= 32512 up to an f32 rounding.
    __m256i qi[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(inverse)));
    store_int16(qi[0], qi[1], q + 64 * b);
    store_int16(qi[2], qi[3], q + 64 * b + 32);
    const std::int32_t low = sum_lanes(_mm256_add_epi32(qi[0], qi[1]));
    const std::int32_t high = sum_lanes(_mm256_add_epi32(qi[2], qi[3]));
    scaled_sum[b] = d[b] * static_cast<float>(low + high);
    half_sums[2 * b] = d[b] * static_cast<float>(low);
    half_sums[2 * b + 1] = d[b] * static_cast<float>(high);
    integer_half_sums[2 * b] = low;
    integer_half_sums[2 * b + 1] = high;
  }
}

// ---- weights: a tile of 8 rows decoded block by block into lanes ----------------------------------------

constexpr int kRows = 8;    // rows per tile: one per int32 / f32 lane
constexpr int kPairs = 16;  // int16 pairs per block of 32: the vpmaddwd steps of one block

// One block of 32 of 8 rows: w[j] holds, in lane r, row r's weights 2j and 2j + 1 as int16 (the elements
// the token's q[2j], q[2j + 1] multiply); d the rows' scales of the block and m their second multiplier
// (Q4_K / Q5_K: dmin * min; Q6_K: the scale of the block's second half).
struct DecodedBlock {
  alignas(32) std::int16_t w[kPairs][2 * kRows];
  alignas(32) float d[kRows];
  alignas(32) float m[kRows];
  alignas(32) float min0[kRows];  // Q2_K: the two halves' mins (dmin * m)
  alignas(32) float min1[kRows];
};

ENGINE_KERNEL_INLINE __m256i low_nibbles(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

ENGINE_KERNEL_INLINE __m256i high_nibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// Bits [shift, shift + width) of each byte, moved to bits 4 and up (the high part of a 5- or 6-bit weight; mask:
// the width's bits). One 16-bit shift and one AND: a byte's bits shifted into its neighbour land outside bits
// 4 .. 4 + width (at most three places for shift <= 7 and width + (shift - 4) <= 4). The counts are constants
// once the loops over a block's blocks of 32 are unrolled, and GCC then emits the immediate forms.
ENGINE_KERNEL_INLINE __m256i high_bits(__m256i v, int shift, int mask) {
  const __m256i moved = shift <= 4 ? _mm256_slli_epi16(v, 4 - shift) : _mm256_srli_epi16(v, shift - 4);
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(mask << 4)));
}

// The 32 fifth bits at p (bit j: element j's) as bytes 0x10 or 0, in element order: byte j takes the bits'
// byte j / 8, keeps bit j % 8, and becomes 0x10 where it is set.
ENGINE_KERNEL_INLINE __m256i fifth_bits(const std::uint8_t* p) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(load_i32(p)), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// What a type's stored levels are less than its weights: Q4_0's 8, Q5_0's 16, Q3_K's 4, Q6_K's 32; 0 where the
// levels are the weights (the unsigned ones: Q4_1, Q5_1, Q4_K, Q5_K, Q2_K); -1 where they are signed bytes
// already (Q8_0, the IQ4 levels). One-token products take unsigned levels and subtract the offset times the
// token's sum of q after the integer dot (the same exact integer).
constexpr int level_offset(int type) {
  if (is_nibble32_type(type)) return nibble32_layout(type).offset;
  switch (type) {
    case kQ4_K:
    case kQ5_K:
    case kQ2_K: return 0;
    case kQ3_K: return 4;
    case kQ6_K: return 32;
    default: return -1;
  }
}

// Block of 32 `sub` of one row's ggml block as 32 bytes in element order: the stored levels, unsigned where
// level_offset(Type) >= 0 (the weights plus that offset), signed otherwise.
template <int Type>
ENGINE_KERNEL_INLINE __m256i row_levels(const std::uint8_t* block, int sub) {
  if constexpr (Type == kQ8_0) {
    return load256(block + 2);
  } else if constexpr (is_nibble32_type(Type)) {
    // Byte i holds element i (low nibble) and element i + 16 (high nibble); Q5's fifth bits go on top.
    constexpr Nibble32Layout layout = nibble32_layout(Type);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + layout.qs));
    const __m128i low = _mm_and_si128(packed, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
    __m256i levels = _mm256_set_m128i(high, low);
    if constexpr (layout.qh >= 0) levels = _mm256_or_si256(levels, fifth_bits(block + layout.qh));
    return levels;
  } else if constexpr (Type == kQ4_K || Type == kQ5_K) {
    // 64 elements per 32 bytes of nibbles: the low nibbles are the first block of 32, the high the second;
    // Q5_K's fifth bit of block `sub` is bit `sub` of 32 bytes shared by all eight.
    constexpr std::size_t kNibbles = Type == kQ4_K ? 16 : 48;
    const __m256i packed = load256(block + kNibbles + 32 * static_cast<std::size_t>(sub / 2));
    const __m256i nibbles = sub % 2 == 0 ? low_nibbles(packed) : high_nibbles(packed);
    if constexpr (Type == kQ4_K) return nibbles;
    return _mm256_or_si256(nibbles, high_bits(load256(block + 16), sub, 1));
  } else if constexpr (Type == kIQ4_NL || Type == kIQ4_XS) {
    // Nibbles as Q4_0's (IQ4_XS: 16 bytes per block of 32 from byte 8), each replaced by its level.
    const __m128i packed = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(block + (Type == kIQ4_NL ? 2 : 8 + 16 * static_cast<std::size_t>(sub))));
    const __m128i levels = _mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Values));
    const __m128i low = _mm_shuffle_epi8(levels, _mm_and_si128(packed, _mm_set1_epi8(0x0F)));
    const __m128i high = _mm_shuffle_epi8(levels, _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
    return _mm256_set_m128i(high, low);
  } else if constexpr (Type == kQ2_K) {
    // Block `sub` = 4h + j: two bits at bits 2j of bytes 16 + 32h ..
    const auto half = static_cast<std::size_t>(sub / 4);
    return _mm256_and_si256(_mm256_srli_epi16(load256(block + 16 + 32 * half), 2 * (sub % 4)), _mm256_set1_epi8(3));
  } else if constexpr (Type == kQ3_K) {
    // Block `sub` = 4h + j: low two bits at bits 2j of bytes 32 + 32h .., the third at bit `sub` of hmask's
    // 32 bytes; level = low + 4 bit (the weight + 4).
    const auto half = static_cast<std::size_t>(sub / 4);
    const __m256i low =
        _mm256_and_si256(_mm256_srli_epi16(load256(block + 32 + 32 * half), 2 * (sub % 4)), _mm256_set1_epi8(3));
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(load256(block), sub), _mm256_set1_epi8(1));
    return _mm256_or_si256(low, _mm256_slli_epi16(bit, 2));
  } else {
    // Q6_K: per 128 elements, 64 bytes of low nibbles (bytes 0-31: blocks 0 and 2 of the four, 32-63: 1 and
    // 3; low nibbles for 0 and 1, high for 2 and 3) and 32 bytes of high pairs (bits 2k for block k).
    const auto half = static_cast<std::size_t>(sub / 4);
    const int k = sub % 4;
    const __m256i low = load256(block + 64 * half + 32 * static_cast<std::size_t>(k & 1));
    const __m256i nibbles = k < 2 ? low_nibbles(low) : high_nibbles(low);
    return _mm256_or_si256(nibbles, high_bits(load256(block + 128 + 32 * half), 2 * k, 3));
  }
}

// Block of 32 `sub` of one row's ggml block as 32 signed bytes in element order: the weights' integers.
template <int Type>
ENGINE_KERNEL_INLINE __m256i row_values(const std::uint8_t* block, int sub) {
  const __m256i levels = row_levels<Type>(block, sub);
  if constexpr (level_offset(Type) > 0) return _mm256_sub_epi8(levels, _mm256_set1_epi8(level_offset(Type)));
  return levels;
}

// 8 rows of 32 signed bytes (element order) into the block's 16 pairs: treating each row as 16 words (a
// word: elements 2k, 2k + 1), a transpose of 8 x 8 words within each 128-bit half leaves word k of the 8
// rows in the low half of c[k] and word k + 8 in its high half; widening each half to int16 gives pair k and
// pair k + 8, row r in the 32-bit lane r.
ENGINE_KERNEL_INLINE void transpose_rows(const __m256i* rows, DecodedBlock& out) {
  __m256i a[8], b[8], c[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm256_unpacklo_epi16(rows[2 * i], rows[2 * i + 1]);      // words 0-3 of rows 2i, 2i+1
    a[2 * i + 1] = _mm256_unpackhi_epi16(rows[2 * i], rows[2 * i + 1]);  // words 4-7
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    // Rows 4i .. 4i+3: b[4i + 0 .. 3] hold words (0, 1), (2, 3), (4, 5), (6, 7).
    b[4 * i] = _mm256_unpacklo_epi32(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm256_unpackhi_epi32(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm256_unpacklo_epi32(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm256_unpackhi_epi32(a[4 * i + 1], a[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    c[2 * i] = _mm256_unpacklo_epi64(b[i], b[4 + i]);      // word 2i of rows 0-7
    c[2 * i + 1] = _mm256_unpackhi_epi64(b[i], b[4 + i]);  // word 2i + 1
  }
  auto* w = reinterpret_cast<__m256i*>(out.w);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    _mm256_store_si256(w + k, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(c[k])));
    _mm256_store_si256(w + k + 8, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(c[k], 1)));
  }
}

ENGINE_KERNEL_INLINE float half_at(const std::uint8_t* p) {
  return _cvtsh_ss(load_u16(p));
}

// 16 bytes at `offset` of each of the 8 rows' blocks, transposed: out[k] lane r = bytes 4k .. 4k+3 of row r's.
// Rows r and r + 4 share a register (one per 128-bit half), then a 4 x 4 transpose of dwords within the halves.
ENGINE_KERNEL_INLINE void transpose_heads(const std::uint8_t* const* block, std::size_t offset, __m256i* out) {
  __m256i z[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const auto load = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[r] + offset)); };
    z[i] = _mm256_set_m128i(load(i + 4), load(i));
  }
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// 8 f16 values, one per lane: the low 16 bits of each lane's dword, or the high ones.
ENGINE_KERNEL_INLINE __m256 halves(__m256i v, bool high) {
  const __m256i x = high ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  // vpackusdw packs within the 128-bit halves: quarters 0 and 2 hold lanes 0-3 and 4-7.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// Byte i of each lane's dword as a float, unsigned or signed.
ENGINE_KERNEL_INLINE __m256 unsigned_byte(__m256i v, int i) {
  return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * i), _mm256_set1_epi32(0xFF)));
}
ENGINE_KERNEL_INLINE __m256 signed_byte(__m256i v, int i) {
  return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * i), 24));
}

// The rows' scales of one ggml block into its decoded blocks (or just their scales, Out having d and m), row r
// in lane r: ggml's f32 products (a sub-block scale times d), as the float kernels and avx512vnni compute them.
template <int Type, class Out>
ENGINE_KERNEL_INLINE void decode_scales(const std::uint8_t* const* block, Out* out) {
  if constexpr (Type == kQ8_0 || Type == kIQ4_NL || is_nibble32_type(Type)) {
    // Q4_1 / Q5_1: weights d q + m, kept as d q - (-m) so that the min's term is the K-quants' (negation is exact).
    constexpr int min_at = is_nibble32_type(Type) ? nibble32_layout(Type).m : -1;
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      out[0].d[r] = half_at(block[r]);
      if constexpr (min_at >= 0) out[0].m[r] = -half_at(block[r] + min_at);
    }
  } else if constexpr (Type == kQ4_K || Type == kQ5_K) {
    // d and dmin, then the 12 bytes of 6-bit scales and mins as three words u0, u1, u2: scales and mins 0-3
    // are the low 6 bits of u0's and u1's bytes; 4-7 a nibble of u2's bytes (low: scales, high: mins) with
    // their top two bits from the top of u0's (scales) and u1's (mins) bytes.
    __m256i head[4];
    transpose_heads(block, 0, head);
    const __m256 d = halves(head[0], false), dmin = halves(head[0], true);
    const __m256i six = _mm256_set1_epi32(0x3F3F3F3F), four = _mm256_set1_epi32(0x0F0F0F0F);
    const __m256i two = _mm256_set1_epi32(0x03030303);
    const __m256i scales[2] = {
        _mm256_and_si256(head[1], six),
        _mm256_or_si256(_mm256_and_si256(head[3], four),
                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(head[1], 6), two), 4))};
    const __m256i mins[2] = {
        _mm256_and_si256(head[2], six),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(head[3], 4), four),
                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(head[2], 6), two), 4))};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      _mm256_store_ps(out[j].d, _mm256_mul_ps(unsigned_byte(scales[j / 4], j % 4), d));
      _mm256_store_ps(out[j].m, _mm256_mul_ps(unsigned_byte(mins[j / 4], j % 4), dmin));
    }
  } else if constexpr (Type == kQ2_K) {
    // Per row, scalar: the two halves' scales d * sc (d, m) and mins dmin * m (min0, min1) of each block of 32.
#pragma GCC unroll 1
    for (int r = 0; r < kRows; ++r) {
      const float d = half_at(block[r] + 80), dmin = half_at(block[r] + 82);
      for (int j = 0; j < 8; ++j) {
        const std::uint8_t first = block[r][2 * j], second = block[r][2 * j + 1];
        out[j].d[r] = d * static_cast<float>(first & 0xF);
        out[j].m[r] = d * static_cast<float>(second & 0xF);
        out[j].min0[r] = dmin * static_cast<float>(first >> 4);
        out[j].min1[r] = dmin * static_cast<float>(second >> 4);
      }
    }
  } else if constexpr (Type == kIQ4_XS || Type == kQ3_K) {
    // Per row, scalar: IQ4_XS's eight block scales d (s - 32); Q3_K's sixteen d (s - 32), two per block of 32
    // (the halves' d and m).
#pragma GCC unroll 1
    for (int r = 0; r < kRows; ++r) {
      if constexpr (Type == kIQ4_XS) {
        const float d = half_at(block[r]);
        for (int j = 0; j < 8; ++j) out[j].d[r] = d * static_cast<float>(iq4_xs_scale(block[r], j));
      } else {
        int sc[16];
        q3_k_scales(block[r] + 96, sc);
        const float d = half_at(block[r] + 108);
        for (int j = 0; j < 8; ++j) {
          out[j].d[r] = d * static_cast<float>(sc[2 * j]);
          out[j].m[r] = d * static_cast<float>(sc[2 * j + 1]);
        }
      }
    }
  } else {
    // Q6_K: 16 signed scales at byte 192 (one per 16 elements), d at 208 (the top half of the last word read
    // from 194).
    __m256i head[4], tail[4];
    transpose_heads(block, 192, head);
    transpose_heads(block, 194, tail);
    const __m256 d = halves(tail[3], true);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      _mm256_store_ps(out[j].d, _mm256_mul_ps(signed_byte(head[j / 2], 2 * (j % 2)), d));
      _mm256_store_ps(out[j].m, _mm256_mul_ps(signed_byte(head[j / 2], 2 * (j % 2) + 1), d));
    }
  }
}

// ---- the product ---------------------------------------------------------------------------------------

// Pairs [First, Last) of a decoded block against T tokens' q (`q[t]`: the block's first value), into dot[t].
template <int First, int Last, int T>
ENGINE_KERNEL_INLINE void dot_pairs(const DecodedBlock& block, const std::uint8_t* const* q, __m256i* dot) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) dot[t] = _mm256_setzero_si256();
  const auto* w = reinterpret_cast<const __m256i*>(block.w);
#pragma GCC unroll 2
  for (int j = First; j < Last; ++j) {
    const __m256i pair = _mm256_load_si256(w + j);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(pair, _mm256_set1_epi32(load_i32(q[t] + 4 * j))));
    }
  }
}

// ---- one token: no transpose ---------------------------------------------------------------------------

// Lane r of `first` = the sum of v[r]'s lanes 0-3, of `second` = of its lanes 4-7 (vphaddd adds within the
// 128-bit halves, so rows 0-3 come out in one register's halves and rows 4-7 in another's).
ENGINE_KERNEL_INLINE void sum_halves(const __m256i* v, __m256i& first, __m256i& second) {
  const __m256i low = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i high = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  first = _mm256_permute2x128_si256(low, high, 0x20);
  second = _mm256_permute2x128_si256(low, high, 0x31);
}

// Lane r = the sum of v[r]'s 8 lanes (integer sums: the same in any order).
ENGINE_KERNEL_INLINE __m256i sum_each(const __m256i* v) {
  __m256i first, second;
  sum_halves(v, first, second);
  return _mm256_add_epi32(first, second);
}

// multiply's chain for one token and block of 32 without a chunk (int_gemv): a row's 32 weights of the block
// stay in its order, vpmaddwd runs them against the token's 32 q, and the 8 rows' int32 lanes are summed into
// lane r: the same exact integer dot, so the same bits as the transposed path, with about half the
// instructions per weight. Unsigned levels are widened by unpacking with zero, which works within 128-bit
// halves (words 0-7 and 16-23, then 8-15 and 24-31: the token's q is permuted alike, once for the 8 rows), and
// leaves a row's products of its first 16 weights in lanes 0-3 and of its second 16 in lanes 4-7, so a type
// with a scale per 16 takes both halves' dots from one reduction; the levels' offset times the token's sum
// of q is subtracted after it. Signed bytes are widened by halves in element order.
template <int Type>
ENGINE_KERNEL_INLINE void gemv_block(const std::uint8_t* const* row, int sub, const std::byte* x, std::size_t blocks,
                                     std::size_t k, const BlockScales<kRows>& scales, __m256& acc) {
  const auto* q = reinterpret_cast<const std::uint8_t*>(x);
  const auto* dx = reinterpret_cast<const float*>(q + 64 * blocks);
  const float* scaled_sum = dx + blocks;
  const __m256i x_low = load256(q + 64 * k), x_high = load256(q + 64 * k + 32);
  __m256i dots[kRows];
  __m256i first, second;  // lane r: row r's dot of the block (with halves: of its first and second 16)
  if constexpr (level_offset(Type) >= 0) {
    const __m256i x_unpacked_low = _mm256_permute2x128_si256(x_low, x_high, 0x20);   // q 0-7, 16-23
    const __m256i x_unpacked_high = _mm256_permute2x128_si256(x_low, x_high, 0x31);  // q 8-15, 24-31
    const __m256i zero = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256i levels = row_levels<Type>(row[r], sub);
      dots[r] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi8(levels, zero), x_unpacked_low),
                                 _mm256_madd_epi16(_mm256_unpackhi_epi8(levels, zero), x_unpacked_high));
    }
    constexpr int offset = level_offset(Type);
    const auto* q_sums = reinterpret_cast<const std::int32_t*>(q + 80 * blocks) + 2 * k;
    if constexpr (halves(Type)) {
      sum_halves(dots, first, second);
      if constexpr (offset > 0) {
        first = _mm256_sub_epi32(first, _mm256_set1_epi32(offset * q_sums[0]));
        second = _mm256_sub_epi32(second, _mm256_set1_epi32(offset * q_sums[1]));
      }
    } else {
      first = sum_each(dots);
      if constexpr (offset > 0) first = _mm256_sub_epi32(first, _mm256_set1_epi32(offset * (q_sums[0] + q_sums[1])));
    }
  } else {
    static_assert(!halves(Type), "the types with a scale per 16 have unsigned levels");
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256i values = row_levels<Type>(row[r], sub);
      dots[r] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(values)), x_low),
                                 _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(values, 1)), x_high));
    }
    first = sum_each(dots);
  }
  const __m256 d = _mm256_set1_ps(dx[k]);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(first), _mm256_mul_ps(_mm256_load_ps(scales.d), d), acc);
  if constexpr (halves(Type)) {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(second), _mm256_mul_ps(_mm256_load_ps(scales.m), d), acc);
    if constexpr (half_mins(Type)) {
      const float* half_sums = scaled_sum + blocks;
      acc = _mm256_fnmadd_ps(_mm256_load_ps(scales.min0), _mm256_set1_ps(half_sums[2 * k]), acc);
      acc = _mm256_fnmadd_ps(_mm256_load_ps(scales.min1), _mm256_set1_ps(half_sums[2 * k + 1]), acc);
    }
  } else if constexpr (has_min(Type)) {
    acc = _mm256_fnmadd_ps(_mm256_load_ps(scales.m), _mm256_set1_ps(scaled_sum[k]), acc);
  }
}

struct Avx2Int16 {
  static constexpr std::size_t kLanes = kRows;
  static constexpr std::size_t kChunkBlocks = 32;  // 18 KiB of decoded blocks
  static constexpr std::size_t kTokenBlock = 96;
  static constexpr std::size_t kTokenTile = 6;  // 6 dot and 6 f32 accumulators beside a pair and a broadcast
  static constexpr std::size_t kPrefetchTiles = 2;
  static constexpr int kGemvPrefetchLocality = 3;
  // Half of a K-quant block's blocks of 32: measured on Q4_K and Q6_K rows streamed from memory (one thread, 64
  // copies of 2048 x 2048 alternating with the burst), 1.15x and 1.2x the speed of all 20-odd prefetches at the
  // first block of 32, which stall its loads; spread over all eight, Q6_K ran at 0.84-0.94x.
  static constexpr std::size_t kGemvPrefetchSteps = 4;
  using Decoded = DecodedBlock;
  using Acc = __m256;

  static std::size_t token_bytes(std::size_t cols) { return kernels::token_bytes(cols); }

  template <int Type>
  static void decode_scales(const std::uint8_t* const* rows, BlockScales<kLanes>* scales) {
    kernels::decode_scales<Type>(rows, scales);
  }

  template <int Type>
  static void gemv_step(const std::uint8_t* const* rows, int sub, const std::byte* x, std::size_t blocks, std::size_t k,
                        const BlockScales<kLanes>& scales, __m256& acc) {
    gemv_block<Type>(rows, sub, x, blocks, k, scales, acc);
  }

  template <int Type>
  static void decode(const std::uint8_t* tile, std::size_t row_bytes, std::size_t rows, std::size_t first,
                     std::size_t count, const std::uint8_t* prefetch, DecodedBlock* chunk) {
    constexpr std::size_t bb = block_bytes(Type), per_block = sub_blocks(Type);
    for (std::size_t b = 0; b < count; b += per_block) {
      const std::size_t ggml_block = (first + b) / per_block;
      const std::uint8_t* block[kLanes];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < kLanes; ++r)
        block[r] = r < rows ? tile + r * row_bytes + ggml_block * bb : kZeroBlock;
      kernels::decode_scales<Type>(block, chunk + b);
      const std::uint8_t* ahead = prefetch + ggml_block * kLanes * bb;
#pragma GCC unroll 16
      for (std::size_t i = 0; i < kLanes * bb; i += 64) __builtin_prefetch(ahead + i, 0, 3);
#pragma GCC unroll 8
      for (std::size_t s = 0; s < per_block; ++s) {
        __m256i values[kLanes];
#pragma GCC unroll 8
        for (std::size_t r = 0; r < kLanes; ++r) values[r] = row_values<Type>(block[r], static_cast<int>(s));
        transpose_rows(values, chunk[b + s]);
      }
    }
  }

  template <int Type, int T>
  static void multiply(const DecodedBlock* chunk, std::size_t first, std::size_t count, const std::byte* x,
                       std::size_t stride, std::size_t blocks, float* acc) {
    const std::uint8_t* q[T];
    const float* d[T];
    const float* scaled_sum[T];
    const float* half_sums[T];
    __m256 a[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto* token = reinterpret_cast<const std::uint8_t*>(x + static_cast<std::size_t>(t) * stride);
      q[t] = token;
      d[t] = reinterpret_cast<const float*>(token + 64 * blocks);
      scaled_sum[t] = reinterpret_cast<const float*>(token + 68 * blocks);
      half_sums[t] = reinterpret_cast<const float*>(token + 72 * blocks);
      a[t] = _mm256_load_ps(acc + t * static_cast<int>(kLanes));
    }
    for (std::size_t b = 0; b < count; ++b) {
      const std::size_t k = first + b;
      const DecodedBlock& block = chunk[b];
      const std::uint8_t* qk[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) qk[t] = q[t] + 64 * k;
      const __m256 dw = _mm256_load_ps(block.d);
      __m256i dot[T];
      if constexpr (halves(Type)) {
        dot_pairs<0, kPairs / 2, T>(block, qk, dot);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          a[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(dw, _mm256_set1_ps(d[t][k])), a[t]);
        }
        const __m256 dm = _mm256_load_ps(block.m);
        dot_pairs<kPairs / 2, kPairs, T>(block, qk, dot);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          a[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(dm, _mm256_set1_ps(d[t][k])), a[t]);
          if constexpr (half_mins(Type)) {
            a[t] = _mm256_fnmadd_ps(_mm256_load_ps(block.min0), _mm256_set1_ps(half_sums[t][2 * k]), a[t]);
            a[t] = _mm256_fnmadd_ps(_mm256_load_ps(block.min1), _mm256_set1_ps(half_sums[t][2 * k + 1]), a[t]);
          }
        }
      } else {
        dot_pairs<0, kPairs, T>(block, qk, dot);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          a[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(dw, _mm256_set1_ps(d[t][k])), a[t]);
          if constexpr (has_min(Type)) {
            a[t] = _mm256_fnmadd_ps(_mm256_load_ps(block.m), _mm256_set1_ps(scaled_sum[t][k]), a[t]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm256_store_ps(acc + t * static_cast<int>(kLanes), a[t]);
  }
};

#undef ENGINE_KERNEL_INLINE

Table make_avx2int16_table() {
  Table table = avx2_table();
  table.name = "avx2int16";
  table.row_tile = Avx2Int16::kLanes;
  table.quantize_activations = quantize_token;
  table.quantized_token_bytes = token_bytes;
  table.int8_matmul[kQ8_0] = int_product<Avx2Int16, kQ8_0>;
  table.int8_matmul[kQ4_0] = int_product<Avx2Int16, kQ4_0>;
  table.int8_matmul[kQ4_K] = int_product<Avx2Int16, kQ4_K>;
  table.int8_matmul[kQ5_K] = int_product<Avx2Int16, kQ5_K>;
  table.int8_matmul[kQ6_K] = int_product<Avx2Int16, kQ6_K>;
  table.int8_matmul[kQ4_1] = int_product<Avx2Int16, kQ4_1>;
  table.int8_matmul[kQ5_0] = int_product<Avx2Int16, kQ5_0>;
  table.int8_matmul[kQ5_1] = int_product<Avx2Int16, kQ5_1>;
  table.int8_matmul[kQ3_K] = int_product<Avx2Int16, kQ3_K>;
  table.int8_matmul[kIQ4_NL] = int_product<Avx2Int16, kIQ4_NL>;
  table.int8_matmul[kIQ4_XS] = int_product<Avx2Int16, kIQ4_XS>;
  table.int8_matmul[kQ2_K] = int_product<Avx2Int16, kQ2_K>;
  return table;
}

}  // namespace

const Table& avx2int16_table() {
  static const Table kTable = make_avx2int16_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
