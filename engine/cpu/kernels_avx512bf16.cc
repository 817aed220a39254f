// AVX-512 with BF16 (vdpbf16ps): the avx512 table with its BF16-weight kernels replaced. Every other weight
// type uses avx512's functions themselves (the table is copied from avx512_table()), so only BF16 weights
// compute differently here. Nothing from the standard library may be instantiated here (see kernels.h).
//
// Numerics of the BF16 kernels: the activations are rounded to bf16 (round to nearest even, as
// vcvtne2ps2bf16 does; denormals flush to zero) as they are loaded (one token, a few) or once per block of
// tokens (many: the same bits, without a conversion per row tile), and each (row, token) dot product is one
// 16-lane f32 accumulator chain acc = vdpbf16ps(acc, w[k..k+31], x[k..k+31]) over k = 0, 32, 64, ... in order
// (the last group zero-padded), then the avx512 lane reduction, then + bias. Every path (one token, a few,
// many) runs exactly that chain, so a token's result does not depend on the batch it is computed in.

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*() and trip -Wuninitialized
// (GCC bug 105593); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

constexpr int kBF16 = 2;                   // quant::WeightType::BF16
constexpr int kGroup = 32;                 // bf16 elements per vdpbf16ps
constexpr int kRows = 4;                   // rows computed together (the table's row_tile)
constexpr int kBatchTokens = 4;            // gemv_batch: 4 rows x 4 tokens = 16 accumulators
constexpr int kTokenTile = 6;              // gemm: 4 rows x 6 tokens = 24 accumulators
constexpr std::size_t kPrefetchTiles = 2;  // row tiles gemv prefetches ahead (as the avx512 kernels do)

#define ENGINE_KERNEL_INLINE [[gnu::always_inline]] inline

ENGINE_KERNEL_INLINE std::size_t min_size(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}

// The same lane reduction as the avx512 table's, so both levels reduce a chain alike.
ENGINE_KERNEL_INLINE float hsum(__m512 v) {
  const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  const __m128 pair = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// x[k .. k+32) rounded to bf16, in element order.
ENGINE_KERNEL_INLINE __m512bh load_x(const float* x, std::size_t k) {
  return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k));
}

// x[k .. cols) rounded to bf16, zero-padded to 32 (masked loads: nothing past cols is read).
ENGINE_KERNEL_INLINE __m512bh load_x_tail(const float* x, std::size_t k, std::size_t cols) {
  const auto n = static_cast<unsigned>(cols - k);  // 1 .. 31
  const auto lo = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
  const auto hi = static_cast<__mmask16>(n > 16 ? (1u << (n - 16)) - 1 : 0u);
  return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + k + 16), _mm512_maskz_loadu_ps(lo, x + k));
}

ENGINE_KERNEL_INLINE __m512bh load_w(const std::uint8_t* row, std::size_t k) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(row + 2 * k));
}

ENGINE_KERNEL_INLINE __m512bh load_w_tail(const std::uint8_t* row, std::size_t k, std::size_t cols) {
  const auto mask = static_cast<__mmask32>((1u << (cols - k)) - 1);
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, row + 2 * k));
}

ENGINE_KERNEL_INLINE void store(float* out, float s, const float* bias) {
  *out = bias != nullptr ? s + *bias : s;
}

// The activations of T tokens as the kernel reads them, group of 32 at k of token t: f32 rows rounded as they
// are loaded (one token, a few), or rows rounded once beforehand (to_bf16_rows, many tokens), the same bits.
struct F32Activations {
  const float* x;
  std::size_t cols;
  ENGINE_KERNEL_INLINE __m512bh load(int t, std::size_t k) const { return load_x(x + t * cols, k); }
  ENGINE_KERNEL_INLINE __m512bh load_tail(int t, std::size_t k) const { return load_x_tail(x + t * cols, k, cols); }
  ENGINE_KERNEL_INLINE F32Activations advanced(std::size_t tokens) const { return {x + tokens * cols, cols}; }
};

