#pragma once

// The kernels, written once over a vector "traits" type V and included by each ISA translation unit after
// it defines its V. Everything here has internal linkage (an unnamed namespace), and it uses nothing from
// the standard library that could be instantiated: each unit gets its own copy compiled for its ISA.
//
// Numerics, identical for every path within one unit:
// - A weight is dequantized to its exact ggml value (every ggml dequantized value here is an exact product:
//   a half scale times small integers, so computing d*sc*q or fmsub(d*sc, q, dmin*m) in any order gives
//   the same float).
// - The dot product of a (row, token) pair is one W-lane accumulator chain, acc = fma(w, x, acc) over
//   k = 0, W, 2W, ... in order (a zero-padded last group), then V::hsum, then + bias. gemv and gemv_batch
//   decode in registers and gemm decodes into a tile buffer first, but all feed the same values in the same
//   order, so a token's result does not depend on the batch it is computed in.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/quant/ggml_blocks.h"

namespace engine::cpu::kernels {
namespace {

using namespace quant::ggml_blocks;  // the type ids and block layouts

constexpr int kRowTile = 4;  // rows decoded together by gemm and computed together by gemv

// Helpers of the inner loops must inline: a call in the middle of a decode spills the accumulators (and
// on AVX builds adds a vzeroupper).
#define ENGINE_KERNEL_INLINE [[gnu::always_inline]] inline

constexpr std::size_t min_size(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}
constexpr std::size_t round_up(std::size_t n, std::size_t m) {
  return (n + m - 1) / m * m;
}

std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte k of entry b is bit k of b moved to bit 4: eight fifth bits spread over eight bytes, ready to OR
// onto their nibbles. A plain array in a struct: nothing here may instantiate a standard library template.
struct FifthBitTable {
  std::uint64_t bytes[256];
};
constexpr FifthBitTable make_fifth_bit_table() {
  FifthBitTable t{};
  for (int b = 0; b < 256; ++b) {
    for (int k = 0; k < 8; ++k) t.bytes[b] |= static_cast<std::uint64_t>((b >> k) & 1) << (8 * k + 4);
  }
  return t;
}
constexpr FifthBitTable kFifthBits = make_fifth_bit_table();

// The scale and min multipliers (d * scale, dmin * min) of the 8 sub-blocks of a Q4_K / Q5_K block. The
// 6-bit fields are unpacked four at a time from the 12 bytes read as three little-endian words: scales and
// mins 0-3 are the low 6 bits of bytes 0-3 and 4-7; 4-7 take a nibble of bytes 8-11 and their top two
// bits from the top of bytes 0-3 (scales) and 4-7 (mins).
template <class V>
ENGINE_KERNEL_INLINE void k4_scales(const std::uint8_t* b, float* ds, float* dm) {
  std::uint32_t u[3];
  std::memcpy(u, b + 4, sizeof u);
  const std::uint32_t packed_scales[2] = {u[0] & 0x3F3F3F3Fu,
                                          (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4)};
  const std::uint32_t packed_mins[2] = {u[1] & 0x3F3F3F3Fu,
                                        ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4)};
  std::uint8_t scales[8], mins[8];
  std::memcpy(scales, packed_scales, 8);
  std::memcpy(mins, packed_mins, 8);
  V::scale_u8x8(scales, V::half_to_float(load_u16(b)), ds);
  V::scale_u8x8(mins, V::half_to_float(load_u16(b + 2)), dm);
}

// decode_block<V, Type>(block, e, sink) calls sink(k, w) for each W-wide group of the block, in element
// order, with k the group's element index in the row (the block starts at element e).
template <class V, int Type, class Sink>
ENGINE_KERNEL_INLINE void decode_block(const std::uint8_t* b, std::size_t e, Sink& sink) {
  using F = typename V::F;
  constexpr int W = V::W;
  if constexpr (Type == kQ8_0) {
    const F d = V::set1(V::half_to_float(load_u16(b)));
#pragma GCC unroll 16
    for (int g = 0; g < 32; g += W) sink(e + g, V::mul(V::to_float(V::load_i8(b + 2 + g)), d));
  } else if constexpr (is_nibble32_type(Type)) {
    constexpr Nibble32Layout layout = nibble32_layout(Type);
    const float d = V::half_to_float(load_u16(b));
    const F vd = V::set1(d);
    const F vm = V::set1(layout.m < 0 ? 0.0f : V::half_to_float(load_u16(b + layout.m)));
    // The weight of level q: d (q - offset) or d q + m (d q is exact, so fma rounds as ggml's d q + m).
    const auto weight = [&](auto q) {
      if constexpr (layout.m < 0) {
        return V::mul(V::to_float(V::sub(q, layout.offset)), vd);
      } else {
        return V::fma(vd, V::to_float(q), vm);
      }
    };
    const std::uint8_t* qs = b + layout.qs;
    if constexpr (layout.qh < 0 && V::kLookup16) {
      // The 16 possible values of the block in one register, then one permute per group (same values: the
      // table is computed with the very operations the plain path applies to each q).
      const F table = weight(V::iota());
      const auto bytes = V::load_u8(qs);
      sink(e, V::lookup16(table, bytes));
      sink(e + 16, V::lookup16(table, V::srl(bytes, 4)));
    } else {
      alignas(64) std::uint8_t high[32] = {};
      if constexpr (layout.qh >= 0) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) std::memcpy(high + 8 * i, &kFifthBits.bytes[b[layout.qh + i]], 8);
      }
#pragma GCC unroll 16
      for (int g = 0; g < 16; g += W) {
        auto q = V::and_(V::load_u8(qs + g), 0xF);
        if constexpr (layout.qh >= 0) q = V::or_(q, V::load_u8(high + g));
        sink(e + g, weight(q));
      }
#pragma GCC unroll 16
      for (int g = 0; g < 16; g += W) {
        auto q = V::srl(V::load_u8(qs + g), 4);
        if constexpr (layout.qh >= 0) q = V::or_(q, V::load_u8(high + 16 + g));
        sink(e + 16 + g, weight(q));
      }
    }
  } else if constexpr (Type == kIQ4_NL || Type == kIQ4_XS || Type == kMXFP4) {
    // Blocks of 32 of nibbles indexing 16 levels, with one scale (IQ4_NL: d; MXFP4: its exponent's power of
    // two) or eight (IQ4_XS: d (s - 32)).
    constexpr int kBlocks = Type == kIQ4_XS ? 8 : 1;
    const signed char* level_values = Type == kMXFP4 ? kMxfp4Values : kIq4Values;
    const float d = Type == kMXFP4 ? mxfp4_half_scale(b[0]) : V::half_to_float(load_u16(b));
#pragma GCC unroll 8
    for (int ib = 0; ib < kBlocks; ++ib) {
      const float dl = Type == kIQ4_XS ? d * static_cast<float>(iq4_xs_scale(b, ib)) : d;
      const std::uint8_t* qs = Type == kIQ4_XS ? b + 8 + 16 * ib : Type == kMXFP4 ? b + 1 : b + 2;
      const std::size_t at = e + 32 * static_cast<std::size_t>(ib);
      if constexpr (V::kLookup16) {
        const auto levels = V::load_i8(reinterpret_cast<const std::uint8_t*>(level_values));
        const F table = V::mul(V::to_float(levels), V::set1(dl));
        const auto bytes = V::load_u8(qs);
        sink(at, V::lookup16(table, bytes));
        sink(at + 16, V::lookup16(table, V::srl(bytes, 4)));
      } else {
        // No register lookup at this level: the block's 32 values through memory (exact products either way).
        alignas(64) float values[32];
        dequantize_nibble_levels(level_values, dl, qs, values);
#pragma GCC unroll 16
        for (int g = 0; g < 32; g += W) sink(at + static_cast<std::size_t>(g), V::loadu(values + g));
      }
    }
  } else if constexpr (is_codebook_type(Type)) {
    // Codebook entries and signs have no register lookup: the block's 256 values through memory, decoded by
    // the scalar codec's own function (exact products, so the values are ggml's).
    alignas(64) float values[256];
    decode_codebook_block(Type, b, V::half_to_float(static_cast<std::uint16_t>(codebook_scale_bits(Type, b))), values);
#pragma GCC unroll 16
    for (int g = 0; g < 256; g += W) sink(e + static_cast<std::size_t>(g), V::loadu(values + g));
  } else if constexpr (Type == kQ2_K) {
    // Per 128 elements h, four groups j of 32: two bits at bits 2j of qs (byte 16 + 32h + l); per 16 elements
    // a scale d * sc and a min dmin * m (the nibbles of byte e / 16): (d sc) q - dmin m.
    const float d = V::half_to_float(load_u16(b + 80)), dmin = V::half_to_float(load_u16(b + 82));
    alignas(64) float scales[16], mins[16];
    for (int j = 0; j < 16; ++j) {
      scales[j] = d * static_cast<float>(b[j] & 0xF);
      mins[j] = dmin * static_cast<float>(b[j] >> 4);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 16
        for (int g = 0; g < 32; g += W) {
          const auto q = V::and_(V::srl(V::load_u8(b + 16 + 32 * h + g), 2 * j), 3);
          const int element = 128 * h + 32 * j + g;
          sink(e + static_cast<std::size_t>(element),
               V::fmsub(V::set1(scales[element / 16]), V::to_float(q), V::set1(mins[element / 16])));
        }
      }
    }
  } else if constexpr (Type == kQ3_K) {
    // Per 128 elements h, four groups j of 32: low two bits at bits 2j of qs (byte 32 + 32h + l), the third at
    // bit 4h + j of hmask (byte l), q = low + 4 bit - 4; 16 scales d (s - 32), one per 16 elements.
    int sc[16];
    q3_k_scales(b + 96, sc);
    const float d = V::half_to_float(load_u16(b + 108));
    alignas(64) float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = d * static_cast<float>(sc[j]);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 16
        for (int g = 0; g < 32; g += W) {
          const auto low = V::and_(V::srl(V::load_u8(b + 32 + 32 * h + g), 2 * j), 3);
          const auto high = V::and_(V::srl(V::load_u8(b + g), 4 * h + j), 1);
          const auto q = V::sub(V::or_(low, V::sll(high, 2)), 4);
          const int element = 128 * h + 32 * j + g;
          sink(e + static_cast<std::size_t>(element), V::mul(V::set1(scales[element / 16]), V::to_float(q)));
        }
      }
    }
  } else if constexpr (Type == kQ4_K && V::kLookup16) {
    alignas(32) float ds[8], dm[8];
    k4_scales<V>(b, ds, dm);
    const auto levels = V::to_float(V::iota());
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const std::uint8_t* q = b + 16 + 32 * c;
      const F low_table = V::fmsub(V::set1(ds[2 * c]), levels, V::set1(dm[2 * c]));
      const F high_table = V::fmsub(V::set1(ds[2 * c + 1]), levels, V::set1(dm[2 * c + 1]));
      const auto bytes0 = V::load_u8(q);
      const auto bytes1 = V::load_u8(q + 16);
      sink(e + 64 * c, V::lookup16(low_table, bytes0));
      sink(e + 64 * c + 16, V::lookup16(low_table, bytes1));
      sink(e + 64 * c + 32, V::lookup16(high_table, V::srl(bytes0, 4)));
      sink(e + 64 * c + 48, V::lookup16(high_table, V::srl(bytes1, 4)));
    }
  } else if constexpr (Type == kQ4_K) {
    alignas(32) float ds[8], dm[8];
    k4_scales<V>(b, ds, dm);
#pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) {
      const std::uint8_t* q = b + 16 + 32 * c;
      const F d1 = V::set1(ds[2 * c]), m1 = V::set1(dm[2 * c]);
#pragma GCC unroll 16
      for (int g = 0; g < 32; g += W) {
        sink(e + 64 * c + g, V::fmsub(d1, V::to_float(V::and_(V::load_u8(q + g), 0xF)), m1));
      }
      const F d2 = V::set1(ds[2 * c + 1]), m2 = V::set1(dm[2 * c + 1]);
#pragma GCC unroll 16
      for (int g = 0; g < 32; g += W) {
        sink(e + 64 * c + 32 + g, V::fmsub(d2, V::to_float(V::srl(V::load_u8(q + g), 4)), m2));
      }
    }
  } else if constexpr (Type == kQ5_K) {
    alignas(32) float ds[8], dm[8];
    k4_scales<V>(b, ds, dm);
    const std::uint8_t* qh = b + 16;
#pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) {
      const std::uint8_t* ql = b + 48 + 32 * c;
      const F d1 = V::set1(ds[2 * c]), m1 = V::set1(dm[2 * c]);
#pragma GCC unroll 16
      for (int g = 0; g < 32; g += W) {
        const auto hi = V::sll(V::and_(V::srl(V::load_u8(qh + g), 2 * c), 1), 4);
        const auto q = V::or_(V::and_(V::load_u8(ql + g), 0xF), hi);
        sink(e + 64 * c + g, V::fmsub(d1, V::to_float(q), m1));
      }
      const F d2 = V::set1(ds[2 * c + 1]), m2 = V::set1(dm[2 * c + 1]);
#pragma GCC unroll 16
      for (int g = 0; g < 32; g += W) {
        const auto hi = V::sll(V::and_(V::srl(V::load_u8(qh + g), 2 * c + 1), 1), 4);
        const auto q = V::or_(V::srl(V::load_u8(ql + g), 4), hi);
        sink(e + 64 * c + 32 + g, V::fmsub(d2, V::to_float(q), m2));
      }
    }
  } else if constexpr (Type == kQ6_K) {
    alignas(64) float scales[16];  // d * the 16 signed sub-block scales
    V::scale_i8x16(b + 192, V::half_to_float(load_u16(b + 208)), scales);
#pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const std::uint8_t* ql = b + 64 * h;
      const std::uint8_t* qh = b + 128 + 32 * h;
#pragma GCC unroll 16
      for (int k = 0; k < 4; ++k) {
        const std::uint8_t* lo_src = ql + ((k & 1) != 0 ? 32 : 0);
#pragma GCC unroll 16
        for (int g = 0; g < 32; g += W) {
          const auto lo_bytes = V::load_u8(lo_src + g);
          const auto lo = k < 2 ? V::and_(lo_bytes, 0xF) : V::srl(lo_bytes, 4);
          const auto hi = V::sll(V::and_(V::srl(V::load_u8(qh + g), 2 * k), 3), 4);
          const int element = 128 * h + 32 * k + g;
          const F scale = V::set1(scales[element / 16]);
          sink(e + static_cast<std::size_t>(element), V::mul(scale, V::to_float(V::sub(V::or_(lo, hi), 32))));
        }
      }
    }
  }
}

