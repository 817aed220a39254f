// AVX2 kernels (with FMA and F16C). Compiled with those flags alone; reached only when the CPU reports
// them. Nothing from the standard library may be instantiated here (see kernels.h).

#include <immintrin.h>

#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

struct Avx2 {
  static constexpr int W = 8;
  static constexpr int kTokenTile = 3;  // 4 rows x 3 tokens = 12 of the 16 vector registers accumulate
  static constexpr int kGemvRows = 4;   // rows per gemv tile: 4 accumulator chains, x loaded once per tile
  static constexpr int kBatchRows = 4;  // gemv_batch tile: 4 rows x 2 tokens = 8 of the 16 registers accumulate
  static constexpr int kBatchTokens = 2;
  // With 2 tokens per group a row tile is decoded 6 times for 12 tokens; gemm is ahead from about 16
  // (6 for the K-quants), measured with engine-kernel-bench --batches --level avx2.
  static constexpr std::size_t kBatchMaxTokens = 12;
  static constexpr std::size_t kBatchMaxTokensKQuant = 6;
  static constexpr bool kLookup16 = false;
  // Attention (attention_impl.h): scores of 2 rows x 4 key vectors = 8 accumulators beside 4 loaded keys;
  // values of 2 rows x 4 vectors of dimensions = 8.
  static constexpr int kScoreRows = 2;
  static constexpr int kValueRows = 2;
  static constexpr int kValueVectors = 4;
  using F = __m256;
  using I = __m256i;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F loadu(const float* p) { return _mm256_loadu_ps(p); }
  static F load_f32(const std::uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static void storeu(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F from_f16(const std::uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F from_bf16(const std::uint8_t* p) {
    const I wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // 8 FP8 E4M3 bytes as f32 (ggml_blocks.h's e4m3_to_float, lane by lane).
  static F from_e4m3(const std::uint8_t* p) {
    const I q = load_u8(p);
    const I magnitude = _mm256_and_si256(q, _mm256_set1_epi32(0x7F));
    const F value = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(magnitude, 20)), _mm256_set1_ps(0x1p120f));
    const I sign = _mm256_slli_epi32(_mm256_and_si256(q, _mm256_set1_epi32(0x80)), 24);
    const I nan =
        _mm256_and_si256(_mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7F)), _mm256_set1_epi32(0x7FC00000));
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(_mm256_castps_si256(value), nan), sign));
  }
  static I load_i8(const std::uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I load_u8(const std::uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I and_(I a, int m) { return _mm256_and_si256(a, _mm256_set1_epi32(m)); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I sub(I a, int v) { return _mm256_sub_epi32(a, _mm256_set1_epi32(v)); }
  static I srl(I a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static I sll(I a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static I as_int(F a) { return _mm256_castps_si256(a); }
  static F as_float(I a) { return _mm256_castsi256_ps(a); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  static float hsum(F v) {
    const __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pair = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
  }
  static float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }
  // out[j] = d * p[j] for 8 unsigned bytes, and for 16 signed bytes.
  static void scale_u8x8(const std::uint8_t* p, float d, float* out) {
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(wide), _mm256_set1_ps(d)));
  }
  static void scale_i8x16(const std::uint8_t* p, float d, float* out) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256 vd = _mm256_set1_ps(d);
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), vd));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8))), vd));
  }
  // __builtin_prefetch, not _mm_prefetch: GCC 12 drops the latter inside always_inline callers.
  static void prefetch(const std::uint8_t* p) { __builtin_prefetch(p, 0, 3); }
};

}  // namespace
}  // namespace engine::cpu::kernels

#include "engine/cpu/kernels_impl.h"

namespace engine::cpu::kernels {

const Table& avx2_table() {
  static constexpr Table kTable = make_table<Avx2>("avx2");
  return kTable;
}

}  // namespace engine::cpu::kernels