struct Bf16Activations {
  const std::uint16_t* x;
  std::size_t stride;  // elements per token: cols rounded up to 32, zero-padded
  ENGINE_KERNEL_INLINE __m512bh load(int t, std::size_t k) const {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + t * stride + k));
  }
  ENGINE_KERNEL_INLINE __m512bh load_tail(int t, std::size_t k) const { return load(t, k); }
  ENGINE_KERNEL_INLINE Bf16Activations advanced(std::size_t tokens) const { return {x + tokens * stride, stride}; }
};

// R rows x T tokens read straight from the stored rows (bf16 needs no decoding): the one kernel every path
// runs, so that acc[r][t] is the same chain for any R, T and batch. `prefetch` streams the tiles ahead
// (one token or a few: the rows come from memory once); gemm's tiles are reused from cache instead.
template <int R, int T, bool Prefetch, class X>
void tile(const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const X& x, float* out,
          std::size_t out_stride, const float* bias) {
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const std::uint8_t* ahead = w + kPrefetchTiles * R * row_bytes;
  const std::size_t full = cols / kGroup * kGroup;
  for (std::size_t k = 0; k < full; k += kGroup) {
    if constexpr (Prefetch) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) __builtin_prefetch(ahead + r * 64, 0, 3);
      ahead += R * 64;
    }
    __m512bh wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_w(w + r * row_bytes, k);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = x.load(t, k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  if (full < cols) {
    __m512bh wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_w_tail(w + r * row_bytes, full, cols);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = x.load_tail(t, full);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) store(out + t * out_stride + r, hsum(acc[r][t]), bias != nullptr ? bias + r : nullptr);
  }
}

// tile<R, T> for n <= T tokens (T at compile time, n at run time).
template <int R, int T, bool Prefetch, class X>
void tile_tokens(int n, const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const X& x, float* out,
                 std::size_t out_stride, const float* bias) {
  if (n == T) return tile<R, T, Prefetch>(w, row_bytes, cols, x, out, out_stride, bias);
  if constexpr (T > 1) tile_tokens<R, T - 1, Prefetch>(n, w, row_bytes, cols, x, out, out_stride, bias);
}

// Rows [r0, r0 + R) against tokens [0, tokens), `T` at a time.
template <int R, int T, bool Prefetch, class X>
void rows_tokens(const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const X& x, std::size_t tokens,
                 float* out, std::size_t out_stride, const float* bias) {
  for (std::size_t t = 0; t < tokens; t += T) {
    const auto n = static_cast<int>(min_size(T, tokens - t));
    tile_tokens<R, T, Prefetch>(n, w, row_bytes, cols, x.advanced(t), out + t * out_stride, out_stride, bias);
  }
}

// rows_tokens for n <= R rows (the last, partial row tile).
template <int R, int T, bool Prefetch, class X>
void rows_tail(int n, const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const X& x, std::size_t tokens,
               float* out, std::size_t out_stride, const float* bias) {
  if (n == R) return rows_tokens<R, T, Prefetch>(w, row_bytes, cols, x, tokens, out, out_stride, bias);
  if constexpr (R > 1) rows_tail<R - 1, T, Prefetch>(n, w, row_bytes, cols, x, tokens, out, out_stride, bias);
}

// Every row tile against `tokens` tokens (at most T at a time), rows in the outer loop.
template <int T, bool Prefetch, class X>
void all_rows(const Rows& m, const X& x, std::size_t tokens, float* out, std::size_t out_stride, const float* bias) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  std::size_t r = 0;
  for (; r + kRows <= m.rows; r += kRows) {
    rows_tokens<kRows, T, Prefetch>(w + r * m.row_bytes, m.row_bytes, m.cols, x, tokens, out + r, out_stride,
                                    bias != nullptr ? bias + r : nullptr);
  }
  if (r < m.rows) {
    rows_tail<kRows - 1, T, Prefetch>(static_cast<int>(m.rows - r), w + r * m.row_bytes, m.row_bytes, m.cols, x, tokens,
                                      out + r, out_stride, bias != nullptr ? bias + r : nullptr);
  }
}