// A whole W-group of a float-type row (f32, f16, bf16 or FP8 E4M3 elements k .. k+W-1).
template <class V, int Type>
ENGINE_KERNEL_INLINE typename V::F load_float_group(const std::uint8_t* row, std::size_t k) {
  if constexpr (Type == kF32) {
    return V::load_f32(row + 4 * k);
  } else if constexpr (Type == kF16) {
    return V::from_f16(row + 2 * k);
  } else if constexpr (Type == kF8_E4M3) {
    return V::from_e4m3(row + k);
  } else {
    return V::from_bf16(row + 2 * k);
  }
}

// Elements [k, cols) of a float-type row, zero-padded to W floats.
template <class V, int Type>
void float_tail(const std::uint8_t* row, std::size_t k, std::size_t cols, float* out) {
  for (int i = 0; i < V::W; ++i) out[i] = 0.0f;
  for (std::size_t i = k; i < cols; ++i) {
    if constexpr (Type == kF32) {
      std::memcpy(&out[i - k], row + 4 * i, 4);
    } else if constexpr (Type == kF16) {
      out[i - k] = V::half_to_float(load_u16(row + 2 * i));
    } else if constexpr (Type == kF8_E4M3) {
      out[i - k] = e4m3_to_float(row[i]);
    } else {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(row + 2 * i)) << 16;
      std::memcpy(&out[i - k], &bits, 4);
    }
  }
}

