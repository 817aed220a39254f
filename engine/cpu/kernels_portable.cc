// Portable kernels: 16-lane GCC/Clang vector types, which the compiler lowers to whatever the baseline ISA
// has (SSE2 on x86-64, NEON on AArch64) or to scalar code. No FMA: fma(a, b, c) is a rounded product then
// a rounded sum (-ffp-contract=off keeps the compiler from fusing them on some paths and not others).

#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/quant/ggml_blocks.h"

namespace engine::cpu::kernels {
namespace {

struct Portable {
  static constexpr int W = 16;
  static constexpr int kTokenTile = 2;
  static constexpr int kGemvRows = 4;
  static constexpr int kBatchRows = 4;  // gemv_batch tile: as AVX2: baseline ISAs have 16 vector registers or fewer
  static constexpr int kBatchTokens = 2;
  // With 2 tokens per group a row tile is decoded 6 times for 12 tokens; gemm is ahead from about 16
  // (6 for the K-quants), measured with engine-kernel-bench --batches --level avx2.
  static constexpr std::size_t kBatchMaxTokens = 12;
  static constexpr std::size_t kBatchMaxTokensKQuant = 6;
  static constexpr bool kLookup16 = false;
  // Attention (attention_impl.h): one row at a time (a 16-lane vector is four registers of a baseline ISA).
  static constexpr int kScoreRows = 1;
  static constexpr int kValueRows = 1;
  static constexpr int kValueVectors = 2;
  using F = float __attribute__((vector_size(64)));
  using I = std::int32_t __attribute__((vector_size(64)));
  using U = std::uint32_t __attribute__((vector_size(64)));
  using Bytes = std::uint8_t __attribute__((vector_size(16)));
  using SignedBytes = std::int8_t __attribute__((vector_size(16)));

  static F zero() { return F{}; }
  static F set1(float x) { return F{} + x; }
  static F loadu(const float* p) {
    F r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static F load_f32(const std::uint8_t* p) {
    F r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static void storeu(float* p, F a) { std::memcpy(p, &a, sizeof a); }
  static F from_f16(const std::uint8_t* p) {
    float r[W];
    for (int i = 0; i < W; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      r[i] = half_to_float(h);
    }
    return loadu(r);
  }
  static F from_bf16(const std::uint8_t* p) {
    std::uint16_t h[W];
    std::memcpy(h, p, sizeof h);
    U bits;
    for (int i = 0; i < W; ++i) bits[i] = h[i];
    bits <<= 16;
    F r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
  }
  static F from_e4m3(const std::uint8_t* p) {
    float r[W];
    for (int i = 0; i < W; ++i) r[i] = quant::ggml_blocks::e4m3_to_float(p[i]);
    return loadu(r);
  }
  static I load_i8(const std::uint8_t* p) {
    SignedBytes b;
    std::memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, I);
  }
  static I load_u8(const std::uint8_t* p) {
    Bytes b;
    std::memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, I);
  }
  static I and_(I a, int m) { return a & m; }
  static I or_(I a, I b) { return a | b; }
  static I sub(I a, int x) { return a - x; }
  static I srl(I a, int n) { return reinterpret_cast<I>(reinterpret_cast<U>(a) >> n); }
  static I sll(I a, int n) { return reinterpret_cast<I>(reinterpret_cast<U>(a) << n); }
  static F to_float(I a) { return __builtin_convertvector(a, F); }
  static F add(F a, F b) { return a + b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static I as_int(F a) { return reinterpret_cast<I>(a); }
  static F as_float(I a) { return reinterpret_cast<F>(a); }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F fmsub(F a, F b, F c) { return a * b - c; }
  // A pairwise tree, halving the width each step.
  static float hsum(F a) {
    float v[W];
    std::memcpy(v, &a, sizeof v);
    for (int n = W / 2; n >= 1; n /= 2) {
      for (int i = 0; i < n; ++i) v[i] += v[i + n];
    }
    return v[0];
  }
  static void prefetch(const std::uint8_t* p) { __builtin_prefetch(p); }
  // out[j] = d * p[j] for 8 unsigned bytes, and for 16 signed bytes.
  static void scale_u8x8(const std::uint8_t* p, float d, float* out) {
    for (int j = 0; j < 8; ++j) out[j] = d * static_cast<float>(p[j]);
  }
  static void scale_i8x16(const std::uint8_t* p, float d, float* out) {
    for (int j = 0; j < 16; ++j) out[j] = d * static_cast<float>(static_cast<std::int8_t>(p[j]));
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
