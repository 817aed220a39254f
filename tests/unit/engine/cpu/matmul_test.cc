#include "engine/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"
#include "tests/support/weight_blocks.h"

namespace engine::cpu {
namespace {

using quant::WeightType;

using testing_support::kAllTypes;

// ---- matmul ------------------------------------------------------------------------------------------

struct Matrix {
  WeightType type;
  std::size_t rows, cols;
  std::vector<std::byte> bytes;
  std::vector<float> dequantized;  // rows x cols, from quant::dequantize_row

  WeightMatrix view() const { return WeightMatrix{type, bytes.data(), rows, cols}; }
};

Matrix make_matrix(WeightType type, std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix m{type, rows, cols, {}, {}};
  const std::size_t row_bytes = *quant::row_bytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  m.dequantized.resize(rows * cols);
  std::vector<float> src(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    // Rows of different scales and signs of offset, so K-quant mins and scales vary.
    const float scale = 0.05f * static_cast<float>(1 + r % 5);
    const float offset = (r % 3 == 0) ? 0.02f : 0.0f;
    for (auto& v : src) v = dist(rng) * scale + offset;
    const std::span<std::byte> row(m.bytes.data() + r * row_bytes, row_bytes);
    const auto blocks = testing_support::blocks_for(type, src, seed + static_cast<std::uint32_t>(r));
    std::copy(blocks.begin(), blocks.end(), row.begin());
    quant::dequantize_row(type, row, std::span<float>(m.dequantized.data() + r * cols, cols));
  }
  return m;
}

std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// Compares out against a double-precision product of the dequantized weights, within `relative` of the sum
// of the products' magnitudes.
void expect_close_to(const Matrix& m, const std::vector<float>& x, std::size_t tokens, const std::vector<float>& out,
                     const float* bias, double relative, const std::string& what) {
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t n = 0; n < m.rows; ++n) {
      double dot = 0, magnitude = 0;
      for (std::size_t k = 0; k < m.cols; ++k) {
        const double p = static_cast<double>(m.dequantized[n * m.cols + k]) * x[t * m.cols + k];
        dot += p;
        magnitude += std::fabs(p);
      }
      if (bias != nullptr) {
        dot += bias[n];
        magnitude += std::fabs(bias[n]);
      }
      const float got = out[t * m.rows + n];
      ASSERT_TRUE(std::isfinite(got)) << what << " token " << t << " row " << n;
      ASSERT_NEAR(got, dot, relative * magnitude + 1e-30) << what << " token " << t << " row " << n;
    }
  }
}

// One block of 32 activations quantized as the int8 levels define it (docs/cpu-kernels.md): d = max|x| / 32512,
// q = x * (32512 / max|x|) rounded to nearest even (two bytes per value: 32512 = 127 * 256).
constexpr float kActivationSteps = 32512.0f;

struct QuantizedBlock {
  float d = 0;
  int q[32] = {};
};

QuantizedBlock quantize_block(const float* x) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  QuantizedBlock block;
  block.d = amax / kActivationSteps;
  const float inverse = amax > 0 ? kActivationSteps / amax : 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float scaled = x[i] * inverse;
    block.q[i] = static_cast<int>(std::nearbyint(scaled));
  }
  return block;
}

// 32 weights of a quantized row as integers and multipliers, in ggml's layout: weight i is
// scale[i / 16] * q[i] - min (the scales are ggml's f32 products d * sub-block scale).
struct WeightBlock {
  int q[32] = {};
  float scale[2] = {};
  float min = 0;
  float half_min[2] = {};  // Q2_K: a min per 16 weights instead
};

