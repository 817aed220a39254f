// Portable kernels: plain C++ over 16-lane arrays (the compiler vectorizes what the baseline ISA allows).
// Without FMA hardware, fma(a, b, c) is a rounded product then a rounded sum.

#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

struct Portable {
  static constexpr int W = 16;
  static constexpr int kTokenTile = 2;
  static constexpr bool kLookup16 = false;
  struct F {
    float v[W];
  };
  struct I {
    std::int32_t v[W];
  };

  static F zero() { return set1(0.0f); }
  static F set1(float x) {
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = x;
    return r;
  }
  static F loadu(const float* p) {
    F r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static F load_f32(const std::uint8_t* p) {
    F r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static void storeu(float* p, F a) { std::memcpy(p, a.v, sizeof a.v); }
  static F from_f16(const std::uint8_t* p) {
    F r;
    for (int i = 0; i < W; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      r.v[i] = half_to_float(h);
    }
    return r;
  }
  static F from_bf16(const std::uint8_t* p) {
    F r;
    for (int i = 0; i < W; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
      std::memcpy(&r.v[i], &bits, 4);
    }
    return r;
  }
  static I load_i8(const std::uint8_t* p) {
    I r;
    for (int i = 0; i < W; ++i) r.v[i] = static_cast<std::int8_t>(p[i]);
    return r;
  }
  static I load_u8(const std::uint8_t* p) {
    I r;
    for (int i = 0; i < W; ++i) r.v[i] = p[i];
    return r;
  }
  static I and_(I a, int m) {
    for (int i = 0; i < W; ++i) a.v[i] &= m;
    return a;
  }
  static I or_(I a, I b) {
    for (int i = 0; i < W; ++i) a.v[i] |= b.v[i];
    return a;
  }
  static I sub(I a, int x) {
    for (int i = 0; i < W; ++i) a.v[i] -= x;
    return a;
  }
  static I srl(I a, int n) {
    for (int i = 0; i < W; ++i) a.v[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.v[i]) >> n);
    return a;
  }
  static I sll(I a, int n) {
    for (int i = 0; i < W; ++i) a.v[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.v[i]) << n);
    return a;
  }
  static F to_float(I a) {
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = static_cast<float>(a.v[i]);
    return r;
  }
  static F add(F a, F b) {
    for (int i = 0; i < W; ++i) a.v[i] += b.v[i];
    return a;
  }
  static F mul(F a, F b) {
    for (int i = 0; i < W; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i];
    return c;
  }
  static F fmsub(F a, F b, F c) {
    for (int i = 0; i < W; ++i) c.v[i] = a.v[i] * b.v[i] - c.v[i];
    return c;
  }
  static void prefetch(const std::uint8_t* p) { __builtin_prefetch(p); }
  // out[j] = d * p[j] for 8 unsigned bytes, and for 16 signed bytes.
  static void scale_u8x8(const std::uint8_t* p, float d, float* out) {
    for (int j = 0; j < 8; ++j) out[j] = d * static_cast<float>(p[j]);
  }
  static void scale_i8x16(const std::uint8_t* p, float d, float* out) {
    for (int j = 0; j < 16; ++j) out[j] = d * static_cast<float>(static_cast<std::int8_t>(p[j]));
  }
  // A pairwise tree, halving the width each step.
  static float hsum(F a) {
    for (int n = W / 2; n >= 1; n /= 2) {
      for (int i = 0; i < n; ++i) a.v[i] += a.v[i + n];
    }
    return a.v[0];
  }
  static float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mantissa = h & 0x3FFu;
    std::uint32_t bits;
    if (exponent == 0x1F) {
      bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      bits = sign;
    } else {
      std::uint32_t e = 113;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

}  // namespace
}  // namespace engine::cpu::kernels

#include "engine/cpu/kernels_impl.h"

namespace engine::cpu::kernels {

const Table& portable_table() {
  static constexpr Table kTable = make_table<Portable>("portable");
  return kTable;
}

}  // namespace engine::cpu::kernels