// Elements [k, cols) of x, zero-padded to W floats.
template <class V>
void x_tail(const float* x, std::size_t k, std::size_t cols, float* out) {
  for (int i = 0; i < V::W; ++i) out[i] = 0.0f;
  for (std::size_t i = k; i < cols; ++i) out[i - k] = x[i];
}

// Calls sink(k, w) for every W-group of a row, in order; a float row's last partial group is zero-padded.
template <class V, int Type, class Sink>
void decode_row(const std::uint8_t* row, std::size_t cols, Sink& sink) {
  if constexpr (is_float_type(Type)) {
    const std::size_t full = cols / V::W * V::W;
    for (std::size_t k = 0; k < full; k += V::W) sink(k, load_float_group<V, Type>(row, k));
    if (full < cols) {
      alignas(64) float tail[V::W];
      float_tail<V, Type>(row, full, cols, tail);
      sink(full, V::loadu(tail));
    }
  } else {
    constexpr std::size_t be = block_elements(Type), bb = block_bytes(Type);
    for (std::size_t blk = 0; blk < cols / be; ++blk) decode_block<V, Type>(row + blk * bb, blk * be, sink);
  }
}

// ---- one token: decode in registers, R rows at a time ---------------------------------------------------

// Tiles ahead that gemv prefetches. A tile's R rows are read side by side, each a short stream (a row of
// 1024 Q4_K weights is 9 cache lines), too short for the hardware prefetcher to follow; so while it works
// on one tile, gemv prefetches the tiles after it at the rate it consumes this one.
constexpr std::size_t kPrefetchTiles = 2;