std::uint16_t read_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Block of 32 number `k` of a row of `type`.
WeightBlock weight_block(WeightType type, const std::byte* row, std::size_t k) {
  WeightBlock w;
  const auto* base = reinterpret_cast<const std::uint8_t*>(row);
  if (type == WeightType::Q8_0 || type == WeightType::Q4_0) {
    const std::uint8_t* b = base + k * quant::block_bytes(type);
    w.scale[0] = w.scale[1] = quant::f16_to_f32(read_u16(b));
    for (int i = 0; i < 32; ++i) {
      w.q[i] = type == WeightType::Q8_0 ? static_cast<std::int8_t>(b[2 + i])
                                        : (i < 16 ? b[2 + i] & 0xF : b[2 + i - 16] >> 4) - 8;
    }
    return w;
  }
  if (type == WeightType::Q4_1 || type == WeightType::Q5_0 || type == WeightType::Q5_1) {
    // { d; [m;] [qh;] qs } with qh's bit i element i's fifth bit: weight d q + m (min -m), or d (q - 16).
    const std::uint8_t* b = base + k * quant::block_bytes(type);
    const bool with_min = type != WeightType::Q5_0, five_bit = type != WeightType::Q4_1;
    w.scale[0] = w.scale[1] = quant::f16_to_f32(read_u16(b));
    if (with_min) w.min = -quant::f16_to_f32(read_u16(b + 2));
    const std::uint8_t* qh = b + (with_min ? 4 : 2);
    const std::uint8_t* qs = qh + (five_bit ? 4 : 0);
    std::uint32_t high = 0;
    if (five_bit) std::memcpy(&high, qh, 4);
    for (int i = 0; i < 32; ++i) {
      w.q[i] = (i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4) | static_cast<int>(((high >> i) & 1) << 4);
      if (type == WeightType::Q5_0) w.q[i] -= 16;
    }
    return w;
  }
  // IQ4_NL, IQ4_XS: nibbles index the 16 levels, with d, or d (s - 32) per block of 32.
  constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  if (type == WeightType::IQ4_NL || type == WeightType::IQ4_XS) {
    const bool xs = type == WeightType::IQ4_XS;
    const std::uint8_t* b = base + (xs ? k / 8 : k) * quant::block_bytes(type);
    const int ib = static_cast<int>(k % 8);
    float d = quant::f16_to_f32(read_u16(b));
    if (xs) {
      const int s = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((read_u16(b + 2) >> (2 * ib)) & 3) << 4);
      d *= static_cast<float>(s - 32);
    }
    const std::uint8_t* qs = xs ? b + 8 + 16 * ib : b + 2;
    w.scale[0] = w.scale[1] = d;
    for (int i = 0; i < 32; ++i) w.q[i] = kLevels[i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4];
    return w;
  }
  // MXFP4: nibbles index the doubled FP4 E2M1 levels, at 2^(e - 128) from the block's exponent byte.
  if (type == WeightType::MXFP4) {
    constexpr int kFp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const std::uint8_t* b = base + k * quant::block_bytes(type);
    w.scale[0] = w.scale[1] = std::ldexp(1.0f, b[0] - 128);
    for (int i = 0; i < 32; ++i) w.q[i] = kFp4Levels[i < 16 ? b[1 + i] & 0xF : b[1 + i - 16] >> 4];
    return w;
  }
  const std::uint8_t* b = base + k / 8 * quant::block_bytes(type);
  const int j = static_cast<int>(k % 8);  // the block of 32 within the block of 256
  if (type == WeightType::Q2_K) {
    // Element 32 j + i: two bits at bits 2 (j % 4) of qs[32 (j / 4) + i]; per 16 elements byte s holds the
    // 4-bit scale (low) and min (high), times d and dmin.
    const float d = quant::f16_to_f32(read_u16(b + 80)), dmin = quant::f16_to_f32(read_u16(b + 82));
    for (int half = 0; half < 2; ++half) {
      const int s = b[2 * j + half];
      w.scale[half] = d * static_cast<float>(s & 0xF);
      w.half_min[half] = dmin * static_cast<float>(s >> 4);
    }
    for (int i = 0; i < 32; ++i) w.q[i] = (b[16 + 32 * (j / 4) + i] >> (2 * (j % 4))) & 3;
    return w;
  }
  if (type == WeightType::Q3_K) {
    // Element 32 j + i: low bits at bits 2 (j % 4) of qs[32 (j / 4) + i], third bit at bit j of hmask[i];
    // 6-bit scales (s - 32) per 16 elements, packed low nibbles in bytes 0-15 then top pairs in 8-11.
    const float d = quant::f16_to_f32(read_u16(b + 108));
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * j + half;
      const int low = s < 8 ? b[96 + s] & 0xF : b[96 + s - 8] >> 4;
      const int high = (b[96 + 8 + s % 4] >> (2 * (s / 4))) & 3;
      w.scale[half] = d * static_cast<float>((low | (high << 4)) - 32);
    }
    for (int i = 0; i < 32; ++i) {
      const int low = (b[32 + 32 * (j / 4) + i] >> (2 * (j % 4))) & 3;
      w.q[i] = low + 4 * ((b[i] >> j) & 1) - 4;
    }
    return w;
  }
  if (type == WeightType::Q6_K) {
    const int h = j / 4, part = j % 4;
    const float d = quant::f16_to_f32(read_u16(b + 208));
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    w.scale[0] = d * static_cast<float>(scales[2 * j]);
    w.scale[1] = d * static_cast<float>(scales[2 * j + 1]);
    for (int i = 0; i < 32; ++i) {
      const std::uint8_t low = b[64 * h + 32 * (part % 2) + i];
      const int nibble = part < 2 ? low & 0xF : low >> 4;
      w.q[i] = (nibble | ((b[128 + 32 * h + i] >> (2 * part)) & 3) << 4) - 32;
    }
    return w;
  }
  // Q4_K, Q5_K: 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
  const std::uint8_t* packed = b + 4;
  const int sc = j < 4 ? packed[j] & 63 : (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
  const int mn = j < 4 ? packed[j + 4] & 63 : (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  w.scale[0] = w.scale[1] = quant::f16_to_f32(read_u16(b)) * static_cast<float>(sc);
  w.min = quant::f16_to_f32(read_u16(b + 2)) * static_cast<float>(mn);
  const std::uint8_t* nibbles = b + (type == WeightType::Q4_K ? 16 : 48) + 32 * (j / 2);
  for (int i = 0; i < 32; ++i) {
    w.q[i] = j % 2 == 0 ? nibbles[i] & 0xF : nibbles[i] >> 4;
    if (type == WeightType::Q5_K) w.q[i] |= ((b[16 + i] >> j) & 1) << 4;
  }
  return w;
}

// What an int8 level must compute, bit for bit (docs/cpu-kernels.md): per block of 32, the exact integer dot
// product times scale * d_x (an f32 product), by fma, less min * (d_x * sum q) by fma (Q4_K, Q5_K), Q6_K's
// two halves one after the other; in block order from 0, then + bias. Also checks that the weight
// integers read here are the dequantized weights.
std::vector<float> int8_expected(const Matrix& m, const std::vector<float>& x, std::size_t tokens, const float* bias) {
  const std::size_t blocks = m.cols / 32, row_bytes = *quant::row_bytes(m.type, m.cols);
  const bool halves = m.type == WeightType::Q6_K || m.type == WeightType::Q3_K || m.type == WeightType::Q2_K;
  const bool has_min = m.type == WeightType::Q4_K || m.type == WeightType::Q5_K || m.type == WeightType::Q4_1 ||
                       m.type == WeightType::Q5_1;
  std::vector<float> out(tokens * m.rows);
  for (std::size_t n = 0; n < m.rows; ++n) {
    std::vector<WeightBlock> row(blocks);
    for (std::size_t b = 0; b < blocks; ++b) {
      row[b] = weight_block(m.type, m.bytes.data() + n * row_bytes, b);
      for (int i = 0; i < 32; ++i) {
        const float min = m.type == WeightType::Q2_K ? row[b].half_min[i / 16] : row[b].min;
        const float value = row[b].scale[i / 16] * static_cast<float>(row[b].q[i]) - min;
        EXPECT_EQ(value, m.dequantized[n * m.cols + 32 * b + static_cast<std::size_t>(i)]) << "row " << n;
      }
    }
    for (std::size_t t = 0; t < tokens; ++t) {
      float acc = 0;
      for (std::size_t b = 0; b < blocks; ++b) {
        const QuantizedBlock xb = quantize_block(x.data() + t * m.cols + 32 * b);
        const WeightBlock& wb = row[b];
        std::int32_t dot[2] = {0, 0}, sum = 0, half_sum[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
          dot[i / 16] += wb.q[i] * xb.q[i];
          sum += xb.q[i];
          half_sum[i / 16] += xb.q[i];
        }
        if (halves) {
          acc = std::fma(static_cast<float>(dot[0]), wb.scale[0] * xb.d, acc);
          acc = std::fma(static_cast<float>(dot[1]), wb.scale[1] * xb.d, acc);
          if (m.type == WeightType::Q2_K) {
            acc = std::fma(-wb.half_min[0], xb.d * static_cast<float>(half_sum[0]), acc);
            acc = std::fma(-wb.half_min[1], xb.d * static_cast<float>(half_sum[1]), acc);
          }
        } else {
          acc = std::fma(static_cast<float>(dot[0] + dot[1]), wb.scale[0] * xb.d, acc);
          if (has_min) acc = std::fma(-wb.min, xb.d * static_cast<float>(sum), acc);
        }
      }
      out[t * m.rows + n] = bias != nullptr ? acc + bias[n] : acc;
    }
  }
  return out;
}

// The error quantizing the activations allows against the exact product: each activation is within d / 2
// of d q, so a (row, token) result is within sum over blocks of d_b / 2 * sum |w| (slightly widened for
// the rounding of d itself), plus f32 rounding of the products' magnitudes.
void expect_within_quantization_error(const Matrix& m, const std::vector<float>& x, std::size_t tokens,
                                      const std::vector<float>& out, const float* bias, const std::string& what) {
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t n = 0; n < m.rows; ++n) {
      double dot = bias != nullptr ? bias[n] : 0.0, magnitude = bias != nullptr ? std::fabs(bias[n]) : 0.0;
      double allowed = 0;
      for (std::size_t b = 0; b < m.cols / 32; ++b) {
        double amax = 0, weights = 0;
        for (std::size_t k = 32 * b; k < 32 * b + 32; ++k) {
          const double w = m.dequantized[n * m.cols + k], xv = x[t * m.cols + k];
          dot += w * xv;
          magnitude += std::fabs(w * xv);
          amax = std::max(amax, std::fabs(xv));
          weights += std::fabs(w);
        }
        allowed += amax / kActivationSteps / 2.0 * (1.0 + 1e-6) * weights;
      }
      ASSERT_NEAR(out[t * m.rows + n], dot, allowed + 1e-5 * magnitude + 1e-30)
          << what << " token " << t << " row " << n;
    }
  }
}

