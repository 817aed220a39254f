#pragma once

// ggml's block layouts as compile-time facts, shared by the scalar codecs (quant.cc) and the CPU kernels
// (engine/cpu/kernels_impl.h, int_matmul_impl.h). Internal linkage (an unnamed namespace) and nothing
// from the standard library, as engine/cpu/kernels.h requires of what its ISA units share.

#include <cstddef>

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
};

constexpr bool is_float_type(int type) {
  return type == kF32 || type == kF16 || type == kBF16;
}

// Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32 with 16 bytes of nibbles (element j low, j + 16 high).
constexpr bool is_nibble32_type(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ5_0 || type == kQ5_1;
}

constexpr std::size_t block_elements(int type) {
  return is_float_type(type) ? 1 : (type == kQ8_0 || type == kIQ4_NL || is_nibble32_type(type)) ? 32 : 256;
}

constexpr std::size_t block_bytes(int type) {
  switch (type) {
    case kF32: return 4;
    case kF16:
    case kBF16: return 2;
    case kQ8_0: return 34;
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kIQ4_NL: return 18;
    case kQ2_K: return 84;
    case kQ3_K: return 110;
    case kIQ4_XS: return 136;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    default: return 210;  // kQ6_K
  }
}

// IQ4_NL's and IQ4_XS's 16 levels, which their nibbles index.
alignas(16) constexpr signed char kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};

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

}  // namespace
}  // namespace engine::quant::ggml_blocks