template <class V>
ENGINE_KERNEL_INLINE void prefetch_span(const std::uint8_t* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 64) V::prefetch(p + i);
}

template <class V, int Type, int R>
void gemv_tile(const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x, float* out,
               const float* bias) {
  using F = typename V::F;
  F acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = V::zero();
  const std::uint8_t* ahead = w + kPrefetchTiles * R * row_bytes;
  if constexpr (is_float_type(Type)) {
    const std::size_t full = cols / V::W * V::W;
    constexpr std::size_t kGroupBytes = R * V::W * block_bytes(Type);
    for (std::size_t k = 0; k < full; k += V::W) {
      prefetch_span<V>(ahead, kGroupBytes);
      ahead += kGroupBytes;
      const F xv = V::loadu(x + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] = V::fma(load_float_group<V, Type>(w + r * row_bytes, k), xv, acc[r]);
    }
    if (full < cols) {
      alignas(64) float xt[V::W];
      alignas(64) float wt[V::W];
      x_tail<V>(x, full, cols, xt);
      const F xv = V::loadu(xt);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        float_tail<V, Type>(w + r * row_bytes, full, cols, wt);
        acc[r] = V::fma(V::loadu(wt), xv, acc[r]);
      }
    }
  } else {
    constexpr std::size_t be = block_elements(Type), bb = block_bytes(Type);
    for (std::size_t blk = 0; blk < cols / be; ++blk) {
      prefetch_span<V>(ahead, R * bb);
      ahead += R * bb;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        auto sink = [&](std::size_t k, F wv) { acc[r] = V::fma(wv, V::loadu(x + k), acc[r]); };
        decode_block<V, Type>(w + r * row_bytes + blk * bb, blk * be, sink);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float s = V::hsum(acc[r]);
    out[r] = bias != nullptr ? s + bias[r] : s;
  }
}

template <class V, int Type, int R>
void gemv_tail(int n, const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x, float* out,
               const float* bias) {
  if (n == R) return gemv_tile<V, Type, R>(w, row_bytes, cols, x, out, bias);
  if constexpr (R > 1) gemv_tail<V, Type, R - 1>(n, w, row_bytes, cols, x, out, bias);
}