// The double-precision reference at float rounding (1e-5), BF16 at avx512bf16 included; int8 levels bit for
// bit against their model of the numerics and within their quantization error.
void expect_close_to_reference(std::string_view level, const Matrix& m, const std::vector<float>& x, std::size_t tokens,
                               const std::vector<float>& out, const float* bias, const std::string& what) {
  if (quantizes_activations(level, m.type)) {
    const auto expected = int8_expected(m, x, tokens, bias);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(expected[i]))
          << what << " (int8 activations) token " << i / m.rows << " row " << i % m.rows << ": " << out[i] << " vs "
          << expected[i];
    }
    expect_within_quantization_error(m, x, tokens, out, bias, what + " (int8 activations)");
  } else {
    expect_close_to(m, x, tokens, out, bias, 1e-5, what);
  }
}

std::vector<std::size_t> test_cols(WeightType type) {
  if (quant::block_elements(type) == 256) return {256, 512, 768};
  if (quant::block_elements(type) == 32) return {32, 96, 160, 512};
  return {1, 7, 16, 33, 100, 515};  // partial vector groups at every SIMD width
}

std::string describe(std::string_view level, WeightType type, std::size_t rows, std::size_t cols, std::size_t tokens) {
  return std::string(level) + " " + std::string(quant::weight_type_name(type)) + " " + std::to_string(rows) + "x" +
         std::to_string(cols) + " tokens " + std::to_string(tokens);
}

// Every token count 1..17 and some on either side of where the few-token path (gemv_batch) hands over to
// the tiled one (gemm): 6 to 48 tokens, by level and type.
std::vector<std::size_t> batch_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t t = 1; t <= 17; ++t) sizes.push_back(t);
  for (const std::size_t t : {24, 47, 48, 49}) sizes.push_back(t);
  return sizes;
}

class MatmulLevels : public ::testing::TestWithParam<std::string_view> {};

TEST_P(MatmulLevels, MatchesDoublePrecisionReference) {
  const std::string_view level = GetParam();
  ThreadPool pool(3);
  std::uint32_t seed = 100;
  for (const WeightType type : kAllTypes) {
    for (const std::size_t cols : test_cols(type)) {
      for (const std::size_t rows : {1, 3, 4, 13}) {
        const Matrix m = make_matrix(type, rows, cols, ++seed);
        const auto bias = random_vector(rows, ++seed);
        for (const std::size_t tokens : batch_sizes()) {
          const auto x = random_vector(tokens * cols, ++seed);
          for (const bool with_bias : {false, true}) {
            auto out = poisoned(tokens * rows);
            const float* b = with_bias ? bias.data() : nullptr;
            matmul_at_level(level, pool, m.view(), x.data(), tokens, out.data(), b);
            expect_close_to_reference(level, m, x, tokens, out, b,
                                      describe(level, type, rows, cols, tokens) + (with_bias ? " bias" : ""));
          }
        }
      }
    }
  }
}

// A token's result is the same bit for bit alone, inside any batch, and with any number of threads.
TEST_P(MatmulLevels, TokenResultsDoNotDependOnTheBatch) {
  const std::string_view level = GetParam();
  ThreadPool pool1(1), pool3(3);
  std::uint32_t seed = 500;
  for (const WeightType type : kAllTypes) {
    for (const std::size_t cols : test_cols(type)) {
      const std::size_t rows = 11;
      const Matrix m = make_matrix(type, rows, cols, ++seed);
      const auto bias = random_vector(rows, ++seed);
      const std::size_t tokens = 17;
      const auto x = random_vector(tokens * cols, ++seed);
      auto batched = poisoned(tokens * rows);
      matmul_at_level(level, pool3, m.view(), x.data(), tokens, batched.data(), bias.data());
      auto single_threaded = poisoned(tokens * rows);
      matmul_at_level(level, pool1, m.view(), x.data(), tokens, single_threaded.data(), bias.data());
      EXPECT_EQ(std::memcmp(batched.data(), single_threaded.data(), batched.size() * sizeof(float)), 0)
          << describe(level, type, rows, cols, tokens);
      for (std::size_t t = 0; t < tokens; ++t) {
        auto alone = poisoned(rows);
        matmul_at_level(level, pool3, m.view(), x.data() + t * cols, 1, alone.data(), bias.data());
        for (std::size_t n = 0; n < rows; ++n) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(alone[n]), std::bit_cast<std::uint32_t>(batched[t * rows + n]))
              << describe(level, type, rows, cols, tokens) << " token " << t << " row " << n;
        }
        // Also inside a batch of a different size, starting at this token.
        const std::size_t sub = std::min<std::size_t>(3, tokens - t);
        auto partial = poisoned(sub * rows);
        matmul_at_level(level, pool3, m.view(), x.data() + t * cols, sub, partial.data(), bias.data());
        EXPECT_EQ(std::memcmp(partial.data(), batched.data() + t * rows, partial.size() * sizeof(float)), 0)
            << describe(level, type, rows, cols, sub) << " from token " << t;
      }
    }
  }
}

