#include "engine/quant/quant.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/quant/ggml_blocks.h"

namespace engine::quant {

namespace {

using ggml_blocks::dequantize_nibble_levels;
using ggml_blocks::iq4_xs_scale;
using ggml_blocks::kIq4Values;
using ggml_blocks::kMxfp4Values;
using ggml_blocks::mxfp4_half_scale;
using ggml_blocks::q3_k_scales;

static_assert(std::endian::native == std::endian::little, "block fields are stored little-endian");
static_assert(ggml_blocks::kMXFP4 == static_cast<int>(WeightType::MXFP4) &&
                  ggml_blocks::kIQ1_M == static_cast<int>(WeightType::IQ1_M) &&
                  ggml_blocks::kIQ2_XXS == static_cast<int>(WeightType::IQ2_XXS),
              "ggml_blocks' type ids are WeightType's values");

constexpr std::size_t kQK = 256;  // elements of a K-quant super-block

struct TypeFacts {
  WeightType type;
  std::string_view name;
  std::optional<std::uint32_t> ggml_id;
  std::size_t block_elements;
  std::size_t block_bytes;
};

// The ggml type each GGUF weight type is stored as. Names and block sizes come from the one ggml type table
// (engine/format/ggml_types.cc); the codecs below lay their blocks out to match those sizes.
constexpr std::array<std::pair<WeightType, std::uint32_t>, kWeightTypeCount - 1> kGgmlIds = {{
    {WeightType::F32, 0},     {WeightType::F16, 1},     {WeightType::BF16, 30},    {WeightType::Q8_0, 8},
    {WeightType::Q4_0, 2},    {WeightType::Q4_K, 12},   {WeightType::Q5_K, 13},    {WeightType::Q6_K, 14},
    {WeightType::Q4_1, 3},    {WeightType::Q5_0, 6},    {WeightType::Q5_1, 7},     {WeightType::Q3_K, 11},
    {WeightType::IQ4_NL, 20}, {WeightType::IQ4_XS, 23}, {WeightType::Q2_K, 10},    {WeightType::IQ2_XXS, 16},
    {WeightType::IQ2_XS, 17}, {WeightType::IQ2_S, 22},  {WeightType::IQ3_XXS, 18}, {WeightType::IQ3_S, 21},
    {WeightType::IQ1_S, 19},  {WeightType::IQ1_M, 29},  {WeightType::MXFP4, 39},
}};

const std::array<TypeFacts, kWeightTypeCount>& all_facts() {
  static const std::array<TypeFacts, kWeightTypeCount> table = [] {
    std::array<TypeFacts, kWeightTypeCount> out{};
    for (std::size_t i = 0; i < kGgmlIds.size(); ++i) {
      const auto [type, id] = kGgmlIds[i];
      const format::GgmlTypeInfo* info = format::ggml_type_info(id);
      if (info == nullptr) throw std::logic_error("ggml type " + std::to_string(id) + " is not in the type table");
      out[i] = {type, info->name, id, info->block_size, info->type_size};
    }
    // safetensors' spelling of the type it stores FP8 checkpoints in.
    out.back() = {WeightType::F8_E4M3, "F8_E4M3", std::nullopt, 1, 1};
    return out;
  }();
  return table;
}

const TypeFacts& facts(WeightType type) {
  for (const auto& f : all_facts()) {
    if (f.type == type) return f;
  }
  throw std::invalid_argument("unknown weight type " + std::to_string(static_cast<int>(type)));
}

std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_u16(std::byte* p, std::uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

const std::uint8_t* as_u8(const std::byte* p) {
  return reinterpret_cast<const std::uint8_t*>(p);
}
std::uint8_t* as_u8(std::byte* p) {
  return reinterpret_cast<std::uint8_t*>(p);
}

// ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded integer (ties to even) in the low mantissa bits.
// Kept bit-for-bit rather than std::lrint so that the quantizers do not depend on the rounding mode.
int nearest_int(float value) {
  const float shifted = value + 12582912.f;
  std::int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// Stores and reloads a half as the quantizers do: later steps use the rounded scale, not the exact one.
float round_trip_f16(float value) {
  return f16_to_f32(f32_to_f16(value));
}

constexpr float kGroupMaxEps = 1e-15f;

// ---- Q8_0: { f16 d; int8 qs[32]; }, x = qs * d -------------------------------------------------------

void quantize_q8_0(const float* x, std::uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  for (int j = 0; j < 32; ++j) y[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::round(x[j] * id)));
}

void dequantize_q8_0(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

// The signed value of largest magnitude among n (the first, on ties), from which Q4_0, Q5_0, Q6_K, Q3_K and
// IQ4 derive their scales.
float signed_max(const float* x, int n = 32) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// ---- Q4_0: { f16 d; u8 qs[16]; }, element j in the low nibble of qs[j], j + 16 in the high nibble;
// x = (q - 8) * d. The scale is the signed value of largest magnitude over -8, so it maps to exactly -8.

void quantize_q4_0(const float* x, std::uint8_t* y) {
  const float d = signed_max(x) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  for (int j = 0; j < 16; ++j) {
    // Truncation after adding 8.5 is ggml's rounding (halves away from the low end).
    const auto q0 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>(x[j] * id + 8.5f)));
    const auto q1 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>(x[16 + j] * id + 8.5f)));
    y[2 + j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
  }
}

void dequantize_q4_0(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

// ---- Q4_1: { f16 d; f16 m; u8 qs[16]; }, nibbles as Q4_0, x = q * d + m (d and m from the block's range) ----
// ---- Q5_0: { f16 d; u32 qh; u8 qs[16]; }, Q4_0's nibbles with bit j of qh as element j's fifth bit,
//      x = (q - 16) * d
// ---- Q5_1: { f16 d; f16 m; u32 qh; u8 qs[16]; }, x = q * d + m

// The block's minimum and maximum (ggml's Q4_1 / Q5_1 start from +-FLT_MAX, so a block is never empty).
std::pair<float, float> block_range(const float* x) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  return {min, max};
}

// 32 levels (element order) into 16 nibble bytes (element j low, j + 16 high) and, for five-bit types, the
// 32 fifth bits.
void pack_levels(const std::uint8_t* levels, std::uint8_t* qs, std::uint8_t* qh) {
  std::uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<std::uint8_t>((levels[j] & 0x0F) | ((levels[16 + j] & 0x0F) << 4));
  }
  if (qh == nullptr) return;
  for (int j = 0; j < 32; ++j) high |= static_cast<std::uint32_t>((levels[j] >> 4) & 1) << j;
  std::memcpy(qh, &high, sizeof high);
}

// Element j's level: its nibble, and its fifth bit when qh is given.
int level_at(const std::uint8_t* qs, const std::uint8_t* qh, int j) {
  const int nibble = j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
  if (qh == nullptr) return nibble;
  std::uint32_t high;
  std::memcpy(&high, qh, sizeof high);
  return nibble | static_cast<int>(((high >> j) & 1) << 4);
}

// Q4_1 and Q5_1: d spans the range in 2^bits - 1 steps from the minimum; levels are truncated after adding
// a half (ggml's rounding), Q4_1's clamped to 15 and Q5_1's not (ggml does not clamp it).
template <int Bits>
void quantize_offset(const float* x, std::uint8_t* y) {
  const auto [min, max] = block_range(x);
  const float d = (max - min) / static_cast<float>((1 << Bits) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  store_u16(reinterpret_cast<std::byte*>(y + 2), f32_to_f16(min));
  std::uint8_t levels[32];
  for (int j = 0; j < 32; ++j) {
    const float scaled = (x[j] - min) * id + 0.5f;
    levels[j] = Bits == 4 ? static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>(scaled)))
                          : static_cast<std::uint8_t>(scaled);
  }
  pack_levels(levels, y + (Bits == 4 ? 4 : 8), Bits == 4 ? nullptr : y + 4);
}

template <int Bits>
void dequantize_offset(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  const float m = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 2)));
  const std::uint8_t* qs = b + (Bits == 4 ? 4 : 8);
  const std::uint8_t* qh = Bits == 4 ? nullptr : b + 4;
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(level_at(qs, qh, j)) * d + m;
}

void quantize_q4_1(const float* x, std::uint8_t* y) {
  quantize_offset<4>(x, y);
}
void dequantize_q4_1(const std::uint8_t* b, float* y) {
  dequantize_offset<4>(b, y);
}
void quantize_q5_1(const float* x, std::uint8_t* y) {
  quantize_offset<5>(x, y);
}
void dequantize_q5_1(const std::uint8_t* b, float* y) {
  dequantize_offset<5>(b, y);
}

