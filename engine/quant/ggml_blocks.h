#pragma once

// ggml's block layouts as compile-time facts, shared by the scalar codecs (quant.cc) and the CPU kernels
// (engine/cpu/kernels_impl.h, int_matmul_impl.h). Internal linkage (an unnamed namespace) and nothing
// from the standard library, as engine/cpu/kernels.h requires of what its ISA units share.

#include <cstddef>
#include <cstdint>

#include "engine/quant/iq_grids.h"

namespace engine::quant::ggml_blocks {
namespace {

// quant::WeightType's values.
enum : int {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_K = 5,
  kQ5_K = 6,
  kQ6_K = 7,
  kQ4_1 = 8,
  kQ5_0 = 9,
  kQ5_1 = 10,
  kQ3_K = 11,
  kIQ4_NL = 12,
  kIQ4_XS = 13,
  kQ2_K = 14,
  kIQ2_XXS = 15,
  kIQ2_XS = 16,
  kIQ2_S = 17,
  kIQ3_XXS = 18,
  kIQ3_S = 19,
  kIQ1_S = 20,
  kIQ1_M = 21,
  kMXFP4 = 22,
  kF8_E4M3 = 23,
};

// One value per element, no block structure: f32, f16, bf16 and FP8 E4M3.
constexpr bool is_float_type(int type) {
  return type == kF32 || type == kF16 || type == kBF16 || type == kF8_E4M3;
}

// Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32 with 16 bytes of nibbles (element j low, j + 16 high).
constexpr bool is_nibble32_type(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ5_0 || type == kQ5_1;
}

constexpr std::size_t block_elements(int type) {
  return is_float_type(type)                                                              ? 1
         : (type == kQ8_0 || type == kIQ4_NL || type == kMXFP4 || is_nibble32_type(type)) ? 32
                                                                                          : 256;
}

constexpr std::size_t block_bytes(int type) {
  switch (type) {
    case kF32: return 4;
    case kF16:
    case kBF16: return 2;
    case kF8_E4M3: return 1;
    case kQ8_0: return 34;
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kIQ4_NL: return 18;
    case kMXFP4: return 17;
    case kQ2_K: return 84;
    case kQ3_K: return 110;
    case kIQ4_XS: return 136;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kIQ2_XXS: return 66;
    case kIQ2_XS: return 74;
    case kIQ2_S: return 82;
    case kIQ3_XXS: return 98;
    case kIQ3_S: return 110;
    case kIQ1_S: return 50;
    case kIQ1_M: return 56;
    default: return 210;  // kQ6_K
  }
}

// An FP8 E4M3 byte as an f32, exactly: its seven low bits placed under an f32's sign make a number whose
// exponent is 120 less than the byte's (bias 127 against 7), subnormals included, so one multiplication by 2^120
// gives the value; S.1111.111 is NaN.
constexpr float e4m3_to_float(unsigned char bits) {
  const float magnitude = (bits & 0x7F) == 0x7F
                              ? __builtin_bit_cast(float, std::uint32_t{0x7FC00000})
                              : __builtin_bit_cast(float, static_cast<std::uint32_t>(bits & 0x7F) << 20) * 0x1p120f;
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

// IQ4_NL's and IQ4_XS's 16 levels, which their nibbles index.
alignas(16) constexpr signed char kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (the OCP microscaling format, as ggml stores it: { u8 e; u8 qs[16]; }, nibbles as Q4_0's): each nibble
// an FP4 E2M1 value (sign, two exponent bits, one mantissa bit), kept here doubled so that the 16 are
// integers, and the block's E8M0 exponent e halved to match: x = level * 2^(e - 128), exact in f32.
alignas(16) constexpr signed char kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as an f32 (below 2^-126 a subnormal: e 0 and 1 give 2^-128 and 2^-127).
constexpr float mxfp4_half_scale(unsigned e) {
  const std::uint32_t bits = e < 2 ? std::uint32_t{0x00200000} << e : (std::uint32_t{e} - 1) << 23;
  return __builtin_bit_cast(float, bits);
}

// A block of 32 whose 16 bytes of nibbles `qs` (element j low, j + 16 high) index `levels`, times d: IQ4_NL,
// each block of 32 of IQ4_XS, MXFP4 (exact products, so every caller gets the same bits).
inline void dequantize_nibble_levels(const signed char* levels, float d, const unsigned char* qs, float* y) {
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(levels[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4]);
}

// The 16 signed scales (s - 32) of a Q3_K block's 16-element sub-blocks from its 12 packed bytes: the low
// nibbles of bytes 0-7 hold sub-blocks 0-7's low four bits, their high nibbles sub-blocks 8-15's, and bits
// 2 (j / 4) of byte 8 + j % 4 sub-block j's top two.
constexpr void q3_k_scales(const unsigned char* packed, int* scales) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = (low | (high << 4)) - 32;
  }
}

// IQ4_XS: the signed scale (s - 32) of block of 32 number `ib` (low nibble of byte 4 + ib / 2 at bit
// 4 (ib % 2), top two bits at bits 2 ib of the little-endian word at byte 2).
constexpr int iq4_xs_scale(const unsigned char* block, int ib) {
  const int high = ((block[2] | (block[3] << 8)) >> (2 * ib)) & 3;
  return (((block[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (high << 4)) - 32;
}

// Where a block of 32 with nibbles keeps its fields: the nibbles at `qs`, the 32 fifth bits (bit j: element
// j's) at `qh`, a min at `m` (-1: absent); a weight is d (q - offset), or d q + m with a min.
struct Nibble32Layout {
  int qs, qh, m, offset;
};
constexpr Nibble32Layout nibble32_layout(int type) {
  switch (type) {
    case kQ4_0: return {2, -1, -1, 8};
    case kQ4_1: return {4, -1, 2, 0};
    case kQ5_0: return {6, 2, -1, 16};
    default: return {8, 4, 2, 0};  // kQ5_1
  }
}

// ---- the codebook types (IQ1, IQ2, IQ3) ----------------------------------------------------------------
// Each block of 256 is 32 groups of 8 weights; a group's weights are a codebook entry (iq_grids.h) times
// a multiplier of its block of 32, with signs stored beside the entry (IQ2, IQ3) or a shift of +-1/8 added
// (IQ1). Every value is an exact float product (a half times small integers), so any caller computing it
// gets ggml's bits.

constexpr bool is_codebook_type(int type) {
  return type >= kIQ2_XXS && type <= kIQ1_M;
}

constexpr unsigned load_le16(const unsigned char* p) {
  return static_cast<unsigned>(p[0] | (p[1] << 8));
}
constexpr std::uint32_t load_le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// The f16 bits of a codebook block's super-scale: the first two bytes, but IQ1_M, which has none, spreads
// them over the top nibbles of its four 16-bit scale words (bytes 48-55).
constexpr unsigned codebook_scale_bits(int type, const unsigned char* b) {
  if (type != kIQ1_M) return load_le16(b);
  unsigned bits = 0;
  for (int i = 0; i < 4; ++i) bits |= (load_le16(b + 48 + 2 * i) >> 12) << (4 * i);
  return bits;
}

// Eight signs from 7 stored bits: the eighth makes their count of minus signs even (ggml's ksigns_iq2xs).
constexpr unsigned even_signs(unsigned seven) {
  return seven | ((__builtin_popcount(seven) & 1u) << 7);
}

// y[j] = m * (byte j of `entry`) for j < n, negated where bit j of `signs` is set.
template <int N, class Entry>
constexpr void signed_group(Entry entry, float m, unsigned signs, float* y) {
  for (int j = 0; j < N; ++j) {
    const auto magnitude = static_cast<float>((entry >> (8 * j)) & 0xFF);
    y[j] = ((signs >> j) & 1) != 0 ? -(m * magnitude) : m * magnitude;
  }
}

// y[j] = m * (value j of IQ1 entry `index` + delta), the entry's bytes read as signed.
constexpr void shifted_group(unsigned index, float m, float delta, float* y) {
  const std::uint64_t entry = iq_grids::kIq1SGrid[index];
  for (int j = 0; j < 8; ++j) {
    const auto value = static_cast<float>(static_cast<signed char>((entry >> (8 * j)) & 0xFF));
    y[j] = m * (value + delta);
  }
}

constexpr float kIq1Delta = 0.125f;  // ggml's IQ1S_DELTA and IQ1M_DELTA

// The 256 weights of one block of a codebook type, d being the value of codebook_scale_bits.
//   IQ2_XXS (66): f16 d; per block of 32, 8 bytes: 4 entry indices, then a word of four 7-bit sign sets
//     and a 4-bit scale s at the top: multiplier d (s + 1/2) / 4.
//   IQ2_XS (74): f16 d; 32 words of a 9-bit index and 7 sign bits; 8 bytes of two 4-bit scales per block
//     of 32 (the low for groups 0-1), multipliers as IQ2_XXS.
//   IQ2_S (82): f16 d; 32 index low bytes, 32 sign bytes, 8 bytes of the indices' top two bits (bits 2l
//     for group l of the block), 8 scale bytes as IQ2_XS.
//   IQ3_XXS (98): f16 d; 64 indices of 4-weight entries; per block of 32 a word of four 7-bit sign sets and
//     a 4-bit scale at the top: multiplier d (s + 1/2) / 2.
//   IQ3_S (110): f16 d; 64 index low bytes, 8 bytes of their ninth bits (bit i of byte b: index 8b + i),
//     32 sign bytes, 4 bytes of two 4-bit scales: multiplier d (2 s + 1).
//   IQ1_S (50): f16 d; 32 index low bytes; per block of 32 a word of four 3-bit index tops, a 3-bit scale
//     (bits 12-14) and the shift's sign (bit 15): d (2 s + 1) (value +- 1/8).
//   IQ1_M (56): 32 index low bytes; 16 bytes, two per block of 32, each holding two groups' 3-bit index
//     tops and shift signs (bits 0-2 and 3, 4-6 and 7); 8 bytes of 3-bit scales, one per 16 weights, d in
//     the top nibbles: d (2 s + 1) (value +- 1/8).
constexpr void decode_codebook_block(int type, const unsigned char* b, float d, float* y) {
  for (int ib = 0; ib < 8; ++ib) {
    float* out = y + 32 * ib;
    if (type == kIQ2_XXS || type == kIQ3_XXS) {
      const unsigned char* indices = b + 2 + 8 * ib;  // 4 (IQ2_XXS) or 8 (IQ3_XXS) entries
      const std::uint32_t word = load_le32(type == kIQ2_XXS ? b + 6 + 8 * ib : b + 66 + 4 * ib);
      const float half_steps = static_cast<float>(word >> 28) + 0.5f;
      const float m = type == kIQ2_XXS ? d * half_steps * 0.25f : d * half_steps * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const unsigned signs = even_signs((word >> (7 * l)) & 127);
        if (type == kIQ2_XXS) {
          signed_group<8>(iq_grids::kIq2XxsGrid[indices[l]], m, signs, out + 8 * l);
        } else {
          signed_group<4>(iq_grids::kIq3XxsGrid[indices[2 * l]], m, signs, out + 8 * l);
          signed_group<4>(iq_grids::kIq3XxsGrid[indices[2 * l + 1]], m, signs >> 4, out + 8 * l + 4);
        }
      }
    } else if (type == kIQ2_XS || type == kIQ2_S) {
      const unsigned scales = b[(type == kIQ2_XS ? 66 : 74) + ib];
      for (int l = 0; l < 4; ++l) {
        const float m = d * (static_cast<float>((scales >> (4 * (l / 2))) & 0xF) + 0.5f) * 0.25f;
        if (type == kIQ2_XS) {
          const unsigned word = load_le16(b + 2 + 2 * (4 * ib + l));
          signed_group<8>(iq_grids::kIq2XsGrid[word & 511], m, even_signs(word >> 9), out + 8 * l);
        } else {
          const unsigned index = b[2 + 4 * ib + l] | (((b[66 + ib] >> (2 * l)) & 3u) << 8);
          signed_group<8>(iq_grids::kIq2SGrid[index], m, b[34 + 4 * ib + l], out + 8 * l);
        }
      }
    } else if (type == kIQ3_S) {
      const float m = d * static_cast<float>(1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 0xF));
      for (int l = 0; l < 4; ++l) {
        const unsigned high = b[66 + ib];
        const unsigned first = b[2 + 8 * ib + 2 * l] | (((high >> (2 * l)) & 1u) << 8);
        const unsigned second = b[2 + 8 * ib + 2 * l + 1] | (((high >> (2 * l + 1)) & 1u) << 8);
        const unsigned signs = b[74 + 4 * ib + l];
        signed_group<4>(iq_grids::kIq3SGrid[first], m, signs, out + 8 * l);
        signed_group<4>(iq_grids::kIq3SGrid[second], m, signs >> 4, out + 8 * l + 4);
      }
    } else if (type == kIQ1_S) {
      const unsigned word = load_le16(b + 34 + 2 * ib);
      const float m = d * static_cast<float>(2 * ((word >> 12) & 7) + 1);
      const float delta = (word & 0x8000) != 0 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l) {
        shifted_group(b[2 + 4 * ib + l] | (((word >> (3 * l)) & 7u) << 8), m, delta, out + 8 * l);
      }
    } else {  // kIQ1_M
      const unsigned scales = load_le16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
      for (int l = 0; l < 4; ++l) {
        const unsigned high = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
        const float m = d * static_cast<float>(2 * ((scales >> (3 * (l / 2))) & 7) + 1);
        const float delta = (high & 8) != 0 ? -kIq1Delta : kIq1Delta;
        shifted_group(b[4 * ib + l] | ((high & 7u) << 8), m, delta, out + 8 * l);
      }
    }
  }
}

}  // namespace
}  // namespace engine::quant::ggml_blocks