// Every batch size, both paths, odd row counts (a partial row tile) and bias: each (row, token) result is
// the single-token result bit for bit.
TEST_P(MatmulLevels, EveryBatchSizeMatchesSingleTokens) {
  const std::string_view level = GetParam();
  ThreadPool pool(2);
  std::uint32_t seed = 600;
  const std::size_t max_tokens = batch_sizes().back();
  for (const WeightType type : kAllTypes) {
    for (const std::size_t cols : test_cols(type)) {
      for (const std::size_t rows : {5, 7, 12}) {
        const Matrix m = make_matrix(type, rows, cols, ++seed);
        const auto bias = random_vector(rows, ++seed);
        const auto x = random_vector(max_tokens * cols, ++seed);
        for (const bool with_bias : {false, true}) {
          const float* b = with_bias ? bias.data() : nullptr;
          auto alone = poisoned(max_tokens * rows);
          for (std::size_t t = 0; t < max_tokens; ++t) {
            matmul_at_level(level, pool, m.view(), x.data() + t * cols, 1, alone.data() + t * rows, b);
          }
          for (const std::size_t tokens : batch_sizes()) {
            auto batched = poisoned(tokens * rows);
            matmul_at_level(level, pool, m.view(), x.data(), tokens, batched.data(), b);
            for (std::size_t i = 0; i < tokens * rows; ++i) {
              ASSERT_EQ(std::bit_cast<std::uint32_t>(alone[i]), std::bit_cast<std::uint32_t>(batched[i]))
                  << describe(level, type, rows, cols, tokens) << (with_bias ? " bias" : "") << " token " << i / rows
                  << " row " << i % rows;
            }
          }
        }
      }
    }
  }
}

// A batch of `tokens` random tokens through `m` gives, row for row, the bits each token gives alone.
void expect_batched_matches_single_tokens(std::string_view level, ThreadPool& pool, WeightType type, const Matrix& m,
                                          std::size_t tokens, std::uint32_t seed) {
  const auto x = random_vector(tokens * m.cols, seed);
  auto batched = poisoned(tokens * m.rows);
  matmul_at_level(level, pool, m.view(), x.data(), tokens, batched.data());
  for (std::size_t t = 0; t < tokens; ++t) {
    auto alone = poisoned(m.rows);
    matmul_at_level(level, pool, m.view(), x.data() + t * m.cols, 1, alone.data());
    ASSERT_EQ(std::memcmp(alone.data(), batched.data() + t * m.rows, m.rows * sizeof(float)), 0)
        << describe(level, type, m.rows, m.cols, tokens) << " token " << t;
  }
}

// Wide rows and enough tokens that the batched path works through several token blocks.
TEST_P(MatmulLevels, LongBatchesMatchSingleTokens) {
  const std::string_view level = GetParam();
  ThreadPool pool(2);
  std::uint32_t seed = 700;
  for (const WeightType type : kAllTypes) {
    const Matrix m = make_matrix(type, 9, 3072, ++seed);
    // past the int8 kernels' token block of 96 as well (and amx's, 128 tokens at this width)
    expect_batched_matches_single_tokens(level, pool, type, m, 130, ++seed);
  }
}

// A prefill-sized matmul whose rows span several of the many-token path's row ranges, the last one partial:
// every (row, token) is still the single-token result bit for bit.
TEST_P(MatmulLevels, ManyTokensOverSeveralRowRangesMatchSingleTokens) {
  const std::string_view level = GetParam();
  ThreadPool pool(2);
  std::uint32_t seed = 750;
  for (const WeightType type : kAllTypes) {
    const Matrix m = make_matrix(type, 300, 1024, ++seed);
    expect_batched_matches_single_tokens(level, pool, type, m, 60, ++seed);  // past every few-token path
  }
}

TEST_P(MatmulLevels, DequantizeRowsMatchesTheReference) {
  const std::string_view level = GetParam();
  std::uint32_t seed = 900;
  for (const WeightType type : kAllTypes) {
    for (const std::size_t cols : test_cols(type)) {
      const Matrix m = make_matrix(type, 9, cols, ++seed);
      for (const auto& [first, count] : {std::pair<std::size_t, std::size_t>{0, 9}, {4, 1}, {2, 5}, {9, 0}}) {
        auto out = poisoned(count * cols + 3);  // the 3 extra floats must stay untouched
        dequantize_rows_at_level(level, m.view(), first, count, out.data());
        EXPECT_EQ(std::memcmp(out.data(), m.dequantized.data() + first * cols, count * cols * sizeof(float)), 0)
            << describe(level, type, count, cols, 0) << " from row " << first;
        for (std::size_t i = count * cols; i < out.size(); ++i) EXPECT_TRUE(std::isnan(out[i]));
      }
      std::vector<float> out(cols);
      EXPECT_THROW(dequantize_rows_at_level(level, m.view(), 8, 2, out.data()), std::out_of_range);
    }
  }
}

TEST_P(MatmulLevels, LargeQuantizedMatrices) {
  // Shapes of Qwen3-0.6B's projections (trimmed in rows), many threads' worth of ranges.
  const std::string_view level = GetParam();
  ThreadPool pool(4);
  std::uint32_t seed = 1300;
  for (const WeightType type : kAllTypes) {
    const Matrix m = make_matrix(type, 150, 3072, ++seed);
    for (const std::size_t tokens : {1, 4, 9, 33}) {
      const auto x = random_vector(tokens * m.cols, ++seed);
      auto out = poisoned(tokens * m.rows);
      matmul_at_level(level, pool, m.view(), x.data(), tokens, out.data());
      expect_close_to_reference(level, m, x, tokens, out, nullptr, describe(level, type, m.rows, m.cols, tokens));
    }
  }
}