// Q5_0: Q4_0's symmetric scale over -16, levels truncated after adding 16.5 and clamped to 31.
void quantize_q5_0(const float* x, std::uint8_t* y) {
  const float d = signed_max(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  std::uint8_t levels[32];
  for (int j = 0; j < 32; ++j) {
    levels[j] = static_cast<std::uint8_t>(std::min<int>(31, static_cast<std::int8_t>(x[j] * id + 16.5f)));
  }
  pack_levels(levels, y + 6, y + 2);
}

void dequantize_q5_0(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(level_at(b + 6, b + 2, j) - 16) * d;
}

// ---- K-quant helpers --------------------------------------------------------------------------------

// 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K / Q5_K: sub-blocks 0-3 keep
// them in the low 6 bits of bytes j and j+4; sub-blocks 4-7 split them into a nibble in byte j+4 and two
// high bits in the top of bytes j-4 (scale) and j (min).
void scale_min_k4(int j, const std::uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void pack_scale_min_k4(int j, std::uint8_t ls, std::uint8_t lm, std::uint8_t* q) {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    q[j - 4] = static_cast<std::uint8_t>(q[j - 4] | ((ls >> 4) << 6));
    q[j] = static_cast<std::uint8_t>(q[j] | ((lm >> 4) << 6));
  }
}

// ggml's make_qkx2_quants: an asymmetric n-level fit of x (scale and a non-positive offset) minimising the
// weighted squared error, tried over nstep + 1 slightly stretched grids. Returns the scale and stores -min.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, std::uint8_t* levels, float& neg_min,
                    float rmin, float rdelta, int nstep, bool absolute_error = false) {
  // The error measure: squared (Q4_K, Q5_K) or absolute (Q2_K's use_mad).
  const auto error = [absolute_error](float diff) { return absolute_error ? std::fabs(diff) : diff * diff; };
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    neg_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    levels[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    best_error += weights[i] * error(scale * static_cast<float>(levels[i]) + min - x[i]);
  }
  std::array<std::uint8_t, 32> aux{};
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      aux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      const auto lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        cur_error += weights[i] * error(this_scale * static_cast<float>(aux[i]) + this_min - x[i]);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) levels[i] = aux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  neg_min = -min;
  return scale;
}

// The shared first half of the Q4_K and Q5_K reference quantizers: per 32-element sub-block fits, the
// 6-bit packed scales/mins and the two f16 super-scales; then the levels re-derived from the stored scales.
// Returns d and dmin through the header bytes of y (d at 0, dmin at 2, scales at 4).
void quantize_k_scales(const float* x, int nmax, float rmin, int nstep, std::uint8_t* y, std::uint8_t* levels) {
  std::array<float, 8> scales{};
  std::array<float, 8> mins{};
  std::array<float, 32> weights{};
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights.data(), levels + 32 * j, mins[j], rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::uint8_t* packed = y + 4;
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // The uint8_t truncation before the clamp is ggml's (it only matters for a negative fit).
    const auto ls = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j])));
    pack_scale_min_k4(j, ls, lm, packed);
  }
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(max_scale / 63.f));
  store_u16(reinterpret_cast<std::byte*>(y + 2), f32_to_f16(max_min / 63.f));
  const float d_all = round_trip_f16(max_scale / 63.f);
  const float m_all = round_trip_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    int sc = 0;
    int m = 0;
    scale_min_k4(j, packed, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the fit's levels, as ggml does
    const float dm = m_all * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      levels[32 * j + i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// ---- Q4_K: { f16 d; f16 dmin; u8 scales[12]; u8 qs[128]; } over 256 elements. Each 64-element chunk c
// uses 32 bytes qs[32c..32c+31]: low nibbles are elements 64c..64c+31 (sub-block 2c), high nibbles
// 64c+32..64c+63 (sub-block 2c+1). x = (d * scale) * q - (dmin * min).

void quantize_q4_k(const float* x, std::uint8_t* y) {
  std::array<std::uint8_t, kQK> levels{};
  quantize_k_scales(x, 15, -1.f, 20, y, levels.data());
  std::uint8_t* q = y + 16;
  for (std::size_t c = 0; c < 4; ++c) {
    for (std::size_t l = 0; l < 32; ++l) {
      q[32 * c + l] = static_cast<std::uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
    }
  }
}

void dequantize_q4_k(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  const float dmin = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 2)));
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* q = b + 16;
  for (int c = 0; c < 4; ++c) {
    int sc = 0, m = 0;
    scale_min_k4(2 * c, scales, sc, m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    scale_min_k4(2 * c + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[64 * c + l] = d1 * static_cast<float>(q[32 * c + l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d2 * static_cast<float>(q[32 * c + l] >> 4) - m2;
  }
}

// ---- Q5_K: { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; }. As Q4_K plus a fifth bit: for
// chunk c, bit 2c of qh[l] is the high bit of element 64c + l and bit 2c+1 that of element 64c + 32 + l.

void quantize_q5_k(const float* x, std::uint8_t* y) {
  std::array<std::uint8_t, kQK> levels{};
  quantize_k_scales(x, 31, -0.5f, 15, y, levels.data());
  std::uint8_t* qh = y + 16;
  std::uint8_t* ql = y + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int l1 = levels[64 * c + l];
      int l2 = levels[64 * c + 32 + l];
      if (l1 > 15) {
        l1 -= 16;
        qh[l] = static_cast<std::uint8_t>(qh[l] | (1 << (2 * c)));
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[l] = static_cast<std::uint8_t>(qh[l] | (2 << (2 * c)));
      }
      ql[32 * c + l] = static_cast<std::uint8_t>(l1 | (l2 << 4));
    }
  }
}

void dequantize_q5_k(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  const float dmin = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 2)));
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* ql = b + 48;
  for (int c = 0; c < 4; ++c) {
    int sc = 0, m = 0;
    scale_min_k4(2 * c, scales, sc, m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    scale_min_k4(2 * c + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[32 * c + l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4);
      y[64 * c + l] = d1 * static_cast<float>(q) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
      y[64 * c + 32 + l] = d2 * static_cast<float>(q) - m2;
    }
  }
}

// ---- Q6_K: { u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d; }. Each 128-element half h uses ql[64h..],
// qh[32h..] and scales[8h..]: for l < 32, element 128h + 32k + l (k = 0..3) has its low nibble in
// ql[64h + l + 32(k&1)] (low nibble for k < 2, high for k >= 2) and its high two bits in bits 2k of
// qh[32h + l]; its 16-element sub-block scale is scales[8h + 2k + l/16]. x = (d * scale) * (q - 32).

// ggml's make_qx_quants with rmse_type 1 (weights x^2): a symmetric fit with levels -nmax..nmax-1 whose
// scale is refined over 18 nearby grids. Stores levels + nmax.
float fit_symmetric(int n, int nmax, const float* x, std::int8_t* levels) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  const auto nmax_f = static_cast<float>(nmax);
  float iscale = -nmax_f / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    levels[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const auto lf = static_cast<float>(l);
    sumlx += w * x[i] * lf;
    suml2 += w * lf * lf;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax_f + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      const auto lf = static_cast<float>(l);
      sumlx += w * x[i] * lf;
      suml2 += w * lf * lf;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        levels[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_q6_k(const float* x, std::uint8_t* y) {
  std::array<std::int8_t, kQK> levels{};
  std::array<float, 16> scales{};
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = fit_symmetric(16, 32, x + 16 * ib, levels.data() + 16 * ib);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  std::memset(y, 0, 210);
  if (max_abs_scale < kGroupMaxEps) return;  // all zero: d = 0, every field zero

  const float iscale = -128.f / max_scale;
  store_u16(reinterpret_cast<std::byte*>(y + 208), f32_to_f16(1 / iscale));
  const float d_all = round_trip_f16(1 / iscale);
  auto* sc = reinterpret_cast<std::int8_t*>(y + 192);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = nearest_int(x[16 * j + i] / d);
      levels[16 * j + i] = static_cast<std::int8_t>(std::max(-32, std::min(31, l)) + 32);
    }
  }
  std::uint8_t* ql = y;
  std::uint8_t* qh = y + 128;
  for (int h = 0; h < 2; ++h) {
    const std::int8_t* lv = levels.data() + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[64 * h + l] = static_cast<std::uint8_t>((lv[l] & 0xF) | ((lv[l + 64] & 0xF) << 4));
      ql[64 * h + l + 32] = static_cast<std::uint8_t>((lv[l + 32] & 0xF) | ((lv[l + 96] & 0xF) << 4));
      qh[32 * h + l] = static_cast<std::uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) | ((lv[l + 64] >> 4) << 4) |
                                                 ((lv[l + 96] >> 4) << 6));
    }
  }
}

void dequantize_q6_k(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 208)));
  const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  for (int h = 0; h < 2; ++h) {
    const std::uint8_t* ql = b + 64 * h;
    const std::uint8_t* qh = b + 128 + 32 * h;
    const std::int8_t* s = sc + 8 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[128 * h + l] = d * static_cast<float>(s[is]) * static_cast<float>(q1);
      y[128 * h + l + 32] = d * static_cast<float>(s[is + 2]) * static_cast<float>(q2);
      y[128 * h + l + 64] = d * static_cast<float>(s[is + 4]) * static_cast<float>(q3);
      y[128 * h + l + 96] = d * static_cast<float>(s[is + 6]) * static_cast<float>(q4);
    }
  }
}

// ---- Q3_K: { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d; } -----------------------------------------
// Element e = 128 h + 32 j + l (h < 2, j < 4, l < 32) has its low two bits at bits 2j of qs[32 h + l] and its
// third at bit 4h + j of hmask[l], set meaning "no offset": q = low + 4 * bit - 4, in -4..3. Its 16-element
// sub-block e / 16 has a signed 6-bit scale (s - 32): low nibbles in bytes 0-7 (sub-blocks 0-7) and high
// nibbles (8-15) of scales[0..7], the top two bits of sub-block j at bits 2 (j / 4) of scales[8 + j % 4].
// x = d * (s - 32) * q.

int q3_k_level(const std::uint8_t* b, int e) {
  const int h = e / 128, j = (e % 128) / 32, l = e % 32;
  const int low = (b[32 + 32 * h + l] >> (2 * j)) & 3;
  const int high = (b[l] >> (4 * h + j)) & 1;
  return low + 4 * high - 4;
}