void gemv_bf16(const Rows& m, const float* x, float* out, const float* bias) {
  all_rows<1, true>(m, F32Activations{x, m.cols}, 1, out, 1, bias);
}

void gemv_batch_bf16(const Rows& m, const float* x, std::size_t tokens, float* out, std::size_t out_stride,
                     const float* bias) {
  all_rows<kBatchTokens, true>(m, F32Activations{x, m.cols}, tokens, out, out_stride, bias);
}

// Tokens per gemm block: activations (as f32) of about 256 KiB, whose bf16 copy stays in L2.
std::size_t gemm_block_tokens(std::size_t cols) {
  return ((256u << 10) / (4 * cols + 1) + kTokenTile) / kTokenTile * kTokenTile;
}

std::size_t padded_cols(std::size_t cols) {
  return (cols + kGroup - 1) / kGroup * kGroup;
}

// `tokens` rows of x rounded to bf16 as load_x rounds them, each padded with zeros to `padded_cols(cols)`.
void to_bf16_rows(const float* x, std::size_t cols, std::size_t tokens, std::uint16_t* out) {
  const std::size_t stride = padded_cols(cols), full = cols / kGroup * kGroup;
  for (std::size_t t = 0; t < tokens; ++t) {
    const float* row = x + t * cols;
    std::uint16_t* dst = out + t * stride;
    for (std::size_t k = 0; k < full; k += kGroup) {
      _mm512_storeu_si512(dst + k, reinterpret_cast<__m512i>(load_x(row, k)));
    }
    if (full < cols) _mm512_storeu_si512(dst + full, reinterpret_cast<__m512i>(load_x_tail(row, full, cols)));
  }
}

// Scratch: avx512's (the other weight types' gemm) or a block of bf16 activations, whichever is larger.
std::size_t gemm_scratch_floats_bf16(std::size_t cols) {
  const std::size_t activations = (gemm_block_tokens(cols) * padded_cols(cols) + 1) / 2;
  const std::size_t others = avx512_table().gemm_scratch_floats(cols);
  return activations > others ? activations : others;
}

// Many tokens: tokens in blocks whose activations stay in L2, each block rounded to bf16 once into `scratch`
// (the rounding is then not repeated for every row tile), and each row tile (a few KiB, in L1 after its first
// token tile) run against the whole block.
void gemm_bf16(const Rows& m, const float* x, std::size_t tokens, float* out, std::size_t out_stride, const float* bias,
               float* scratch) {
  const std::size_t block = gemm_block_tokens(m.cols);
  auto* rounded = reinterpret_cast<std::uint16_t*>(scratch);
  for (std::size_t t = 0; t < tokens; t += block) {
    const std::size_t n = min_size(block, tokens - t);
    to_bf16_rows(x + t * m.cols, m.cols, n, rounded);
    all_rows<kTokenTile, false>(m, Bf16Activations{rounded, padded_cols(m.cols)}, n, out + t * out_stride, out_stride,
                                bias);
  }
}

#undef ENGINE_KERNEL_INLINE

Table make_bf16_table() {
  Table table = avx512_table();
  table.name = "avx512bf16";
  table.gemv[kBF16] = gemv_bf16;
  table.gemv_batch[kBF16] = gemv_batch_bf16;
  table.gemm[kBF16] = gemm_bf16;
  table.gemm_scratch_floats = gemm_scratch_floats_bf16;
  // Each range rounds every token's activations once: 256 KiB of weights (128 rows of 1024) share it.
  table.gemm_range_bytes[kBF16] = 256u << 10;
  return table;
}

}  // namespace

const Table& avx512bf16_table() {
  static const Table kTable = make_bf16_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