// Weights a level repacks at load give the stored layout's bits, for one token and every batch size, over
// partial tiles, several row ranges and threads, with and without bias, and rows of an odd number of blocks (the
// repacking pairs blocks).
TEST_P(MatmulLevels, RepackedWeightsGiveTheStoredBits) {
  const std::string_view level = GetParam();
  ThreadPool pool(3);
  std::uint32_t seed = 1500;
  std::vector<WeightType> repacked_types;
  for (const WeightType type : kAllTypes) {
    for (const std::size_t rows : {1, 5, 16, 17, 40, 300}) {
      const std::size_t odd_blocks = 3 * std::max<std::size_t>(32, engine::quant::block_elements(type));
      const std::size_t cols = rows == 300 ? 1024 : rows == 17 ? odd_blocks : 512;
      const Matrix m = make_matrix(type, rows, cols, ++seed);
      const auto repacked = repack_weights_at_level(level, pool, m.view());
      if (repacked == nullptr) continue;
      if (rows == 1) repacked_types.push_back(type);
      EXPECT_EQ(repacked->level(), level);
      EXPECT_GE(repacked->size_bytes(), m.bytes.size());
      WeightMatrix view = m.view();
      view.repacked = repacked.get();
      const auto bias = random_vector(rows, ++seed);
      for (const std::size_t tokens : {1, 2, 7, 17, 49, 130}) {
        const auto x = random_vector(tokens * cols, ++seed);
        for (const bool with_bias : {false, true}) {
          const float* b = with_bias ? bias.data() : nullptr;
          auto stored = poisoned(tokens * rows), got = poisoned(tokens * rows);
          matmul_at_level(level, pool, m.view(), x.data(), tokens, stored.data(), b);
          matmul_at_level(level, pool, view, x.data(), tokens, got.data(), b);
          ASSERT_EQ(std::memcmp(stored.data(), got.data(), got.size() * sizeof(float)), 0)
              << describe(level, type, rows, cols, tokens) << (with_bias ? " bias" : "") << " repacked";
        }
      }
    }
  }
  if (level == "avx512vnni") {
    // Every type with integer kernels, in kAllTypes' order.
    std::vector<WeightType> expected;
    for (const WeightType type : kAllTypes) {
      if (quantizes_activations(level, type)) expected.push_back(type);
    }
    EXPECT_EQ(expected.size(), 12u);
    EXPECT_EQ(repacked_types, expected);
  } else {
    EXPECT_TRUE(repacked_types.empty()) << level << " repacks no type";
  }
}

// ---- FP8 matrices with block scales ------------------------------------------------------------------

// An F8_E4M3 matrix with a scale per block of block_rows x block_cols (scales from 1/8 to 8), and its weights: the
// stored values times their block's scale, as an FP8 checkpoint defines them.
struct ScaledMatrix {
  Matrix m;
  std::vector<float> scale_values;
  std::size_t block_rows, block_cols;
  std::vector<float> weights;

  WeightMatrix view() const {
    WeightMatrix w = m.view();
    w.scales = {scale_values, block_rows, block_cols};
    return w;
  }
  // The matrix of its weights, for the double-precision reference.
  Matrix reference() const { return Matrix{WeightType::F32, m.rows, m.cols, {}, weights}; }
};

ScaledMatrix make_scaled(std::size_t rows, std::size_t cols, std::size_t block_rows, std::size_t block_cols,
                         std::uint32_t seed) {
  ScaledMatrix s{make_matrix(WeightType::F8_E4M3, rows, cols, seed), {}, block_rows, block_cols, {}};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(-3, 3);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  s.scale_values.resize((rows + block_rows - 1) / block_rows * ((cols + block_cols - 1) / block_cols));
  for (auto& v : s.scale_values) v = std::ldexp(mantissa(rng), exponent(rng));
  const quant::BlockScales scales{s.scale_values, block_rows, block_cols};
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) s.weights.push_back(s.m.dequantized[r * cols + c] * scales.at(r, c, cols));
  }
  return s;
}

// Blocks as FP8 checkpoints scale them (128 x 128, ragged at the edges), smaller ones over several row ranges,
// per channel and per tensor: each product matches the double-precision product of the scaled weights, and each
// token's result is its single-token result bit for bit, at every batch size; dequantize_rows gives the weights.
TEST_P(MatmulLevels, Fp8BlockScalesMatchTheReferenceInEveryBatch) {
  const std::string_view level = GetParam();
  ThreadPool pool(3);
  std::uint32_t seed = 2100;
  struct Shape {
    std::size_t rows, cols, block_rows, block_cols;
  };
  for (const Shape shape : {Shape{300, 520, 128, 128}, Shape{45, 100, 16, 32}, Shape{600, 64, 8, 16},
                            Shape{37, 72, 1, 72}, Shape{37, 72, 37, 72}}) {
    const ScaledMatrix s = make_scaled(shape.rows, shape.cols, shape.block_rows, shape.block_cols, ++seed);
    const auto bias = random_vector(shape.rows, ++seed);
    const std::string what = std::string(level) + " FP8 " + std::to_string(shape.rows) + "x" +
                             std::to_string(shape.cols) + " in blocks of " + std::to_string(shape.block_rows) + "x" +
                             std::to_string(shape.block_cols);
    for (const std::size_t tokens : {1, 3, 17, 49}) {
      const auto x = random_vector(tokens * shape.cols, ++seed);
      auto out = poisoned(tokens * shape.rows);
      matmul_at_level(level, pool, s.view(), x.data(), tokens, out.data(), bias.data());
      expect_close_to(s.reference(), x, tokens, out, bias.data(), 1e-5,
                      what + ", " + std::to_string(tokens) + " tokens");
      for (std::size_t t = 0; t < tokens; ++t) {
        auto alone = poisoned(shape.rows);
        matmul_at_level(level, pool, s.view(), x.data() + t * shape.cols, 1, alone.data(), bias.data());
        ASSERT_EQ(std::memcmp(alone.data(), out.data() + t * shape.rows, shape.rows * sizeof(float)), 0)
            << what << ": token " << t << " of " << tokens;
      }
    }
    auto rows = poisoned(7 * shape.cols);
    dequantize_rows_at_level(level, s.view(), 5, 7, rows.data());
    EXPECT_EQ(std::memcmp(rows.data(), s.weights.data() + 5 * shape.cols, rows.size() * sizeof(float)), 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Supported, MatmulLevels, ::testing::ValuesIn(supported_simd_levels()),
                         [](const auto& param_info) { return std::string(param_info.param); });

// Every level this CPU runs agrees with the portable one to float rounding (BF16 at avx512bf16 included: its
// activations are not rounded to bf16), but for int8 activations, which stay within their quantization error
// of the exact product.
TEST(Matmul, LevelsAgree) {
  ThreadPool pool(2);
  std::uint32_t seed = 2000;
  const auto agree = [](const std::vector<float>& got, const std::vector<float>& expected, float relative,
                        const std::string& what) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], relative * (std::fabs(expected[i]) + 1.0f)) << what << " " << i;
    }
  };
  for (const WeightType type : kAllTypes) {
    const Matrix m = make_matrix(type, 37, 512, ++seed);
    const auto x = random_vector(6 * m.cols, ++seed);
    auto expected = poisoned(6 * m.rows);
    matmul_at_level("portable", pool, m.view(), x.data(), 6, expected.data());
    for (const auto level : supported_simd_levels()) {
      const std::string what = std::string(level) + " " + std::string(quant::weight_type_name(type));
      auto got = poisoned(6 * m.rows);
      matmul_at_level(level, pool, m.view(), x.data(), 6, got.data());
      if (quantizes_activations(level, type)) {
        expect_within_quantization_error(m, x, 6, got, nullptr, what + " (int8 activations)");
      } else {
        agree(got, expected, 1e-5f, what);
      }
    }
  }
}