template <class V, int Type>
void gemv(const Rows& m, const float* x, float* out, const float* bias) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  std::size_t r = 0;
  constexpr int kRows = V::kGemvRows;
  for (; r + kRows <= m.rows; r += kRows) {
    gemv_tile<V, Type, kRows>(w + r * m.row_bytes, m.row_bytes, m.cols, x, out + r,
                              bias != nullptr ? bias + r : nullptr);
  }
  if constexpr (kRows > 1) {
    if (r < m.rows) {
      gemv_tail<V, Type, kRows - 1>(static_cast<int>(m.rows - r), w + r * m.row_bytes, m.row_bytes, m.cols, x, out + r,
                                    bias != nullptr ? bias + r : nullptr);
    }
  }
}

// ---- a few tokens (batched decode): gemv with T token accumulators per row ------------------------------

// R rows x T tokens: the weights are decoded in registers as gemv does, and each decoded group is multiplied
// into the T tokens' accumulators while it is in a register. acc[r][t] sees the same values in the same
// order as gemv_tile's acc[r] for token t, so the result is gemv's bit for bit.
template <class V, int Type, int R, int T>
void batch_tile(const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x, float* out,
                std::size_t out_stride, const float* bias) {
  using F = typename V::F;
  F acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
  }
  const std::uint8_t* ahead = w + kPrefetchTiles * R * row_bytes;
  if constexpr (is_float_type(Type)) {
    const std::size_t full = cols / V::W * V::W;
    constexpr std::size_t kGroupBytes = R * V::W * block_bytes(Type);
    for (std::size_t k = 0; k < full; k += V::W) {
      prefetch_span<V>(ahead, kGroupBytes);
      ahead += kGroupBytes;
      F wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) wv[r] = load_float_group<V, Type>(w + r * row_bytes, k);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const F xv = V::loadu(x + t * cols + k);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
      }
    }
    if (full < cols) {
      alignas(64) float xt[V::W];
      alignas(64) float wt[V::W];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        float_tail<V, Type>(w + r * row_bytes, full, cols, wt);
        const F wv = V::loadu(wt);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          x_tail<V>(x + t * cols, full, cols, xt);
          acc[r][t] = V::fma(wv, V::loadu(xt), acc[r][t]);
        }
      }
    }
  } else {
    constexpr std::size_t be = block_elements(Type), bb = block_bytes(Type);
    for (std::size_t blk = 0; blk < cols / be; ++blk) {
      prefetch_span<V>(ahead, R * bb);
      ahead += R * bb;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        auto sink = [&](std::size_t k, F wv) {
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) acc[r][t] = V::fma(wv, V::loadu(x + t * cols + k), acc[r][t]);
        };
        decode_block<V, Type>(w + r * row_bytes + blk * bb, blk * be, sink);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float s = V::hsum(acc[r][t]);
      out[t * out_stride + r] = bias != nullptr ? s + bias[r] : s;
    }
  }
}

// batch_tile for n <= T tokens (T at compile time, n at run time).
template <class V, int Type, int R, int T>
void batch_tile_tokens(int n, const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x,
                       float* out, std::size_t out_stride, const float* bias) {
  if (n == T) return batch_tile<V, Type, R, T>(w, row_bytes, cols, x, out, out_stride, bias);
  if constexpr (T > 1) batch_tile_tokens<V, Type, R, T - 1>(n, w, row_bytes, cols, x, out, out_stride, bias);
}

// A tile of R rows against every token, kBatchTokens at a time: the tile's bytes come from memory for the
// first token group and from L1/L2 for the others.
template <class V, int Type, int R>
void batch_rows(const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x, std::size_t tokens,
                float* out, std::size_t out_stride, const float* bias) {
  constexpr std::size_t kTokens = V::kBatchTokens;
  for (std::size_t t = 0; t < tokens; t += kTokens) {
    const auto n = static_cast<int>(min_size(kTokens, tokens - t));
    batch_tile_tokens<V, Type, R, V::kBatchTokens>(n, w, row_bytes, cols, x + t * cols, out + t * out_stride,
                                                   out_stride, bias);
  }
}

template <class V, int Type, int R>
void batch_rows_tail(int n, const std::uint8_t* w, std::size_t row_bytes, std::size_t cols, const float* x,
                     std::size_t tokens, float* out, std::size_t out_stride, const float* bias) {
  if (n == R) return batch_rows<V, Type, R>(w, row_bytes, cols, x, tokens, out, out_stride, bias);
  if constexpr (R > 1) batch_rows_tail<V, Type, R - 1>(n, w, row_bytes, cols, x, tokens, out, out_stride, bias);
}

template <class V, int Type>
void gemv_batch(const Rows& m, const float* x, std::size_t tokens, float* out, std::size_t out_stride,
                const float* bias) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  constexpr int kRows = V::kBatchRows;
  std::size_t r = 0;
  for (; r + kRows <= m.rows; r += kRows) {
    batch_rows<V, Type, kRows>(w + r * m.row_bytes, m.row_bytes, m.cols, x, tokens, out + r, out_stride,
                               bias != nullptr ? bias + r : nullptr);
  }
  if constexpr (kRows > 1) {
    if (r < m.rows) {
      batch_rows_tail<V, Type, kRows - 1>(static_cast<int>(m.rows - r), w + r * m.row_bytes, m.row_bytes, m.cols, x,
                                          tokens, out + r, out_stride, bias != nullptr ? bias + r : nullptr);
    }
  }
}