// ggml's make_q3_quants with its weighted refinement: levels -nmax..nmax-1 (stored + nmax) for one
// sub-block, the scale mapping the largest magnitude to -nmax, then up to five passes that move single
// levels while the weighted fit (weights x^2) improves.
float fit_q3(int n, int nmax, const float* x, std::int8_t* levels) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    levels[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto li = static_cast<float>(levels[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (l != levels[i]) {
          slx += w * x[i] * static_cast<float>(l);
          sl2 += w * static_cast<float>(l) * static_cast<float>(l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            levels[i] = static_cast<std::int8_t>(l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<std::int8_t>(levels[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void quantize_q3_k(const float* x, std::uint8_t* y) {
  std::int8_t levels[kQK];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_q3(16, 4, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  std::memset(y, 0, 110);
  std::uint8_t* packed = y + 96;
  if (max_scale != 0) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int l = std::max(-32, std::min(31, nearest_int(iscale * scales[j]))) + 32;
      if (j < 8) {
        packed[j] = static_cast<std::uint8_t>(l & 0xF);
      } else {
        packed[j - 8] = static_cast<std::uint8_t>(packed[j - 8] | ((l & 0xF) << 4));
      }
      packed[8 + j % 4] = static_cast<std::uint8_t>(packed[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
    store_u16(reinterpret_cast<std::byte*>(y + 108), f32_to_f16(1 / iscale));
  }
  // Levels again from the stored scales (sub-blocks whose scale is 0 keep their fit's levels, as in ggml).
  int stored[16];
  q3_k_scales(packed, stored);
  const float d_all = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(y + 108)));
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(stored[j]);
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] = static_cast<std::int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + i] / d))) + 4);
    }
  }
  for (int e = 0; e < static_cast<int>(kQK); ++e) {
    int l = levels[e];
    const int h = e / 128, j = (e % 128) / 32, i = e % 32;
    if (l > 3) {
      y[i] = static_cast<std::uint8_t>(y[i] | (1 << (4 * h + j)));
      l -= 4;
    }
    y[32 + 32 * h + i] = static_cast<std::uint8_t>(y[32 + 32 * h + i] | (l << (2 * j)));
  }
}

void dequantize_q3_k(const std::uint8_t* b, float* y) {
  int scales[16];
  q3_k_scales(b + 96, scales);
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 108)));
  for (int e = 0; e < static_cast<int>(kQK); ++e) {
    y[e] = d * static_cast<float>(scales[e / 16]) * static_cast<float>(q3_k_level(b, e));
  }
}

// ---- IQ4_NL: { f16 d; u8 qs[16]; } and IQ4_XS: { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]; } --------
// Nibbles (as Q4_0's, per 32 values) index the 16 non-linear levels kIq4Values; x = d * level (IQ4_NL) or
// d * (s - 32) * level, s the 6-bit scale of the block of 32 (IQ4_XS: low nibble of scales_l[ib / 2] at
// bit 4 (ib % 2), top two bits at bits 2 ib of scales_h).

// The index of the level nearest v (the lower one on ties), as ggml's best_index_int8.
int nearest_iq4_level(float v) {
  if (v <= kIq4Values[0]) return 0;
  if (v >= kIq4Values[15]) return 15;
  int low = 0, high = 15;
  while (high - low > 1) {
    const int mid = (low + high) / 2;
    if (v < kIq4Values[mid]) {
      high = mid;
    } else {
      low = mid;
    }
  }
  return v - static_cast<float>(kIq4Values[high - 1]) < static_cast<float>(kIq4Values[high]) - v ? high - 1 : high;
}

// ggml's quantize_row_iq4_nl_impl for one block of 32 (weights x^2): the scale from the largest magnitude
// (over -127, or over +127 when searching), the weighted least-squares scale of the nearest levels, then
// with `tries` > 0 the 2 tries + 1 scales around it, the best fit kept. Returns the scale (0 for a block
// of zeros, whose levels are then left as they are).
float fit_iq4(const float* x, int tries, std::uint8_t* levels) {
  const float max = signed_max(x);
  if (std::fabs(max) < kGroupMaxEps) return 0;
  const auto first = static_cast<float>(kIq4Values[0]);
  const auto fit = [&](float id, std::uint8_t* out, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_iq4_level(id * x[j]);
      if (out != nullptr) out[j] = static_cast<std::uint8_t>(l);
      const auto q = static_cast<float>(kIq4Values[l]);
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx = 0, sumq2 = 0;
  fit(1 / (tries > 0 ? -max / first : max / first), levels, sumqx, sumq2);
  float d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -tries; t <= tries; ++t) {
    fit(static_cast<float>(t + kIq4Values[0]) / max, nullptr, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_iq4_levels(const std::uint8_t* levels, std::uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<std::uint8_t>(levels[j] | (levels[16 + j] << 4));
}

// IQ4_NL's reference quantizer takes no search (ggml passes ntry -1) and keeps the first fit's levels.
void quantize_iq4_nl(const float* x, std::uint8_t* y) {
  std::uint8_t levels[32] = {};
  const float d = fit_iq4(x, -1, levels);
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  pack_iq4_levels(levels, y + 2);
}

void dequantize_iq4_nl(const std::uint8_t* b, float* y) {
  dequantize_nibble_levels(kIq4Values, f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b))), b + 2, y);
}

// ---- MXFP4: { u8 e; u8 qs[16]; }, x = kMxfp4Values[q] * 2^(e - 128) (ggml_blocks.h) --------------------

// ggml's reference quantizer: the shared exponent from the largest magnitude, e = floor(log2(amax)) - 2 + 127
// (so amax lands in [4, 8) doubled levels, the top level 12 reaching 1.5 times its power of two), 0 for a
// block of zeros; each value the level nearest it, the first on ties (+0 before -0). ggml converts a negative
// or too large exponent to its byte unchecked; here it is clamped to [0, 255] (magnitudes below 2^-125 or
// from 2^128: outside what a checkpoint holds).
void quantize_mxfp4(const float* x, std::uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float exponent = amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
  const auto e = static_cast<std::uint8_t>(std::clamp(exponent, 0.0f, 255.0f));
  const float d = mxfp4_half_scale(e);
  const auto nearest = [&](float v) {
    int best = 0;
    float best_error = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - v);
    for (int i = 1; i < 16; ++i) {
      const float error = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - v);
      if (error < best_error) {
        best = i;
        best_error = error;
      }
    }
    return static_cast<std::uint8_t>(best);
  };
  y[0] = e;
  for (int j = 0; j < 16; ++j) y[1 + j] = static_cast<std::uint8_t>(nearest(x[j]) | (nearest(x[16 + j]) << 4));
}

void dequantize_mxfp4(const std::uint8_t* b, float* y) {
  dequantize_nibble_levels(kMxfp4Values, mxfp4_half_scale(b[0]), b + 1, y);
}

// IQ4_XS: each block of 32 fitted with the search (ntry 7), the super-block scale d = -max / 32 (the
// signed largest block scale), each block's 6-bit scale the nearest multiple of d, levels refitted to it.
void quantize_iq4_xs(const float* x, std::uint8_t* y) {
  float scales[8];
  float max_scale = 0, amax_scale = 0;
  std::uint8_t levels[32];
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = fit_iq4(x + 32 * ib, 7, levels);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  std::memset(y, 0, 136);
  const float d = -max_scale / 32;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d));
  const float id = d != 0 ? 1 / d : 0.f;
  std::uint16_t scales_h = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0 ? 1 / dl : 0.f;
    for (int j = 0; j < 32; ++j) levels[j] = static_cast<std::uint8_t>(nearest_iq4_level(idl * x[32 * ib + j]));
    pack_iq4_levels(levels, y + 8 + 16 * ib);
    const int s = l + 32;
    y[4 + ib / 2] = static_cast<std::uint8_t>(y[4 + ib / 2] | ((s & 0xF) << (4 * (ib % 2))));
    scales_h = static_cast<std::uint16_t>(scales_h | ((s >> 4) << (2 * ib)));
  }
  store_u16(reinterpret_cast<std::byte*>(y + 2), scales_h);
}

void dequantize_iq4_xs(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b)));
  for (int ib = 0; ib < 8; ++ib) {
    dequantize_nibble_levels(kIq4Values, d * static_cast<float>(iq4_xs_scale(b, ib)), b + 8 + 16 * ib, y + 32 * ib);
  }
}

// ---- Q2_K: { u8 scales[16]; u8 qs[64]; f16 d; f16 dmin; } --------------------------------------------------
// Element e = 128 h + 32 j + l has its two bits at bits 2j of qs[32 h + l]; its 16-element sub-block e / 16
// has a 4-bit scale (low nibble of scales[e / 16]) and a 4-bit min (high nibble): x = (d * sc) * q - dmin * m.

int q2_k_level(const std::uint8_t* b, int e) {
  return (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// ggml's quantize_row_q2_K_ref: each sub-block fitted with make_qkx2_quants (weights |x|, absolute error, 16
// grids from 2.5 to 4 steps), the scales and mins quantized to 4 bits against the largest of each, levels
// refitted to the stored scales.
void quantize_q2_k(const float* x, std::uint8_t* y) {
  std::uint8_t levels[kQK];
  float scales[16], mins[16], weights[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, levels + 16 * j, mins[j], -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  std::memset(y, 0, 84);
  constexpr float kLevels = 15.f;
  if (max_scale > 0) {
    const float iscale = kLevels / max_scale;
    for (int j = 0; j < 16; ++j) y[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
    store_u16(reinterpret_cast<std::byte*>(y + 80), f32_to_f16(max_scale / kLevels));
  }
  if (max_min > 0) {
    const float iscale = kLevels / max_min;
    for (int j = 0; j < 16; ++j) y[j] = static_cast<std::uint8_t>(y[j] | (nearest_int(iscale * mins[j]) << 4));
    store_u16(reinterpret_cast<std::byte*>(y + 82), f32_to_f16(max_min / kLevels));
  }
  const float d_all = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(y + 80)));
  const float m_all = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(y + 82)));
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(y[j] & 0xF);
    if (d == 0) continue;
    const float dm = m_all * static_cast<float>(y[j] >> 4);
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] = static_cast<std::uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + i] + dm) / d))));
    }
  }
  for (int e = 0; e < static_cast<int>(kQK); ++e) {
    std::uint8_t& q = y[16 + 32 * (e / 128) + e % 32];
    q = static_cast<std::uint8_t>(q | (levels[e] << (2 * ((e % 128) / 32))));
  }
}

