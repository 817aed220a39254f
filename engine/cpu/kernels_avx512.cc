// AVX-512 kernels (F, BW, VL, DQ with FMA and F16C). Compiled with those flags alone; reached only when
// the CPU reports them. Nothing from the standard library may be instantiated here (see kernels.h).

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*() and trip -Wuninitialized
// (GCC bug 105593); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

struct Avx512 {
  static constexpr int W = 16;
  static constexpr int kTokenTile = 6;  // 4 rows x 6 tokens = 24 of the 32 vector registers accumulate
  static constexpr int kGemvRows = 4;   // rows per gemv tile: 4 accumulator chains, x loaded once per tile
  static constexpr int kBatchRows = 4;  // gemv_batch tile: 4 rows x 4 tokens = 16 accumulators, the rest for decoding
  static constexpr int kBatchTokens = 4;
  static constexpr std::size_t kBatchMaxTokens = 48;       // gemv_batch up to this many tokens, gemm above
  static constexpr std::size_t kBatchMaxTokensKQuant = 8;  // (K-quants: decoding dominates, see make_table)
  static constexpr bool kLookup16 = true;  // 4-bit weights decode with one vpermps from a 16-value table
  // Attention (attention_impl.h): scores of 6 rows x 2 key vectors = 12 accumulators; values of 4 rows
  // x 4 vectors of dimensions = 16.
  static constexpr int kScoreRows = 6;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVectors = 4;
  using F = __m512;
  using I = __m512i;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F loadu(const float* p) { return _mm512_loadu_ps(p); }
  static F load_f32(const std::uint8_t* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F from_f16(const std::uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F from_bf16(const std::uint8_t* p) {
    const I wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // 16 FP8 E4M3 bytes as f32 (ggml_blocks.h's e4m3_to_float, lane by lane).
  static F from_e4m3(const std::uint8_t* p) {
    const I q = load_u8(p);
    const I magnitude = _mm512_and_si512(q, _mm512_set1_epi32(0x7F));
    const F value = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(magnitude, 20)), _mm512_set1_ps(0x1p120f));
    const I sign = _mm512_slli_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x80)), 24);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7F));
    const I bits = _mm512_or_si512(_mm512_castps_si512(value), sign);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(bits, nan, bits, _mm512_set1_epi32(0x7FC00000)));
  }
  static I load_i8(const std::uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I load_u8(const std::uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I and_(I a, int m) { return _mm512_and_si512(a, _mm512_set1_epi32(m)); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I sub(I a, int v) { return _mm512_sub_epi32(a, _mm512_set1_epi32(v)); }
  static I srl(I a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static I sll(I a, int n) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static I iota() { return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); }
  // table[idx & 15] per lane (vpermps reads only the low four index bits).
  static F lookup16(F table, I idx) { return _mm512_permutexvar_ps(idx, table); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static I as_int(F a) { return _mm512_castps_si512(a); }
  static F as_float(I a) { return _mm512_castsi512_ps(a); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static float hsum(F v) {
    const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
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
    const __m512i wide = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_cvtepi32_ps(wide), _mm512_set1_ps(d)));
  }
  // __builtin_prefetch, not _mm_prefetch: GCC 12 drops the latter inside always_inline callers.
  static void prefetch(const std::uint8_t* p) { __builtin_prefetch(p, 0, 3); }
};

}  // namespace
}  // namespace engine::cpu::kernels

#include "engine/cpu/kernels_impl.h"

namespace engine::cpu::kernels {

const Table& avx512_table() {
  static constexpr Table kTable = make_table<Avx512>("avx512");
  return kTable;
}

}  // namespace engine::cpu::kernels