// ---- several tokens: decode a row tile once, reuse it for every token -----------------------------------

// T tokens x kRowTile rows of the decoded tile `w` (rows cols_pad apart, zero-padded); rows >= nr are not
// stored.
template <class V, int T>
void gemm_micro(const float* w, std::size_t cols_pad, std::size_t cols, const float* x, float* out,
                std::size_t out_stride, const float* bias, std::size_t nr) {
  using F = typename V::F;
  F acc[kRowTile][T];
#pragma GCC unroll 16
  for (int r = 0; r < kRowTile; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
  }
  const std::size_t full = cols / V::W * V::W;
  for (std::size_t k = 0; k < full; k += V::W) {
    F wv[kRowTile];
#pragma GCC unroll 16
    for (int r = 0; r < kRowTile; ++r) wv[r] = V::loadu(w + r * cols_pad + k);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const F xv = V::loadu(x + t * cols + k);
#pragma GCC unroll 16
      for (int r = 0; r < kRowTile; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
    }
  }
  if (full < cols) {
    alignas(64) float xt[V::W];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      x_tail<V>(x + t * cols, full, cols, xt);
      const F xv = V::loadu(xt);
#pragma GCC unroll 16
      for (int r = 0; r < kRowTile; ++r) acc[r][t] = V::fma(V::loadu(w + r * cols_pad + full), xv, acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < nr; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float s = V::hsum(acc[r][t]);
      out[t * out_stride + r] = bias != nullptr ? s + bias[r] : s;
    }
  }
}

template <class V, int T>
void gemm_micro_tail(int n, const float* w, std::size_t cols_pad, std::size_t cols, const float* x, float* out,
                     std::size_t out_stride, const float* bias, std::size_t nr) {
  if (n == T) return gemm_micro<V, T>(w, cols_pad, cols, x, out, out_stride, bias, nr);
  if constexpr (T > 1) gemm_micro_tail<V, T - 1>(n, w, cols_pad, cols, x, out, out_stride, bias, nr);
}

template <class V>
std::size_t gemm_scratch_floats(std::size_t cols) {
  return kRowTile * round_up(cols, V::W);
}

template <class V, int Type>
void dequantize_row_into(const std::uint8_t* row, std::size_t cols, float* out) {
  auto sink = [out](std::size_t k, typename V::F wv) { V::storeu(out + k, wv); };
  decode_row<V, Type>(row, cols, sink);
}

template <class V, int Type>
void gemm(const Rows& m, const float* x, std::size_t tokens, float* out, std::size_t out_stride, const float* bias,
          float* scratch) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t cols = m.cols;
  const std::size_t cols_pad = round_up(cols, V::W);
  constexpr std::size_t kTokenTile = V::kTokenTile;
  // Tokens are taken in blocks whose activations stay in L2 (about 256 KiB) while every row tile of this
  // range passes over them; each tile is decoded once per block.
  const std::size_t block = round_up((256u << 10) / (4 * cols + 1) + 1, kTokenTile);
  for (std::size_t t_begin = 0; t_begin < tokens; t_begin += block) {
    const std::size_t t_end = min_size(tokens, t_begin + block);
    for (std::size_t r0 = 0; r0 < m.rows; r0 += kRowTile) {
      const std::size_t nr = min_size(kRowTile, m.rows - r0);
#pragma GCC unroll 16
      for (std::size_t r = 0; r < kRowTile; ++r) {
        float* dst = scratch + r * cols_pad;
        if (r < nr) {
          dequantize_row_into<V, Type>(w + (r0 + r) * m.row_bytes, cols, dst);
          for (std::size_t k = cols; k < cols_pad; ++k) dst[k] = 0.0f;
        } else {
          for (std::size_t k = 0; k < cols_pad; ++k) dst[k] = 0.0f;
        }
      }
      const float* tile_bias = bias != nullptr ? bias + r0 : nullptr;
      for (std::size_t t = t_begin; t < t_end; t += kTokenTile) {
        const auto n = static_cast<int>(min_size(kTokenTile, t_end - t));
        gemm_micro_tail<V, kTokenTile>(n, scratch, cols_pad, cols, x + t * cols, out + t * out_stride + r0, out_stride,
                                       tile_bias, nr);
      }
    }
  }
}

template <class V, int Type>
void dequantize(const Rows& m, float* out) {
  const auto* w = reinterpret_cast<const std::uint8_t*>(m.w);
  const std::size_t full = m.cols / V::W * V::W;
  for (std::size_t r = 0; r < m.rows; ++r) {
    const std::uint8_t* row = w + r * m.row_bytes;
    float* dst = out + r * m.cols;
    if constexpr (is_float_type(Type)) {
      // Not decode_row: the zero-padded last group must not be stored past the row.
      for (std::size_t k = 0; k < full; k += V::W) V::storeu(dst + k, load_float_group<V, Type>(row, k));
      if (full < m.cols) {
        alignas(64) float tail[V::W];
        float_tail<V, Type>(row, full, m.cols, tail);
        std::memcpy(dst + full, tail, (m.cols - full) * sizeof(float));
      }
    } else {
      dequantize_row_into<V, Type>(row, m.cols, dst);
    }
  }
}