void dequantize_q2_k(const std::uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 80)));
  const float dmin = f16_to_f32(load_u16(reinterpret_cast<const std::byte*>(b + 82)));
  for (int e = 0; e < static_cast<int>(kQK); ++e) {
    const std::uint8_t sc = b[e / 16];
    y[e] = d * static_cast<float>(sc & 0xF) * static_cast<float>(q2_k_level(b, e)) - dmin * static_cast<float>(sc >> 4);
  }
}

// ---- IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: codebook entries per 8 weights -------------------
// The layouts and the decode are ggml_blocks.h's decode_codebook_block, shared with the CPU kernels.

template <WeightType Type>
void dequantize_codebook(const std::uint8_t* b, float* y) {
  constexpr int type = static_cast<int>(Type);
  ggml_blocks::decode_codebook_block(
      type, b, f16_to_f32(static_cast<std::uint16_t>(ggml_blocks::codebook_scale_bits(type, b))), y);
}

// ---- The codebook types' quantizers: IQ3_XXS, IQ3_S and IQ2_S as ggml's quantize_row_iq3_xxs_impl,
// quantize_row_iq3_s_impl and quantize_row_iq2_s_impl run without importance weights (what ggml's reference
// quantizers pass: each weight is then x^2, or 0.25 sigma^2 + x^2 for IQ2_S, sigma^2 twice the super-block's
// mean square); IQ2_XXS and IQ2_XS as ggml's quantize_row_iq2_xxs_impl and quantize_row_iq2_xs_impl, which
// require an importance matrix, run with a uniform one (every importance 1: each weight sqrt(sigma^2 + x^2),
// sigma^2 the super-block's mean square). The searches work on a codebook's points in units of levels l
// (magnitude 2 l + 1); a rounded point off the codebook is replaced by the best of its nearest codebook
// points (those at the few smallest distances, as ggml's iq3xs_init_impl and iq2xs_init_impl list them:
// nearest first, by index among equals).

struct Codebook {
  int group = 0;                                    // weights per entry: 4 (IQ3) or 8 (IQ2)
  int level_bits = 0;                               // bits of each level in a point: 3 (IQ3) or 2 (IQ2)
  int max_level = 0;                                // levels run 0..max_level: 7 (IQ3) or 2 (IQ2)
  std::vector<std::int8_t> magnitudes;              // 2 l + 1 of each entry's weights, entry by entry
  std::vector<int> entry;                           // point (l0 | l1 << level_bits | ...) -> entry, or -1
  std::vector<std::vector<std::uint16_t>> nearest;  // for the points off the codebook

  const std::int8_t* magnitudes_of(int k) const { return magnitudes.data() + static_cast<std::ptrdiff_t>(k) * group; }
  int point_of(const std::int8_t* l) const {
    int point = 0;
    for (int i = 0; i < group; ++i) point |= l[i] << (level_bits * i);
    return point;
  }
};

// `level(k, i)`: the level of weight i of entry k. `distances`: how many of the smallest distances a point
// off the codebook keeps the entries of.
Codebook make_codebook(std::size_t entries, int group, int level_bits, int max_level, int distances,
                       const std::function<int(std::size_t, int)>& level) {
  Codebook b{group, level_bits, max_level, {}, std::vector<int>(std::size_t{1} << (level_bits * group), -1), {}};
  b.nearest.resize(b.entry.size());
  b.magnitudes.resize(entries * static_cast<std::size_t>(group));
  std::vector<std::int8_t> l(static_cast<std::size_t>(group));
  for (std::size_t k = 0; k < entries; ++k) {
    for (int i = 0; i < group; ++i) {
      l[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(level(k, i));
      b.magnitudes[k * static_cast<std::size_t>(group) + static_cast<std::size_t>(i)] =
          static_cast<std::int8_t>(2 * level(k, i) + 1);
    }
    b.entry[static_cast<std::size_t>(b.point_of(l.data()))] = static_cast<int>(k);
  }
  const int mask = (1 << level_bits) - 1;
  std::vector<std::pair<int, int>> by_distance(entries);
  for (std::size_t point = 0; point < b.entry.size(); ++point) {
    if (b.entry[point] >= 0) continue;
    bool reachable = true;  // rounding clamps every level to max_level
    for (int i = 0; i < group; ++i)
      reachable = reachable && static_cast<int>((point >> (level_bits * i)) & mask) <= max_level;
    if (!reachable) continue;
    for (std::size_t k = 0; k < entries; ++k) {
      int d2 = 0;
      for (int i = 0; i < group; ++i) {
        const int diff =
            b.magnitudes_of(static_cast<int>(k))[i] - (2 * static_cast<int>((point >> (level_bits * i)) & mask) + 1);
        d2 += diff * diff;
      }
      by_distance[k] = {d2, static_cast<int>(k)};
    }
    std::sort(by_distance.begin(), by_distance.end());
    int seen = 1;
    for (std::size_t j = 0; j < by_distance.size(); ++j) {
      if (j > 0 && by_distance[j].first > by_distance[j - 1].first && ++seen > distances) break;
      b.nearest[point].push_back(static_cast<std::uint16_t>(by_distance[j].second));
    }
  }
  return b;
}

const Codebook& codebook(WeightType type) {
  // IQ3: bytes 8 l + 4 (62 for l = 7) in IQ3_XXS's grid, 2 l + 1 in IQ3_S's. IQ2: bytes 8, 25, 43 for l = 0..2.
  const auto byte = [](std::uint64_t word, int i) { return static_cast<int>((word >> (8 * i)) & 0xFF); };
  const auto iq2_level = [&](std::span<const std::uint64_t> grid) {
    return [grid, byte](std::size_t k, int i) { return byte(grid[k], i) / 17; };
  };
  static const Codebook iq3_xxs =
      make_codebook(std::size(iq_grids::kIq3XxsGrid), 4, 3, 7, 2,
                    [&](std::size_t k, int i) { return byte(iq_grids::kIq3XxsGrid[k], i) / 8; });
  static const Codebook iq3_s = make_codebook(std::size(iq_grids::kIq3SGrid), 4, 3, 7, 3, [&](std::size_t k, int i) {
    return byte(iq_grids::kIq3SGrid[k], i) / 2;
  });
  static const Codebook iq2_xxs =
      make_codebook(std::size(iq_grids::kIq2XxsGrid), 8, 2, 2, 2, iq2_level(iq_grids::kIq2XxsGrid));
  static const Codebook iq2_xs =
      make_codebook(std::size(iq_grids::kIq2XsGrid), 8, 2, 2, 2, iq2_level(iq_grids::kIq2XsGrid));
  static const Codebook iq2_s =
      make_codebook(std::size(iq_grids::kIq2SGrid), 8, 2, 2, 1, iq2_level(iq_grids::kIq2SGrid));
  // IQ1: signed bytes -1, 0, 1 for l = 0..2.
  static const Codebook iq1_s = make_codebook(std::size(iq_grids::kIq1SGrid), 8, 2, 2, 3, [&](std::size_t k, int i) {
    return static_cast<std::int8_t>(byte(iq_grids::kIq1SGrid[k], i)) + 1;
  });
  switch (type) {
    case WeightType::IQ3_XXS: return iq3_xxs;
    case WeightType::IQ3_S: return iq3_s;
    case WeightType::IQ2_XXS: return iq2_xxs;
    case WeightType::IQ2_S: return iq2_s;
    case WeightType::IQ1_S: return iq1_s;
    default: return iq2_xs;
  }
}

// The nearest entry to a group's magnitudes at `scale` (weighted squared error, the first of equals), its
// levels written to l.
void best_nearby(const Codebook& book, int point, const float* xval, const float* weight, float scale, std::int8_t* l) {
  float best_d2 = std::numeric_limits<float>::max();
  int best = -1;
  for (const std::uint16_t k : book.nearest[static_cast<std::size_t>(point)]) {
    float d2 = 0;
    for (int i = 0; i < book.group; ++i) {
      const float diff = scale * static_cast<float>(book.magnitudes_of(k)[i]) - xval[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = k;
    }
  }
  for (int i = 0; i < book.group; ++i) l[i] = static_cast<std::int8_t>((book.magnitudes_of(best)[i] - 1) / 2);
}

// A group's levels at inverse scale `id`, each rounded from 0.5 (id * magnitude - 1) and clamped to the book's
// range, into l; returns their point.
int round_group(const Codebook& book, const float* xval, float id, std::int8_t* l) {
  for (int i = 0; i < book.group; ++i) {
    l[i] = static_cast<std::int8_t>(std::max(0, std::min(book.max_level, nearest_int(0.5f * (id * xval[i] - 1)))));
  }
  return book.point_of(l);
}

// A group rounded at `id` onto the codebook: its own point when it is an entry (true), else the best nearby
// entry at `scale` (false).
bool group_onto_codebook(const Codebook& book, const float* xval, const float* root, float id, float scale,
                         std::int8_t* l) {
  const int point = round_group(book, xval, id, l);
  if (book.entry[static_cast<std::size_t>(point)] >= 0) return true;
  best_nearby(book, point, xval, root, scale, l);
  return false;
}

// The weighted least-squares fit of n magnitudes xval by 2 l + 1: sum w x q and sum w q^2.
std::pair<float, float> codebook_fit(const float* xval, const float* weight, const std::int8_t* l, int n) {
  float sumqx = 0, sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * l[i] + 1);
    sumqx += weight[i] * xval[i] * q;
    sumq2 += weight[i] * q * q;
  }
  return {sumqx, sumq2};
}