// The levels with integer activations share one numerics (docs/cpu-kernels.md): each takes the same weight
// types and gives the same bits, one token or many, so a model's logits do not depend on which of them the
// machine has.
TEST(Matmul, IntegerLevelsTakeTheSameTypesAndGiveTheSameBits) {
  std::vector<std::string_view> integer_levels;
  for (const auto level : supported_simd_levels()) {
    if (quantizes_activations(level, WeightType::Q8_0)) integer_levels.push_back(level);
  }
  if (integer_levels.size() < 2) GTEST_SKIP() << "this CPU runs one level with integer activations";
  ThreadPool pool(2);
  std::uint32_t seed = 2500;
  for (const WeightType type : kAllTypes) {
    const std::string name(quant::weight_type_name(type));
    const std::string_view first = integer_levels.front();
    for (const auto level : integer_levels) {
      EXPECT_EQ(quantizes_activations(level, type), quantizes_activations(first, type))
          << name << " at " << level << " and at " << first;
    }
    if (!quantizes_activations(first, type)) continue;
    const Matrix m = make_matrix(type, 37, 512, ++seed);
    const auto bias = random_vector(m.rows, ++seed);
    for (const std::size_t tokens : {1, 5, 17}) {
      const auto x = random_vector(tokens * m.cols, ++seed);
      auto expected = poisoned(tokens * m.rows);
      matmul_at_level(first, pool, m.view(), x.data(), tokens, expected.data(), bias.data());
      for (const auto level : integer_levels) {
        auto got = poisoned(tokens * m.rows);
        matmul_at_level(level, pool, m.view(), x.data(), tokens, got.data(), bias.data());
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
            << name << " " << tokens << " tokens at " << level << " and at " << first;
      }
    }
  }
}

TEST(Matmul, ExactProductsAreExact) {
  // bf16 weights and activations that are small integers: every product and partial sum is exact, so
  // every level gives exactly the integer result (the weights are converted exactly, never rounded).
  ThreadPool pool(2);
  const std::size_t rows = 5, cols = 300;
  std::vector<std::uint16_t> w(rows * cols);
  std::vector<float> x(cols);
  std::vector<double> expected(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < cols; ++k) {
      const float wv = static_cast<float>(static_cast<int>((r * 7 + k * 3) % 11) - 5);
      w[r * cols + k] = quant::f32_to_bf16(wv);
      x[k] = static_cast<float>(static_cast<int>(k % 9) - 4);
      expected[r] += static_cast<double>(wv) * x[k];
    }
  }
  const WeightMatrix m{WeightType::BF16, reinterpret_cast<const std::byte*>(w.data()), rows, cols};
  for (const auto level : supported_simd_levels()) {
    auto out = poisoned(rows);
    matmul_at_level(level, pool, m, x.data(), 1, out.data());
    for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(out[r], expected[r]) << level << " row " << r;
  }
}

TEST(Matmul, RejectsBadShapes) {
  ThreadPool pool(1);
  std::vector<std::byte> bytes(1024);
  std::vector<float> x(64), out(64);
  const WeightMatrix partial_block{WeightType::Q8_0, bytes.data(), 2, 48};
  EXPECT_THROW(matmul(pool, partial_block, x.data(), 1, out.data()), std::invalid_argument);
  EXPECT_THROW(dequantize_rows(partial_block, 0, 1, out.data()), std::invalid_argument);
  const WeightMatrix no_data{WeightType::F32, nullptr, 2, 4};
  EXPECT_THROW(matmul(pool, no_data, x.data(), 1, out.data()), std::invalid_argument);
  const WeightMatrix ok{WeightType::F32, bytes.data(), 2, 4};
  EXPECT_THROW(matmul_at_level("sse9", pool, ok, x.data(), 1, out.data()), std::invalid_argument);
  EXPECT_THROW(dequantize_rows(ok, 1, 2, out.data()), std::out_of_range);
  // Scales belong to FP8 matrices, one per block.
  const std::vector<float> scales(3, 1.0f);
  WeightMatrix scaled_f32 = ok;
  scaled_f32.scales = {scales, 1, 4};
  EXPECT_THROW(matmul(pool, scaled_f32, x.data(), 1, out.data()), std::invalid_argument);
  const WeightMatrix scaled_fp8{WeightType::F8_E4M3, bytes.data(), 2, 4, nullptr, {scales, 1, 4}};  // 2 scales needed
  EXPECT_THROW(matmul(pool, scaled_fp8, x.data(), 1, out.data()), std::invalid_argument);
  EXPECT_THROW(dequantize_rows(scaled_fp8, 0, 1, out.data()), std::invalid_argument);
}

// A group (q, k, v of different heights; with and without bias) gives every output the bits separate
// matmuls give it, for one token, a decode batch and a prefill-sized batch, at every weight type.
TEST(Matmul, GroupEqualsSeparateProducts) {
  ThreadPool pool(3);
  for (const auto type : kAllTypes) {
    const std::size_t cols = 256;
    const Matrix q = make_matrix(type, 96, cols, 1), k = make_matrix(type, 32, cols, 2),
                 v = make_matrix(type, 40, cols, 3);
    const auto bias = random_vector(96, 4);
    for (const std::size_t tokens : {1, 3, 60}) {
      const auto x = random_vector(tokens * cols, 5);
      const WeightMatrix qw = q.view(), kw = k.view(), vw = v.view();
      std::vector<float> want_q(tokens * 96), want_k(tokens * 32), want_v(tokens * 40);
      matmul(pool, qw, x.data(), tokens, want_q.data(), bias.data());
      matmul(pool, kw, x.data(), tokens, want_k.data());
      matmul(pool, vw, x.data(), tokens, want_v.data());
      auto got_q = poisoned(tokens * 96), got_k = poisoned(tokens * 32), got_v = poisoned(tokens * 40);
      const MatmulTarget targets[] = {{&qw, got_q.data(), bias.data()}, {&kw, got_k.data()}, {&vw, got_v.data()}};
      matmul_group(pool, targets, x.data(), tokens);
      const std::string what = std::string(quant::weight_type_name(type)) + ", " + std::to_string(tokens) + " tokens";
      EXPECT_EQ(got_q, want_q) << what;
      EXPECT_EQ(got_k, want_k) << what;
      EXPECT_EQ(got_v, want_v) << what;
    }
  }
  // One input cannot feed matrices of different widths.
  const Matrix a = make_matrix(WeightType::F32, 4, 32, 6), b = make_matrix(WeightType::F32, 4, 64, 7);
  const WeightMatrix aw = a.view(), bw = b.view();
  std::vector<float> x(64), out_a(4), out_b(4);
  const MatmulTarget mixed[] = {{&aw, out_a.data()}, {&bw, out_b.data()}};
  EXPECT_THROW(matmul_group(pool, mixed, x.data(), 1), std::invalid_argument);
}