template <class V>
float sum_floats(const float* data, std::size_t n) {
  using F = typename V::F;
  F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  std::size_t i = 0;
  for (; i + 4 * V::W <= n; i += 4 * V::W) {
    a0 = V::add(a0, V::loadu(data + i));
    a1 = V::add(a1, V::loadu(data + i + V::W));
    a2 = V::add(a2, V::loadu(data + i + 2 * V::W));
    a3 = V::add(a3, V::loadu(data + i + 3 * V::W));
  }
  float s = V::hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  for (; i < n; ++i) s += data[i];
  return s;
}

// gemv_batch re-decodes a row tile for every kBatchTokens tokens, gemm decodes it once per token block: the
// K-quants' costly decode makes gemm the faster one sooner than for the cheaply decoded types, where
// gemv_batch saves the store and reload of the decoded tile (limits per level in its V; docs/cpu-kernels.md).
template <class V>
constexpr std::size_t batch_max_tokens(int type) {
  return type == kQ4_K || type == kQ5_K || type == kQ6_K || type == kQ3_K || type == kIQ4_XS || type == kQ2_K ||
                 is_codebook_type(type)
             ? V::kBatchMaxTokensKQuant
             : V::kBatchMaxTokens;
}

}  // namespace
}  // namespace engine::cpu::kernels

#include "engine/cpu/attention_impl.h"