// n weights' magnitudes and signs (bit i of byte k: weight 8 k + i negative). With `even_signs` (7 sign bits
// stored per 8, implying an even count), an odd count flips the sign of the weight whose weight x^2 is least
// (its magnitude made negative, so the fit sees the stored value); only 7 bits are kept.
void split_signs(const float* xb, int n, const float* weight, bool even_signs, float* xval, std::uint32_t* signs) {
  for (int k = 0; k < n / 8; ++k) {
    int flips = 0;
    std::uint32_t bits = 0;
    for (int i = 0; i < 8; ++i) {
      const float v = xb[8 * k + i];
      xval[8 * k + i] = v >= 0 ? v : -v;
      if (v < 0) {
        ++flips;
        bits |= 1u << i;
      }
    }
    if (even_signs && flips % 2 != 0) {
      int least = 0;
      float least_value = weight[8 * k] * xb[8 * k] * xb[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float value = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
        if (value < least_value) {
          least_value = value;
          least = i;
        }
      }
      xval[8 * k + least] = -xval[8 * k + least];
      bits ^= 1u << least;
    }
    signs[k] = even_signs ? bits & 127 : bits;
  }
}

// A block's scale, its groups' entries and signs, or skipped (scale 0) below the type's cut-off.
struct CodebookBlock {
  float scale = 0;
  std::uint32_t signs[4] = {};
  int entries[8] = {};
  bool skipped = false;
};

// ggml's guard (a negative fit cannot be stored): the scale made positive, the signs flipped.
void make_scale_positive(CodebookBlock& block, std::uint32_t sign_mask) {
  if (block.scale >= 0) return;
  block.scale = -block.scale;
  for (auto& bits : block.signs) bits = ~bits & sign_mask;
}

// One IQ3 block of 32 magnitudes `xval` (largest `max`, > 0): the scale of 2 (tries) + 1 stretched grids
// around max / 15, each group rounded onto the codebook, the best weighted fit kept; then, where groups came
// off the codebook, they (IQ3_XXS) or all groups (IQ3_S, as ggml has it) re-rounded at that scale and the
// scale refitted. Writes the 32 levels.
float iq3_search(WeightType type, const float* xval, const float* weight, const float* root, float max,
                 std::int8_t* levels) {
  const Codebook& book = codebook(type);
  const bool xxs = type == WeightType::IQ3_XXS;
  const int tries = xxs ? 15 : 9;
  std::int8_t trial[32];
  bool on_grid[8], trial_on_grid[8];
  std::fill(std::begin(on_grid), std::end(on_grid), xxs);  // ggml's initial flags differ between the two
  std::fill(levels, levels + 32, std::int8_t{0});
  float best = 0;
  float scale = max / 15;
  for (int step = -tries; step <= tries; ++step) {
    const float id = (15 + static_cast<float>(step) * 0.2f) / max;
    for (int k = 0; k < 8; ++k) {
      trial_on_grid[k] = group_onto_codebook(book, xval + 4 * k, root + 4 * k, id, 1 / id, trial + 4 * k);
    }
    const auto [sumqx, sumq2] = codebook_fit(xval, weight, trial, 32);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::copy(std::begin(trial), std::end(trial), levels);
      std::copy(std::begin(trial_on_grid), std::end(trial_on_grid), on_grid);
    }
  }
  if (std::find(std::begin(on_grid), std::end(on_grid), false) != std::end(on_grid) && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < 8; ++k) {
      if (!(xxs && on_grid[k])) group_onto_codebook(book, xval + 4 * k, root + 4 * k, id, scale, levels + 4 * k);
    }
    const auto [sumqx, sumq2] = codebook_fit(xval, weight, levels, 32);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// IQ3's block loop: per block of 32 the signs, the search, the 8 codebook entries and the scale (skipped
// below ggml's cut-off: GROUP_MAX_EPS_IQ3_XXS, exact zero for IQ3_S). Returns the largest scale.
float quantize_iq3(WeightType type, const float* x, CodebookBlock* blocks) {
  const bool xxs = type == WeightType::IQ3_XXS;
  const Codebook& book = codebook(type);
  float max_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float weight[32], root[32], xval[32];
    for (int i = 0; i < 32; ++i) {
      weight[i] = xb[i] * xb[i];
      root[i] = std::sqrt(weight[i]);
    }
    CodebookBlock& out = blocks[ib];
    split_signs(xb, 32, weight, xxs, xval, out.signs);
    const float max = *std::max_element(xval, xval + 32);
    if (xxs ? max < 1e-8f : max == 0) {
      std::fill(std::begin(out.signs), std::end(out.signs), 0u);
      out.skipped = true;
      continue;
    }
    std::int8_t levels[32];
    out.scale = iq3_search(type, xval, weight, root, max, levels);
    make_scale_positive(out, xxs ? 127u : 255u);
    for (int k = 0; k < 8; ++k) out.entries[k] = book.entry[static_cast<std::size_t>(book.point_of(levels + 4 * k))];
    max_scale = std::max(max_scale, out.scale);
  }
  return max_scale;
}