// matmul_batch gives each job, over its own input, the bits matmul gives it: jobs of a few tokens each, which
// share one hand-off to the pool, and with one long job among them, which runs them one by one.
TEST(Matmul, BatchGivesEachJobTheBitsMatmulGives) {
  ThreadPool pool(2);
  for (const auto type : {WeightType::F32, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K}) {
    const Matrix a = make_matrix(type, 40, 256, 1900), b = make_matrix(type, 24, 512, 1901);
    const WeightMatrix va = a.view(), vb = b.view();
    for (const std::size_t long_tokens : {2, 40}) {
      const std::size_t tokens[] = {1, 3, long_tokens};
      const WeightMatrix* matrices[] = {&va, &vb, &va};
      std::vector<std::vector<float>> inputs, got, want;
      std::vector<MatmulJob> jobs;
      for (std::size_t j = 0; j < 3; ++j) {
        inputs.push_back(random_vector(tokens[j] * matrices[j]->cols, 1902 + static_cast<std::uint32_t>(j)));
        got.push_back(poisoned(tokens[j] * matrices[j]->rows));
        want.push_back(poisoned(tokens[j] * matrices[j]->rows));
        matmul(pool, *matrices[j], inputs[j].data(), tokens[j], want[j].data());
      }
      for (std::size_t j = 0; j < 3; ++j) jobs.push_back({matrices[j], inputs[j].data(), tokens[j], got[j].data()});
      matmul_batch(pool, jobs);
      for (std::size_t j = 0; j < 3; ++j) {
        EXPECT_EQ(std::memcmp(got[j].data(), want[j].data(), got[j].size() * sizeof(float)), 0)
            << quant::weight_type_name(type) << ", job " << j << " of " << tokens[j] << " tokens, beside a job of "
            << long_tokens;
      }
    }
  }
}

// Scaled FP8 matrices in a group (q, k, v) and in a batch of jobs get the bits matmul gives them.
TEST(Matmul, Fp8ScaledMatricesInGroupsAndBatchesGiveMatmulsBits) {
  ThreadPool pool(3);
  const ScaledMatrix q = make_scaled(256, 256, 128, 128, 2200), k = make_scaled(64, 256, 1, 256, 2201),
                     v = make_scaled(72, 256, 72, 256, 2202);
  const WeightMatrix qw = q.view(), kw = k.view(), vw = v.view();
  const auto bias = random_vector(256, 2203);
  for (const std::size_t tokens : {1, 3, 60}) {
    const auto x = random_vector(tokens * 256, 2204);
    std::vector<float> want_q(tokens * 256), want_k(tokens * 64), want_v(tokens * 72);
    matmul(pool, qw, x.data(), tokens, want_q.data(), bias.data());
    matmul(pool, kw, x.data(), tokens, want_k.data());
    matmul(pool, vw, x.data(), tokens, want_v.data());
    auto got_q = poisoned(tokens * 256), got_k = poisoned(tokens * 64), got_v = poisoned(tokens * 72);
    const MatmulTarget targets[] = {{&qw, got_q.data(), bias.data()}, {&kw, got_k.data()}, {&vw, got_v.data()}};
    matmul_group(pool, targets, x.data(), tokens);
    EXPECT_EQ(got_q, want_q) << tokens << " tokens";
    EXPECT_EQ(got_k, want_k) << tokens << " tokens";
    EXPECT_EQ(got_v, want_v) << tokens << " tokens";
    std::fill(got_k.begin(), got_k.end(), std::numeric_limits<float>::quiet_NaN());
    auto got_v2 = poisoned(tokens * 72);
    const MatmulJob jobs[] = {{&kw, x.data(), tokens, got_k.data()}, {&vw, x.data(), tokens, got_v2.data()}};
    matmul_batch(pool, jobs);
    EXPECT_EQ(got_k, want_k) << tokens << " tokens in a batch";
    EXPECT_EQ(got_v2, want_v) << tokens << " tokens in a batch";
  }
}

// A repacking is read only by the level that made it: every other level reads the stored rows; and only for the
// matrix it was made from.
TEST(Matmul, OnlyTheRepackingLevelReadsTheRepacking) {
  ThreadPool pool(2);
  const Matrix m = make_matrix(WeightType::Q4_K, 20, 512, 1600);
  const auto x = random_vector(3 * m.cols, 1601);
  int repacking_levels = 0;
  for (const std::string_view level : supported_simd_levels()) {
    const auto repacked = repack_weights_at_level(level, pool, m.view());
    if (repacked == nullptr) continue;
    ++repacking_levels;
    // A repacking whose bytes are all changed: a level that read it would give other results.
    auto spoiled = std::make_unique<RepackedWeights>(repacked->level(), repacked->size_bytes());
    std::memset(spoiled->data(), 0x55, spoiled->size_bytes());
    WeightMatrix view = m.view();
    view.repacked = spoiled.get();
    for (const std::string_view other : supported_simd_levels()) {
      auto stored = poisoned(3 * m.rows), got = poisoned(3 * m.rows);
      matmul_at_level(other, pool, m.view(), x.data(), 3, stored.data());
      matmul_at_level(other, pool, view, x.data(), 3, got.data());
      const bool same = std::memcmp(stored.data(), got.data(), got.size() * sizeof(float)) == 0;
      EXPECT_EQ(same, other != level) << "the repacking made at " << level << ", read at " << other;
    }
    // A repacking handed to another matrix is refused, not read past its end.
    const Matrix larger = make_matrix(WeightType::Q4_K, 40, 512, 1602);
    WeightMatrix mismatched = larger.view();
    mismatched.repacked = repacked.get();
    std::vector<float> out(3 * larger.rows);
    EXPECT_THROW(matmul_at_level(level, pool, mismatched, x.data(), 3, out.data()), std::invalid_argument);
  }
  if (repacking_levels == 0) GTEST_SKIP() << "no SIMD level of this CPU repacks Q4_K (avx512vnni does)";
}