namespace engine::cpu::kernels {
namespace {

// g · sigmoid(z) · u, with sigmoid(z) = e^min(z, 0) / (1 + e^-|z|): exponentials of non-positive arguments
// only (exp_nonpositive, about 2 ulp), so nothing overflows for large |z| and either tail keeps its precision.
template <class V>
ENGINE_KERNEL_INLINE typename V::F gated_sigmoid_times(typename V::F g, typename V::F z, typename V::F u) {
  using F = typename V::F;
  const F minus_one = V::set1(-1.0f);
  const F positive = V::max(z, V::zero());
  const F negative = V::fma(positive, minus_one, z);                      // min(z, 0)
  const F t = exp_nonpositive<V>(V::fma(positive, minus_one, negative));  // e^-|z|
  return V::mul(V::div(V::mul(g, exp_nonpositive<V>(negative)), V::add(t, V::set1(1.0f))), u);
}

// silu(g) · u with silu(g) = g / (1 + e^-g), computed as (max(g, 0) + min(g, 0) · t) / (1 + t) with
// t = e^-|g|: one exponential, since the sigmoid's argument is g itself.
struct SiluTimes {
  template <class V>
  ENGINE_KERNEL_INLINE static typename V::F times(typename V::F g, typename V::F u) {
    using F = typename V::F;
    const F minus_one = V::set1(-1.0f);
    const F positive = V::max(g, V::zero());
    const F negative = V::fma(positive, minus_one, g);                      // min(g, 0)
    const F t = exp_nonpositive<V>(V::fma(positive, minus_one, negative));  // e^-|g|
    return V::mul(V::div(V::fma(negative, t, positive), V::add(t, V::set1(1.0f))), u);
  }
};

// gelu_tanh(g) · u: GELU's tanh approximation 0.5 g (1 + tanh(√(2/π) (g + 0.044715 g³))) is g times the
// sigmoid of twice tanh's argument, since (1 + tanh(a)) / 2 = sigmoid(2a).
struct GeluTanhTimes {
  template <class V>
  ENGINE_KERNEL_INLINE static typename V::F times(typename V::F g, typename V::F u) {
    constexpr float kTwiceSqrtTwoOverPi = 1.5957691216057308f;
    const auto cubic = V::fma(V::mul(V::set1(0.044715f), V::mul(g, g)), g, g);  // g + 0.044715 g³
    return gated_sigmoid_times<V>(g, V::mul(V::set1(kTwiceSqrtTwoOverPi), cubic), u);
  }
};

// out = Act::times(gate, up) over n values: whole vectors, then the tail through a zero-padded vector.
template <class V, class Act>
void gated_mul(const float* gate, const float* up, std::size_t n, float* out) {
  std::size_t i = 0;
  for (; i + V::W <= n; i += V::W) V::storeu(out + i, Act::template times<V>(V::loadu(gate + i), V::loadu(up + i)));
  if (i == n) return;
  alignas(64) float g[V::W] = {}, u[V::W] = {}, o[V::W];
  for (std::size_t j = 0; i + j < n; ++j) {
    g[j] = gate[i + j];
    u[j] = up[i + j];
  }
  V::storeu(o, Act::template times<V>(V::loadu(g), V::loadu(u)));
  for (std::size_t j = 0; i + j < n; ++j) out[i + j] = o[j];
}

// gpt-oss's clamped SwiGLU (ClampedGatedMulFn): g = min(gate, limit) and u = clamp(up, -limit, limit) by max
// alone (min(a, b) = -max(-a, -b)), then (u + 1) · g · sigmoid(alpha g) as gated_sigmoid_times computes it.
template <class V>
ENGINE_KERNEL_INLINE typename V::F clamped_swiglu_times(typename V::F gate, typename V::F up, typename V::F alpha,
                                                        typename V::F limit) {
  using F = typename V::F;
  const F minus_one = V::set1(-1.0f);
  const F minus_limit = V::mul(limit, minus_one);
  const F g = V::mul(V::max(V::mul(gate, minus_one), minus_limit), minus_one);
  const F u = V::max(V::mul(V::max(V::mul(up, minus_one), minus_limit), minus_one), minus_limit);
  return gated_sigmoid_times<V>(g, V::mul(alpha, g), V::add(u, V::set1(1.0f)));
}

template <class V>
void clamped_swiglu_mul(const float* gate, const float* up, std::size_t n, float alpha, float limit, float* out) {
  const typename V::F va = V::set1(alpha), vl = V::set1(limit);
  std::size_t i = 0;
  for (; i + V::W <= n; i += V::W)
    V::storeu(out + i, clamped_swiglu_times<V>(V::loadu(gate + i), V::loadu(up + i), va, vl));
  if (i == n) return;
  alignas(64) float g[V::W] = {}, u[V::W] = {}, o[V::W];
  for (std::size_t j = 0; i + j < n; ++j) {
    g[j] = gate[i + j];
    u[j] = up[i + j];
  }
  V::storeu(o, clamped_swiglu_times<V>(V::loadu(g), V::loadu(u), va, vl));
  for (std::size_t j = 0; i + j < n; ++j) out[i + j] = o[j];
}

// One entry per weight type, in quant::WeightType's order (the tables are indexed by it).
#define ENGINE_EACH_TYPE(EXPR)                                                                                         \
  {                                                                                                                    \
    EXPR(kF32), EXPR(kF16), EXPR(kBF16), EXPR(kQ8_0), EXPR(kQ4_0), EXPR(kQ4_K), EXPR(kQ5_K), EXPR(kQ6_K), EXPR(kQ4_1), \
        EXPR(kQ5_0), EXPR(kQ5_1), EXPR(kQ3_K), EXPR(kIQ4_NL), EXPR(kIQ4_XS), EXPR(kQ2_K), EXPR(kIQ2_XXS),              \
        EXPR(kIQ2_XS), EXPR(kIQ2_S), EXPR(kIQ3_XXS), EXPR(kIQ3_S), EXPR(kIQ1_S), EXPR(kIQ1_M), EXPR(kMXFP4),           \
        EXPR(kF8_E4M3)                                                                                                 \
  }
// Every type listed once, in order (a type left out would leave its table entries null).
#define ENGINE_TYPE_ID(T) T
constexpr int kListedTypes[] = ENGINE_EACH_TYPE(ENGINE_TYPE_ID);
#undef ENGINE_TYPE_ID
constexpr bool lists_every_type_in_order() {
  if (sizeof kListedTypes / sizeof kListedTypes[0] != kTypeCount) return false;
  for (int i = 0; i < kTypeCount; ++i) {
    if (kListedTypes[i] != i) return false;
  }
  return true;
}
static_assert(lists_every_type_in_order(), "ENGINE_EACH_TYPE lists every weight type, in quant::WeightType's order");

template <class V>
constexpr Table make_table(const char* name) {
#define ENGINE_GEMV(T) gemv<V, T>
#define ENGINE_GEMV_BATCH(T) gemv_batch<V, T>
#define ENGINE_GEMM(T) gemm<V, T>
#define ENGINE_DEQUANTIZE(T) dequantize<V, T>
#define ENGINE_BATCH_MAX(T) batch_max_tokens<V>(T)
  return Table{
      name,
      ENGINE_EACH_TYPE(ENGINE_GEMV),
      ENGINE_EACH_TYPE(ENGINE_GEMV_BATCH),
      ENGINE_EACH_TYPE(ENGINE_GEMM),
      ENGINE_EACH_TYPE(ENGINE_DEQUANTIZE),
      sum_floats<V>,
      gemm_scratch_floats<V>,
      kRowTile,
      ENGINE_EACH_TYPE(ENGINE_BATCH_MAX),
      {},  // f32 activations for every type (the int8 kernels are kernels_avx512vnni.cc's and kernels_avx2int16.cc's)
      nullptr,
      nullptr,
      attention_tile<V>,
      attention_scratch_bytes,
      gated_mul<V, SiluTimes>,
      gated_mul<V, GeluTanhTimes>,
      clamped_swiglu_mul<V>,
  };
#undef ENGINE_GEMV
#undef ENGINE_GEMV_BATCH
#undef ENGINE_GEMM
#undef ENGINE_DEQUANTIZE
#undef ENGINE_BATCH_MAX
}

#undef ENGINE_EACH_TYPE
#undef ENGINE_KERNEL_INLINE

}  // namespace
}  // namespace engine::cpu::kernels