// ggml's make_qp_quants: a fit of n non-negative values by levels 0..nmax under `weight`, the scale from 9
// stretched grids, then levels moved one at a time while that improves the fit (at most 5 rounds).
float make_qp_quants(int n, int nmax, const float* x, const float* weight) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max == 0) return 0;
  std::vector<int> l(static_cast<std::size_t>(n));
  float iscale = static_cast<float>(nmax) / max;
  const float first_scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - first_scale * static_cast<float>(nearest_int(iscale * x[i]));
    best_mse += weight[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - scale_is * static_cast<float>(std::min(nmax, nearest_int(iscale_is * x[i])));
      mse += weight[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    l[static_cast<std::size_t>(i)] = std::min(nmax, nearest_int(iscale * x[i]));
    const float li = static_cast<float>(l[static_cast<std::size_t>(i)]);
    sumlx += weight[i] * x[i] * li;
    suml2 += weight[i] * li * li;
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      int& li = l[static_cast<std::size_t>(i)];
      float slx = sumlx - weight[i] * x[i] * static_cast<float>(li);
      float sl2 = suml2 - weight[i] * static_cast<float>(li) * static_cast<float>(li);
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != li) {
          slx += weight[i] * x[i] * static_cast<float>(new_l);
          sl2 += weight[i] * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            li = new_l;
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return sumlx / suml2;
}

// One IQ2 block of n (32: IQ2_XXS, 16: IQ2_XS and IQ2_S) magnitudes `xval` (largest `max`, > 0), 8 per group.
// IQ2_XXS: 13 stretched grids around make_qp_quants' scale, then every group re-rounded at the best fit's
// scale. IQ2_XS and IQ2_S: 19 grids around max / 5, then the groups that came off the codebook re-rounded. All
// refit the scale after re-rounding. Writes the n levels; nullopt where ggml skips the block (no positive fit).
std::optional<float> iq2_search(WeightType type, int n, const float* xval, const float* weight, const float* root,
                                float max, std::int8_t* levels) {
  const Codebook& book = codebook(type);
  const bool xxs = type == WeightType::IQ2_XXS;
  const int groups = n / 8;
  std::int8_t trial[32];
  bool on_grid[4], trial_on_grid[4];
  std::fill(std::begin(on_grid), std::end(on_grid), true);
  std::fill(levels, levels + n, std::int8_t{0});
  float scale = max / 5;
  float reach = max;  // the magnitude the grids' 5 levels stretch over
  if (xxs) {
    scale = make_qp_quants(n, 4, xval, weight);
    reach = scale * 3;
    if (reach <= 0) return std::nullopt;  // ggml skips the block
  }
  const int tries = xxs ? 6 : 9;
  float best = 0;
  for (int step = -tries; step <= tries; ++step) {
    const float id = (5 + static_cast<float>(step) * 0.1f) / reach;
    for (int k = 0; k < groups; ++k) {
      trial_on_grid[k] = group_onto_codebook(book, xval + 8 * k, root + 8 * k, id, 1 / id, trial + 8 * k);
    }
    const auto [sumqx, sumq2] = codebook_fit(xval, weight, trial, n);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::copy(trial, trial + n, levels);
      std::copy(trial_on_grid, trial_on_grid + groups, on_grid);
    }
  }
  const bool off_grid = std::find(on_grid, on_grid + groups, false) != on_grid + groups;
  if ((xxs || off_grid) && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < groups; ++k) {
      if (xxs || !on_grid[k]) group_onto_codebook(book, xval + 8 * k, root + 8 * k, id, scale, levels + 8 * k);
    }
    const auto [sumqx, sumq2] = codebook_fit(xval, weight, levels, n);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// IQ2's block loop over a super-block: per block of n (32: IQ2_XXS, 16: IQ2_XS and IQ2_S) the weights, signs
// (an even count but for IQ2_S), the search and the entries; a block whose largest magnitude is below ggml's
// cut-off (GROUP_MAX_EPS, IQ2_S's own) is skipped. Zeroes the `bytes` of y and stores the super-scale d = largest scale
// / 31 there; returns d (0: the super-block stays zeros).
float quantize_iq2(WeightType type, const float* x, CodebookBlock* blocks, std::uint8_t* y, std::size_t bytes) {
  const bool s = type == WeightType::IQ2_S;
  const int n = type == WeightType::IQ2_XXS ? 32 : 16;
  const Codebook& book = codebook(type);
  float sumx2 = 0;
  for (int i = 0; i < 256; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = (s ? 2 * sumx2 : sumx2) / 256;
  float max_scale = 0;
  for (int ib = 0; ib < 256 / n; ++ib) {
    const float* xb = x + n * ib;
    float weight[32], root[32], xval[32];
    for (int i = 0; i < n; ++i) {
      // IQ2_S without importance weights, as its reference quantizer; the others with importance 1.
      weight[i] = s ? 0.25f * sigma2 + xb[i] * xb[i] : std::sqrt(sigma2 + xb[i] * xb[i]);
      root[i] = std::sqrt(weight[i]);
    }
    CodebookBlock& out = blocks[ib];
    split_signs(xb, n, weight, !s, xval, out.signs);  // IQ2_S stores all 8 sign bits
    const float max = *std::max_element(xval, xval + n);
    if (max < (s ? 1e-8f : 1e-15f)) {  // GROUP_MAX_EPS_IQ2_S, GROUP_MAX_EPS
      out.skipped = true;
      continue;
    }
    std::int8_t levels[32];
    const auto scale = iq2_search(type, n, xval, weight, root, max, levels);
    if (!scale) {
      out.skipped = true;
      continue;
    }
    out.scale = *scale;
    make_scale_positive(out, s ? 255u : 127u);
    for (int k = 0; k < n / 8; ++k) {
      out.entries[k] = book.entry[static_cast<std::size_t>(book.point_of(levels + 8 * k))];
    }
    max_scale = std::max(max_scale, out.scale);
  }
  std::memset(y, 0, bytes);
  if (max_scale == 0) return 0;
  const float d = max_scale / 31;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(s ? d * 0.9875f : d));  // IQ2_S: ggml's fudge factor
  return d;
}

// The 4-bit code of a block's scale under the super-scale's inverse `id`.
int codebook_block_scale(float id, float scale) {
  return std::max(0, std::min(15, nearest_int(0.5f * (id * scale - 1))));
}

void quantize_iq2_xxs(const float* x, std::uint8_t* y) {
  CodebookBlock blocks[8];
  const float d = quantize_iq2(WeightType::IQ2_XXS, x, blocks, y, 66);
  if (d == 0) return;
  for (int ib = 0; ib < 8; ++ib) {
    std::uint32_t words[2] = {0, static_cast<std::uint32_t>(codebook_block_scale(1 / d, blocks[ib].scale)) << 28};
    if (!blocks[ib].skipped) {
      for (int k = 0; k < 4; ++k) {
        words[0] |= static_cast<std::uint32_t>(blocks[ib].entries[k]) << (8 * k);
        words[1] |= blocks[ib].signs[k] << (7 * k);
      }
    }
    std::memcpy(y + 2 + 8 * ib, words, sizeof words);
  }
}

void quantize_iq2_xs(const float* x, std::uint8_t* y) {
  CodebookBlock blocks[16];
  const float d = quantize_iq2(WeightType::IQ2_XS, x, blocks, y, 74);
  if (d == 0) return;
  for (int ib = 0; ib < 16; ++ib) {
    if (!blocks[ib].skipped) {
      for (int k = 0; k < 2; ++k) {
        const auto entry = static_cast<std::uint16_t>(blocks[ib].entries[k] | (blocks[ib].signs[k] << 9));
        std::memcpy(y + 2 + 4 * ib + 2 * k, &entry, sizeof entry);
      }
    }
    y[66 + ib / 2] =
        static_cast<std::uint8_t>(y[66 + ib / 2] | (codebook_block_scale(1 / d, blocks[ib].scale) << (4 * (ib % 2))));
  }
}

void quantize_iq2_s(const float* x, std::uint8_t* y) {
  CodebookBlock blocks[16];
  const float d = quantize_iq2(WeightType::IQ2_S, x, blocks, y, 82);
  // Each group's index: its low 8 bits at 2 + group, its high 2 at 66 (four per byte); its 8 signs at 34 + group.
  for (int ib = 0; ib < 16; ++ib) {
    if (blocks[ib].skipped) continue;
    for (int k = 0; k < 2; ++k) {
      const int group = 2 * ib + k, entry = blocks[ib].entries[k];
      y[2 + group] = static_cast<std::uint8_t>(entry & 255);
      y[66 + group / 4] = static_cast<std::uint8_t>(y[66 + group / 4] | ((entry >> 8) << (2 * (group % 4))));
      y[34 + group] = static_cast<std::uint8_t>(blocks[ib].signs[k]);
    }
  }
  if (d == 0) return;  // ggml leaves the indices and signs, with d = 0
  for (int ib = 0; ib < 16; ++ib) {
    y[74 + ib / 2] =
        static_cast<std::uint8_t>(y[74 + ib / 2] | (codebook_block_scale(1 / d, blocks[ib].scale) << (4 * (ib % 2))));
  }
}

void quantize_iq3_xxs(const float* x, std::uint8_t* y) {
  std::memset(y, 0, 98);
  CodebookBlock blocks[8];
  const float max_scale = quantize_iq3(WeightType::IQ3_XXS, x, blocks);
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d * 1.0125f));  // ggml's fudge factor
  for (int ib = 0; ib < 8; ++ib) {
    for (int k = 0; k < 8; ++k) y[2 + 8 * ib + k] = static_cast<std::uint8_t>(blocks[ib].entries[k]);
    const auto* signs = blocks[ib].signs;
    const std::uint32_t word = signs[0] | (signs[1] << 7) | (signs[2] << 14) | (signs[3] << 21) |
                               (static_cast<std::uint32_t>(codebook_block_scale(1 / d, blocks[ib].scale)) << 28);
    std::memcpy(y + 66 + 4 * ib, &word, sizeof word);
  }
}

void quantize_iq3_s(const float* x, std::uint8_t* y) {
  std::memset(y, 0, 110);
  CodebookBlock blocks[8];
  const float max_scale = quantize_iq3(WeightType::IQ3_S, x, blocks);
  // ggml advances its index-byte and sign pointers only past blocks it quantized, while the ninth index bits
  // go by the block's own number: after a block of zeros, later blocks' bytes land one block early. Kept, so
  // that files match ggml's byte for byte.
  int slot = 0;
  for (int ib = 0; ib < 8; ++ib) {
    if (blocks[ib].skipped) continue;
    for (int k = 0; k < 8; ++k) {
      const int entry = blocks[ib].entries[k];
      y[2 + 8 * slot + k] = static_cast<std::uint8_t>(entry & 255);
      y[66 + ib] = static_cast<std::uint8_t>(y[66 + ib] | ((entry >> 8) << k));
    }
    for (int k = 0; k < 4; ++k) y[74 + 4 * slot + k] = static_cast<std::uint8_t>(blocks[ib].signs[k]);
    ++slot;
  }
  if (max_scale == 0) return;  // ggml leaves the indices and signs, with d = 0
  const float d = max_scale / 31;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d * 1.033f));  // ggml's fudge factor
  for (int ib = 0; ib < 8; ib += 2) {
    y[106 + ib / 2] = static_cast<std::uint8_t>(codebook_block_scale(1 / d, blocks[ib].scale) |
                                                (codebook_block_scale(1 / d, blocks[ib + 1].scale) << 4));
  }
}

// ---- IQ1_S's and IQ1_M's quantizers: ggml's quantize_row_iq1_s_impl, which requires an importance matrix,
// with a uniform one (each weight sqrt(sigma^2 + x^2), sigma^2 twice the super-block's mean square), and
// quantize_row_iq1_m_impl without importance weights (its path for none: each weight x^2). A block (32 weights,
// IQ1_S; 16, IQ1_M) takes the values {-1, 0, 1} + delta, delta +1/8 or -1/8 for the whole block (IQ1_S) or for
// each group of 8 (IQ1_M): the best split of its sorted values into the three levels is found exactly, then
// each group off the codebook is replaced by its best nearby entry (nearest in value at the block's scale,
// among the entries at the three smallest distances) and the scale refitted. The deltas are a sign pair k: the
// first group's minus for k >= 2, the others' for odd k (IQ1_S: 0 or 3).

const float* iq1_values(int pair, int group) {
  constexpr float kDelta = 0.125f;  // ggml's IQ1S_DELTA and IQ1M_DELTA
  static constexpr float kPlus[3] = {-1 + kDelta, kDelta, 1 + kDelta};
  static constexpr float kMinus[3] = {-1 - kDelta, -kDelta, 1 - kDelta};
  return (group == 0 ? pair >= 2 : pair % 2 == 1) ? kMinus : kPlus;
}

// The entry nearest to a group's x (signed) at `scale` under `weight`, of its point's nearby entries; its levels
// written to l.
int iq1_best_nearby(const Codebook& book, int point, const float* x, const float* weight, float scale,
                    const float* values, std::int8_t* l) {
  float best_d2 = std::numeric_limits<float>::max();
  int best = -1;
  for (const std::uint16_t k : book.nearest[static_cast<std::size_t>(point)]) {
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float diff = scale * values[(book.magnitudes_of(k)[i] - 1) / 2] - x[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = k;
    }
  }
  for (int i = 0; i < 8; ++i) l[i] = static_cast<std::int8_t>((book.magnitudes_of(best)[i] - 1) / 2);
  return best;
}

// The block's values in ascending order (ties in place, as glibc's merge-sorting qsort leaves them).
void iq1_sort(const float* xb, int n, int* order) {
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [&](int a, int b) { return xb[a] < xb[b]; });
}

// The best split of a block's sorted values so far ([0, i1) at level 0, [i1, i2) at 1, the rest at 2, under
// sign pair `pair`) and its fit, by ggml's comparison (the first of equals kept).
struct Iq1Split {
  float best = -std::numeric_limits<float>::min();
  float scale = 0;
  int i1 = -1, i2 = -1, pair = 0;