// matmul_group reads the repackings of its matrices as matmul does.
TEST(Matmul, GroupReadsRepackedWeights) {
  ThreadPool pool(2);
  const Matrix a = make_matrix(WeightType::Q4_K, 40, 512, 1700), b = make_matrix(WeightType::Q5_K, 24, 512, 1701);
  const auto ra = repack_weights(pool, a.view()), rb = repack_weights(pool, b.view());
  WeightMatrix va = a.view(), vb = b.view();
  va.repacked = ra.get();
  vb.repacked = rb.get();
  for (const std::size_t tokens : {1, 3, 20}) {
    const auto x = random_vector(tokens * 512, 1702);
    auto ga = poisoned(tokens * a.rows), gb = poisoned(tokens * b.rows);
    const MatmulTarget targets[] = {{&va, ga.data(), nullptr}, {&vb, gb.data(), nullptr}};
    matmul_group(pool, targets, x.data(), tokens);
    auto sa = poisoned(tokens * a.rows), sb = poisoned(tokens * b.rows);
    matmul(pool, a.view(), x.data(), tokens, sa.data());
    matmul(pool, b.view(), x.data(), tokens, sb.data());
    EXPECT_EQ(std::memcmp(ga.data(), sa.data(), ga.size() * sizeof(float)), 0) << tokens << " tokens";
    EXPECT_EQ(std::memcmp(gb.data(), sb.data(), gb.size() * sizeof(float)), 0) << tokens << " tokens";
  }
}

// Repackings made into one arena lie side by side in it and give the stored layout's bits, one token or many.
TEST(Matmul, RepackingsInAnArenaGiveTheStoredBits) {
  ThreadPool pool(2);
  const Matrix a = make_matrix(WeightType::Q4_K, 40, 512, 1800), b = make_matrix(WeightType::Q6_K, 24, 512, 1801);
  HugePagesArena arena;
  const auto ra = repack_weights(pool, a.view(), &arena), rb = repack_weights(pool, b.view(), &arena);
  if (ra == nullptr || rb == nullptr) GTEST_SKIP() << "the SIMD level " << simd_level() << " reads Q4_K as stored";
  EXPECT_EQ(rb->data(), ra->data() + (ra->size_bytes() + 63) / 64 * 64);
  EXPECT_EQ(arena.chunks(), 1u);
  for (const auto& [matrix, repacked] : {std::pair{&a, ra.get()}, std::pair{&b, rb.get()}}) {
    WeightMatrix view = matrix->view();
    view.repacked = repacked;
    for (const std::size_t tokens : {1, 20}) {
      const auto x = random_vector(tokens * 512, 1802);
      auto got = poisoned(tokens * matrix->rows), stored = poisoned(tokens * matrix->rows);
      matmul(pool, view, x.data(), tokens, got.data());
      matmul(pool, matrix->view(), x.data(), tokens, stored.data());
      EXPECT_EQ(std::memcmp(got.data(), stored.data(), got.size() * sizeof(float)), 0) << tokens << " tokens";
    }
  }
}

TEST(Matmul, EmptyShapes) {
  ThreadPool pool(2);
  std::vector<float> x(8, 1.0f);
  const std::vector<float> bias = {0.5f, -2.0f};
  auto out = poisoned(4);
  // No columns: each output is the bias (or zero).
  matmul(pool, WeightMatrix{WeightType::F32, nullptr, 2, 0}, x.data(), 2, out.data(), bias.data());
  EXPECT_EQ(out, (std::vector<float>{0.5f, -2.0f, 0.5f, -2.0f}));
  // No tokens or no rows: nothing is written.
  auto untouched = poisoned(4);
  std::vector<float> w(8, 1.0f);
  matmul(pool, WeightMatrix{WeightType::F32, reinterpret_cast<const std::byte*>(w.data()), 2, 4}, x.data(), 0,
         untouched.data());
  matmul(pool, WeightMatrix{WeightType::F32, reinterpret_cast<const std::byte*>(w.data()), 0, 4}, x.data(), 3,
         untouched.data());
  for (const float v : untouched) EXPECT_TRUE(std::isnan(v));
}

// ---- dispatch ------------------------------------------------------------------------------------------

TEST(Dispatch, LevelInUse) {
  const auto levels = supported_simd_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.back(), "portable");
  const char* forced = std::getenv("ENGINE_SIMD");
  if (forced != nullptr && *forced != '\0') {
    // CTest runs this binary again with ENGINE_SIMD set to each level (see tests/CMakeLists.txt).
    if (std::find(levels.begin(), levels.end(), forced) != levels.end()) {
      EXPECT_EQ(simd_level(), forced);
    } else {
      EXPECT_EQ(simd_level(), levels.front());
    }
  } else {
    EXPECT_EQ(simd_level(), levels.front());
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    const bool bf16 = __builtin_cpu_supports("avx512bf16");
    const bool vnni = bf16 && __builtin_cpu_supports("avx512vnni");
    // amx also needs Linux's permission for the tile state, which the level's own check asks for.
    const bool amx = vnni && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
                     std::find(levels.begin(), levels.end(), "amx") != levels.end();
    EXPECT_EQ(levels.front(), amx ? "amx" : vnni ? "avx512vnni" : bf16 ? "avx512bf16" : "avx512");
    EXPECT_NE(std::find(levels.begin(), levels.end(), "avx512"), levels.end());
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(std::find(levels.begin(), levels.end(), "avx2"), levels.end());
    EXPECT_NE(std::find(levels.begin(), levels.end(), "avx2int16"), levels.end());
    // Without AVX-512 the best level is the one with integer activations (vpmaddwd).
    if (!__builtin_cpu_supports("avx512f")) {
      EXPECT_EQ(levels.front(), "avx2int16");
    }
  }
#endif
}

// The level in use computes what matmul_at_level computes for it.
TEST(Dispatch, MatmulUsesTheActiveLevel) {
  ThreadPool pool(2);
  const Matrix m = make_matrix(WeightType::Q4_K, 8, 512, 3000);
  const auto x = random_vector(3 * m.cols, 3001);
  auto a = poisoned(3 * m.rows), b = poisoned(3 * m.rows);
  matmul(pool, m.view(), x.data(), 3, a.data());
  matmul_at_level(simd_level(), pool, m.view(), x.data(), 3, b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  std::vector<float> rows(2 * m.cols);
  dequantize_rows(m.view(), 3, 2, rows.data());
  EXPECT_EQ(std::memcmp(rows.data(), m.dequantized.data() + 3 * m.cols, rows.size() * sizeof(float)), 0);
}

TEST(MemoryBandwidth, MeasuresSomething) {
  ThreadPool pool(0);
  const double gbps = measure_memory_bandwidth(pool, 64u << 20);
  EXPECT_GT(gbps, 0.1);
  EXPECT_LT(gbps, 100000.0);
}

}  // namespace
}  // namespace engine::cpu
