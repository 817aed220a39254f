#pragma once

// The ggml block layouts the kernels read, as compile-time facts shared by the float kernels
// (kernels_impl.h) and the integer ones (int_matmul_impl.h). Internal linkage (an unnamed namespace) and
// nothing from the standard library, as kernels.h requires of what the ISA units share.

#include <cstddef>

namespace engine::cpu::kernels {
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
};

constexpr bool is_float_type(int type) {
  return type == kF32 || type == kF16 || type == kBF16;
}

// Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32 with 16 bytes of nibbles (element j low, j + 16 high).
constexpr bool is_nibble32_type(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ5_0 || type == kQ5_1;
}

constexpr std::size_t block_elements(int type) {
  return is_float_type(type) ? 1 : (type == kQ8_0 || is_nibble32_type(type)) ? 32 : 256;
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
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    default: return 210;  // kQ6_K
  }
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
}  // namespace engine::cpu::kernels