  void offer(float sumqx, float sumq2, int split_i1, int split_i2, int split_pair) {
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      i1 = split_i1;
      i2 = split_i2;
      pair = split_pair;
    }
  }
};

// A block's best split onto the codebook: a negative fit flips the levels and both deltas, each group off the
// codebook takes its best nearby entry, and the scale is refitted where one did. Writes the groups' entries and
// the split's sign pair; returns the scale.
float iq1_onto_codebook(int n, const float* xb, const float* weight, const int* order, const Iq1Split& split, int& pair,
                        int* entries) {
  const Codebook& book = codebook(WeightType::IQ1_S);  // IQ1_M's too
  std::int8_t l[32];
  for (int j = 0; j < n; ++j) l[order[j]] = static_cast<std::int8_t>(j < split.i1 ? 0 : j < split.i2 ? 1 : 2);
  float scale = split.scale;
  pair = split.pair;
  if (scale < 0) {
    for (int i = 0; i < n; ++i) l[i] = static_cast<std::int8_t>(2 - l[i]);
    scale = -scale;
    pair = 3 - pair;
  }
  bool all_on_grid = true;
  for (int g = 0; g < n / 8; ++g) {
    const int point = book.point_of(l + 8 * g);
    entries[g] = book.entry[static_cast<std::size_t>(point)];
    if (entries[g] < 0) {
      all_on_grid = false;
      entries[g] = iq1_best_nearby(book, point, xb + 8 * g, weight + 8 * g, scale, iq1_values(pair, g), l + 8 * g);
    }
  }
  if (!all_on_grid) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
      const float q = iq1_values(pair, i / 8)[l[i]];
      sumqx += weight[i] * q * xb[i];
      sumq2 += weight[i] * q * q;
    }
    if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

void quantize_iq1_s(const float* x, std::uint8_t* y) {
  std::memset(y, 0, 50);
  float sumx2 = 0;
  for (int i = 0; i < 256; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = 2 * sumx2 / 256;
  float scales[8] = {};
  int pairs[8] = {};  // 0 or 3; a skipped block's stays 0 (+1/8)
  float max_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float weight[32], max = 0;
    for (int i = 0; i < 32; ++i) {
      weight[i] = std::sqrt(sigma2 + xb[i] * xb[i]);  // importance 1
      max = std::max(max, std::fabs(xb[i]));
    }
    if (max < 1e-12f) continue;  // GROUP_MAX_EPS_IQ1_S
    int order[32];
    iq1_sort(xb, 32, order);
    float sumx[33] = {}, sumw[33] = {};  // prefix sums of w x and w in sorted order
    for (int j = 0; j < 32; ++j) {
      sumx[j + 1] = sumx[j] + weight[order[j]] * xb[order[j]];
      sumw[j + 1] = sumw[j] + weight[order[j]];
    }
    Iq1Split split;
    split.scale = max;
    for (int i1 = 0; i1 <= 32; ++i1) {
      for (int i2 = i1; i2 <= 32; ++i2) {
        for (const int pair : {0, 3}) {
          const float* v = iq1_values(pair, 0);
          const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[32] - sumx[i2]) * v[2];
          const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                              (sumw[32] - sumw[i2]) * v[2] * v[2];
          split.offer(sumqx, sumq2, i1, i2, pair);
        }
      }
    }
    int entries[4];
    scales[ib] = iq1_onto_codebook(32, xb, weight, order, split, pairs[ib], entries);
    std::uint16_t high = 0;
    for (int g = 0; g < 4; ++g) {
      y[2 + 4 * ib + g] = static_cast<std::uint8_t>(entries[g] & 255);
      high = static_cast<std::uint16_t>(high | ((entries[g] >> 8) << (3 * g)));
    }
    std::memcpy(y + 34 + 2 * ib, &high, sizeof high);
    max_scale = std::max(max_scale, scales[ib]);
  }
  if (max_scale == 0) return;
  const float d = max_scale / 15;
  store_u16(reinterpret_cast<std::byte*>(y), f32_to_f16(d * 1.125f));  // ggml's fudge factor
  for (int ib = 0; ib < 8; ++ib) {
    const int code = std::max(0, std::min(7, nearest_int(0.5f * (1 / d * scales[ib] - 1)))) | (pairs[ib] ? 8 : 0);
    std::uint16_t high;
    std::memcpy(&high, y + 34 + 2 * ib, sizeof high);
    high = static_cast<std::uint16_t>(high | (code << 12));
    std::memcpy(y + 34 + 2 * ib, &high, sizeof high);
  }
}

// IQ1_M: the split searched under the four sign pairs (sums taken afresh for each, as ggml does), and after
// the block scales are coded the super-scale refitted to the coded values; it is stored (f16) in the top
// nibbles of the four 16-bit scale words.
void quantize_iq1_m(const float* x, std::uint8_t* y) {
  const Codebook& book = codebook(WeightType::IQ1_S);  // IQ1_M shares IQ1_S's codebook
  std::memset(y, 0, 56);
  float scales[16] = {};
  int pairs[16] = {};  // a skipped block's stays 0 (both deltas +1/8)
  float max_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    float weight[16], max = 0;
    for (int i = 0; i < 16; ++i) {
      weight[i] = xb[i] * xb[i];
      max = std::max(max, std::fabs(xb[i]));
    }
    if (max < 1e-7f) continue;  // GROUP_MAX_EPS_IQ1_M
    int order[16];
    iq1_sort(xb, 16, order);
    Iq1Split split;
    split.scale = max;
    for (int i1 = 0; i1 <= 16; ++i1) {
      for (int i2 = i1; i2 <= 16; ++i2) {
        for (int pair = 0; pair < 4; ++pair) {
          float sumqx = 0, sumq2 = 0;
          for (int j = 0; j < 16; ++j) {
            const int i = order[j];
            const float v = iq1_values(pair, i / 8)[j < i1 ? 0 : j < i2 ? 1 : 2];
            sumqx += weight[i] * v * xb[i];
            sumq2 += weight[i] * v * v;
          }
          split.offer(sumqx, sumq2, i1, i2, pair);
        }
      }
    }
    int entries[2];
    scales[ib] = iq1_onto_codebook(16, xb, weight, order, split, pairs[ib], entries);
    y[2 * ib] = static_cast<std::uint8_t>(entries[0] & 255);
    y[2 * ib + 1] = static_cast<std::uint8_t>(entries[1] & 255);
    y[32 + ib] = static_cast<std::uint8_t>((entries[0] >> 8) | ((entries[1] >> 8) << 4));
    max_scale = std::max(max_scale, scales[ib]);
  }
  if (max_scale == 0) return;
  // The block scales coded against d = max / 15, then d refitted to the values as coded.
  std::uint16_t words[4] = {};
  float d = max_scale / 15;
  const float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const int code = std::max(0, std::min(7, nearest_int(0.5f * (id * scales[ib] - 1))));
    words[ib / 4] = static_cast<std::uint16_t>(words[ib / 4] | (code << (3 * (ib % 4))));
    constexpr std::uint8_t kDeltaBits[4] = {0x00, 0x80, 0x08, 0x88};
    y[32 + ib] = static_cast<std::uint8_t>(y[32 + ib] | kDeltaBits[pairs[ib]]);
    const float* xb = x + 16 * ib;
    for (int g = 0; g < 2; ++g) {
      const int entry = y[2 * ib + g] | ((y[32 + ib] >> (4 * g)) & 7) << 8;
      const float* values = iq1_values(pairs[ib], g);
      for (int i = 0; i < 8; ++i) {
        const float w = xb[8 * g + i] * xb[8 * g + i];
        const float q = values[(book.magnitudes_of(entry)[i] - 1) / 2] * static_cast<float>(2 * code + 1);
        sumqx += w * q * xb[8 * g + i];
        sumq2 += w * q * q;
      }
    }
  }
  if (sumq2 > 0) d = sumqx / sumq2;
  const std::uint16_t half = f32_to_f16(d * 1.1125f);  // ggml's fudge factor
  for (int w = 0; w < 4; ++w) words[w] = static_cast<std::uint16_t>(words[w] | (((half >> (4 * w)) & 0xF) << 12));
  std::memcpy(y + 48, words, sizeof words);
}

using BlockQuantizer = void (*)(const float*, std::uint8_t*);
using BlockDequantizer = void (*)(const std::uint8_t*, float*);

BlockQuantizer block_quantizer(WeightType type) {
  switch (type) {
    case WeightType::Q8_0: return quantize_q8_0;
    case WeightType::Q4_0: return quantize_q4_0;
    case WeightType::Q4_K: return quantize_q4_k;
    case WeightType::Q5_K: return quantize_q5_k;
    case WeightType::Q6_K: return quantize_q6_k;
    case WeightType::Q4_1: return quantize_q4_1;
    case WeightType::Q5_0: return quantize_q5_0;
    case WeightType::Q5_1: return quantize_q5_1;
    case WeightType::Q3_K: return quantize_q3_k;
    case WeightType::IQ4_NL: return quantize_iq4_nl;
    case WeightType::IQ4_XS: return quantize_iq4_xs;
    case WeightType::Q2_K: return quantize_q2_k;
    case WeightType::IQ3_XXS: return quantize_iq3_xxs;
    case WeightType::IQ3_S: return quantize_iq3_s;
    case WeightType::IQ2_XXS: return quantize_iq2_xxs;
    case WeightType::IQ2_XS: return quantize_iq2_xs;
    case WeightType::IQ2_S: return quantize_iq2_s;
    case WeightType::IQ1_S: return quantize_iq1_s;
    case WeightType::IQ1_M: return quantize_iq1_m;
    case WeightType::MXFP4: return quantize_mxfp4;
    default: return nullptr;
  }
}

BlockDequantizer block_dequantizer(WeightType type) {
  switch (type) {
    case WeightType::Q8_0: return dequantize_q8_0;
    case WeightType::Q4_0: return dequantize_q4_0;
    case WeightType::Q4_K: return dequantize_q4_k;
    case WeightType::Q5_K: return dequantize_q5_k;
    case WeightType::Q6_K: return dequantize_q6_k;
    case WeightType::Q4_1: return dequantize_q4_1;
    case WeightType::Q5_0: return dequantize_q5_0;
    case WeightType::Q5_1: return dequantize_q5_1;
    case WeightType::Q3_K: return dequantize_q3_k;
    case WeightType::IQ4_NL: return dequantize_iq4_nl;
    case WeightType::IQ4_XS: return dequantize_iq4_xs;
    case WeightType::Q2_K: return dequantize_q2_k;
    case WeightType::IQ2_XXS: return dequantize_codebook<WeightType::IQ2_XXS>;
    case WeightType::IQ2_XS: return dequantize_codebook<WeightType::IQ2_XS>;
    case WeightType::IQ2_S: return dequantize_codebook<WeightType::IQ2_S>;
    case WeightType::IQ3_XXS: return dequantize_codebook<WeightType::IQ3_XXS>;
    case WeightType::IQ3_S: return dequantize_codebook<WeightType::IQ3_S>;
    case WeightType::IQ1_S: return dequantize_codebook<WeightType::IQ1_S>;
    case WeightType::IQ1_M: return dequantize_codebook<WeightType::IQ1_M>;
    case WeightType::MXFP4: return dequantize_mxfp4;
    default: return nullptr;
  }
}

// Validates element and byte counts of a row conversion; returns the number of blocks.
std::size_t checked_blocks(const TypeFacts& f, std::size_t elements, std::size_t bytes, const char* what) {
  if (elements % f.block_elements != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(elements) + " elements of " +
                                std::string(f.name) + " are not a whole number of " + std::to_string(f.block_elements) +
                                "-element blocks");
  }
  const std::size_t blocks = elements / f.block_elements;
  if (bytes != blocks * f.block_bytes) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(elements) + " elements of " +
                                std::string(f.name) + " take " + std::to_string(blocks * f.block_bytes) +
                                " bytes, the buffer has " + std::to_string(bytes));
  }
  return blocks;
}

}  // namespace

std::string_view weight_type_name(WeightType type) {
  return facts(type).name;
}

std::optional<WeightType> weight_type_from_name(std::string_view name) {
  for (const auto& f : all_facts()) {
    if (f.name == name) return f.type;
  }
  return std::nullopt;
}

namespace {

template <class Keep>
std::string names_of(Keep keep) {
  std::string names;
  for (const auto& f : all_facts()) {
    if (!keep(f.type)) continue;
    if (!names.empty()) names += ", ";
    names += f.name;
  }
  return names;
}

}  // namespace

std::string weight_type_names() {
  return names_of([](WeightType) { return true; });
}

std::optional<std::uint32_t> ggml_type_id(WeightType type) {
  return facts(type).ggml_id;
}

std::optional<WeightType> weight_type_from_ggml(std::uint32_t ggml_id) {
  for (const auto& f : all_facts()) {
    if (f.ggml_id == ggml_id) return f.type;
  }
  return std::nullopt;
}

std::size_t block_elements(WeightType type) {
  return facts(type).block_elements;
}
std::size_t block_bytes(WeightType type) {
  return facts(type).block_bytes;
}

std::optional<std::size_t> row_bytes(WeightType type, std::size_t cols) {
  const auto& f = facts(type);
  if (cols % f.block_elements != 0) return std::nullopt;
  return cols / f.block_elements * f.block_bytes;
}

bool has_quantizer(WeightType type) {
  return facts(type).block_elements == 1 || block_quantizer(type) != nullptr;
}

void quantize_row(WeightType type, std::span<const float> src, std::span<std::byte> dst) {
  const auto& f = facts(type);
  const std::size_t blocks = checked_blocks(f, src.size(), dst.size(), "quantize_row");
  switch (type) {
    case WeightType::F32: std::memcpy(dst.data(), src.data(), src.size_bytes()); return;
    case WeightType::F16:
      for (std::size_t i = 0; i < blocks; ++i) store_u16(dst.data() + 2 * i, f32_to_f16(src[i]));
      return;
    case WeightType::BF16:
      for (std::size_t i = 0; i < blocks; ++i) store_u16(dst.data() + 2 * i, f32_to_bf16(src[i]));
      return;
    case WeightType::F8_E4M3:
      for (std::size_t i = 0; i < blocks; ++i) dst[i] = static_cast<std::byte>(f32_to_e4m3(src[i]));
      return;
    default: break;
  }
  const BlockQuantizer quantize = block_quantizer(type);
  if (quantize == nullptr) {
    throw std::invalid_argument("quantize_row: the engine has no quantizer for " + std::string(f.name) +
                                " (it reads such weights from GGUF files)");
  }
  for (std::size_t i = 0; i < blocks; ++i) {
    quantize(src.data() + i * f.block_elements, as_u8(dst.data() + i * f.block_bytes));
  }
}

void dequantize_row(WeightType type, std::span<const std::byte> src, std::span<float> dst) {
  const auto& f = facts(type);
  const std::size_t blocks = checked_blocks(f, dst.size(), src.size(), "dequantize_row");
  switch (type) {
    case WeightType::F32: std::memcpy(dst.data(), src.data(), src.size()); return;
    case WeightType::F16:
      for (std::size_t i = 0; i < blocks; ++i) dst[i] = f16_to_f32(load_u16(src.data() + 2 * i));
      return;
    case WeightType::BF16:
      for (std::size_t i = 0; i < blocks; ++i) dst[i] = bf16_to_f32(load_u16(src.data() + 2 * i));
      return;
    case WeightType::F8_E4M3:
      for (std::size_t i = 0; i < blocks; ++i) dst[i] = e4m3_to_f32(std::to_integer<std::uint8_t>(src[i]));
      return;
    default: break;
  }
  const BlockDequantizer dequantize = block_dequantizer(type);
  for (std::size_t i = 0; i < blocks; ++i) {
    dequantize(as_u8(src.data() + i * f.block_bytes), dst.data() + i * f.block_elements);
  }
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  std::uint32_t out = 0;
  if (exponent == 0x1F) {
    out = sign | 0x7F800000u | (mantissa << 13);  // inf, or NaN with its payload
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // Subnormal half: normalise; the value is mantissa * 2^-24, exact in f32.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    out = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((mantissa & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t f32_to_f16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {
    // NaN: keep the top payload bits and set the quiet bit, as F16C's vcvtps2ph does.
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504: inf
  if (abs >= 0x38800000u) {
    // Normal half: drop 13 mantissa bits, rounding to nearest even (a carry may bump the exponent).
    const std::uint32_t rebased = abs - (112u << 23);
    const std::uint32_t rounded = rebased + 0x0FFFu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal half: value / 2^-24 rounded to nearest even, from the full 24-bit significand.
  const std::uint32_t exponent = abs >> 23;
  const std::uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14..24 for exponents 102..112
  const std::uint32_t half_ulp = 1u << (shift - 1);
  const std::uint32_t remainder = significand & ((1u << shift) - 1);
  std::uint32_t result = significand >> shift;
  if (remainder > half_ulp || (remainder == half_ulp && (result & 1u) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t f32_to_bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN stays NaN (quiet), sign kept
  }
  // Round to nearest even on the dropped 16 bits; overflow carries into inf as it should.
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float e4m3_to_f32(std::uint8_t bits) {
  return ggml_blocks::e4m3_to_float(bits);
}

std::uint8_t f32_to_e4m3(float value) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return sign | 0x7F;
  const float magnitude = std::min(std::fabs(value), 448.0f);
  // Below 2^-6 the codes are subnormal, multiples of 2^-9 (code 8, 2^-6, is the first normal one).
  if (magnitude < 0x1p-6f) return sign | static_cast<std::uint8_t>(nearest_int(magnitude * 512.0f));
  // Otherwise 2^e (1 + m / 8): the mantissa rounded to 3 bits (ties to even), carrying into the exponent at 16.
  int e = 0;
  std::frexp(magnitude, &e);  // magnitude = f 2^e with f in [0.5, 1)
  e -= 1;
  int q = nearest_int(std::ldexp(magnitude, 3 - e));  // in [8, 16]
  if (q == 16) {
    q = 8;
    ++e;
  }
  return sign | static_cast<std::uint8_t>(((e + 7) << 3) | (q - 8));
}

std::size_t block_scales_count(const BlockScales& scales, std::size_t rows, std::size_t cols) {
  return (rows + scales.block_rows - 1) / scales.block_rows * scales.blocks_per_row(cols);
}

std::optional<std::string> block_scales_mismatch(const BlockScales& scales, std::size_t rows, std::size_t cols) {
  if (scales.block_rows == 0 || scales.block_cols == 0) return "blocks of 0 rows or columns";
  const std::size_t expected = block_scales_count(scales, rows, cols);
  if (scales.values.size() != expected) {
    return std::to_string(scales.values.size()) + " scales where blocks of " + std::to_string(scales.block_rows) +
           " x " + std::to_string(scales.block_cols) + " of a " + std::to_string(rows) + " x " + std::to_string(cols) +
           " matrix need " + std::to_string(expected);
  }
  return std::nullopt;
}

}  // namespace engine::quant
