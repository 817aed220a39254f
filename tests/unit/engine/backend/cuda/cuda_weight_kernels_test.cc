// The CUDA weight kernels against the scalar reference of engine/quant: weight_gemv (alone, grouped and
// with a gated input) to 1e-5 of a double reference, dequantize_to_bf16 and gather_weight_rows bit for bit. Without a
// GPU the GPU tests skip.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/weight_kernels.h"
#include "engine/quant/quant.h"
#include "tests/support/require_gpu.h"

namespace engine::cuda {
namespace {

using quant::WeightType;

constexpr WeightType kAllTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0,
                                    WeightType::Q4_0, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(count, 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  T* get() const { return data_; }
  // Fills every byte with 0xFF: NaN as f32 and as bf16, so unwritten outputs are recognisable.
  void poison() { CUDA_CHECK(cudaMemset(data_, 0xFF, count_ * sizeof(T))); }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

// A weight of random values in the given type. Tall weights repeat `distinct` quantized rows (in a scattered
// order) so that the reference quantizers and the CPU reference stay fast; the kernels cannot tell.
struct HostWeight {
  WeightType type;
  std::size_t rows, cols, row_bytes, distinct;
  std::vector<std::byte> bytes;  // all rows, as stored
  std::vector<float> values;     // the distinct rows, dequantized by quant::dequantize_row

  std::size_t source(std::size_t row) const { return distinct == rows ? row : row * 7919 % distinct; }
  std::span<const float> row_values(std::size_t row) const {
    return std::span<const float>(values).subspan(source(row) * cols, cols);
  }
};

HostWeight make_weight(WeightType type, std::size_t rows, std::size_t cols, std::size_t distinct, std::mt19937& rng) {
  HostWeight w{type, rows, cols, *quant::row_bytes(type, cols), std::min(distinct, rows), {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> row_scale(0.25f, 2.0f);
  std::vector<std::byte> distinct_bytes(w.distinct * w.row_bytes);
  w.values.resize(w.distinct * cols);
  std::vector<float> src(cols);
  for (std::size_t d = 0; d < w.distinct; ++d) {
    const float scale = row_scale(rng);
    for (auto& v : src) v = normal(rng) * scale;
    const std::span<std::byte> stored(distinct_bytes.data() + d * w.row_bytes, w.row_bytes);
    quant::quantize_row(type, src, stored);
    quant::dequantize_row(type, stored, std::span<float>(w.values).subspan(d * cols, cols));
  }
  w.bytes.resize(rows * w.row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    std::memcpy(w.bytes.data() + r * w.row_bytes, distinct_bytes.data() + w.source(r) * w.row_bytes, w.row_bytes);
  }
  return w;
}

std::vector<float> random_floats(std::size_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& f : v) f = normal(rng);
  return v;
}

struct Shape {
  std::size_t rows, cols, distinct;
};

// Rows that are not a multiple of a block's rows; cols 256, 1024, 3072, 4096; a tall vocabulary-like shape.
std::vector<Shape> gemv_shapes(WeightType type) {
  std::vector<Shape> shapes = {{1000, 4096, 1000}, {151936, 256, 257}, {333, 1024, 333}, {77, 3072, 77}};
  if (quant::block_elements(type) <= 32) shapes.push_back({65, 160, 65});  // a part-filled step
  return shapes;
}

std::string describe(WeightType type, std::size_t rows, std::size_t cols) {
  return std::string(quant::weight_type_name(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols);
}

class CudaWeightKernels : public ::testing::TestWithParam<WeightType> {};

// y = W x (+ bias) for 1, 2, 3 and 8 tokens against a double reference; the output is NaN-poisoned, rows
// past `rows` in each token's ldy-long row must stay NaN, every written value must be finite.
TEST_P(CudaWeightKernels, GemvMatchesDoubleReference) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(1234 + static_cast<unsigned>(type));
  for (const Shape& shape : gemv_shapes(type)) {
    const HostWeight w = make_weight(type, shape.rows, shape.cols, shape.distinct, rng);
    const DeviceBuffer<std::byte> weight(w.bytes);
    for (const std::size_t tokens : {1u, 2u, 3u, 8u}) {
      for (const bool with_bias : {false, true}) {
        const std::vector<float> x = random_floats(tokens * w.cols, rng);
        const std::vector<float> bias = random_floats(w.rows, rng);
        const DeviceBuffer<float> x_dev(x);
        const DeviceBuffer<float> bias_dev(bias);
        const std::size_t ldy = w.rows + 3;
        DeviceBuffer<float> y_dev(tokens * ldy);
        y_dev.poison();
        weight_gemv(type, weight.get(), w.rows, w.cols, x_dev.get(), tokens, with_bias ? bias_dev.get() : nullptr,
                    y_dev.get(), ldy, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> y = y_dev.download();

        // The reference per distinct row (tall weights repeat rows), then spread to every row.
        std::vector<double> dots(w.distinct * tokens);
        for (std::size_t d = 0; d < w.distinct; ++d) {
          const float* row = w.values.data() + d * w.cols;
          for (std::size_t t = 0; t < tokens; ++t) {
            double sum = 0.0;
            for (std::size_t c = 0; c < w.cols; ++c) sum += static_cast<double>(row[c]) * x[t * w.cols + c];
            dots[d * tokens + t] = sum;
          }
        }
        double err2 = 0.0, ref2 = 0.0;
        std::size_t bad_finite = 0, bad_gap = 0;
        for (std::size_t t = 0; t < tokens; ++t) {
          for (std::size_t r = 0; r < w.rows; ++r) {
            const double ref = dots[w.source(r) * tokens + t] + (with_bias ? bias[r] : 0.0);
            const float got = y[t * ldy + r];
            if (!std::isfinite(got)) ++bad_finite;
            err2 += (got - ref) * (got - ref);
            ref2 += ref * ref;
          }
          for (std::size_t r = w.rows; r < ldy; ++r) bad_gap += std::isnan(y[t * ldy + r]) ? 0 : 1;
        }
        const std::string what =
            describe(type, w.rows, w.cols) + ", " + std::to_string(tokens) + " tokens" + (with_bias ? ", bias" : "");
        EXPECT_EQ(bad_finite, 0u) << what << ": non-finite outputs";
        EXPECT_EQ(bad_gap, 0u) << what << ": wrote past rows into the ldy gap";
        EXPECT_LT(std::sqrt(err2 / ref2), 1e-5) << what;
      }
    }
  }
}

// Rows [row_begin, row_begin + rows) as bf16, equal to quant::f32_to_bf16 of the CPU dequantization, and
// nothing written past the end.
TEST_P(CudaWeightKernels, DequantizeToBf16MatchesCpu) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(99 + static_cast<unsigned>(type));
  struct Case {
    Shape shape;
    std::size_t row_begin, rows;
  };
  std::vector<Case> cases = {{{300, 4096, 300}, 17, 250}, {{151936, 256, 257}, 150001, 1935}, {{40, 3072, 40}, 1, 39}};
  if (quant::block_elements(type) <= 32) cases.push_back({{65, 160, 65}, 3, 61});
  for (const Case& c : cases) {
    const HostWeight w = make_weight(type, c.shape.rows, c.shape.cols, c.shape.distinct, rng);
    const DeviceBuffer<std::byte> weight(w.bytes);
    constexpr std::size_t kGuard = 64;
    DeviceBuffer<__nv_bfloat16> out(c.rows * w.cols + kGuard);
    out.poison();
    dequantize_to_bf16(type, weight.get(), c.row_begin, c.rows, w.cols, out.get(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<__nv_bfloat16> got = out.download();
    std::size_t mismatches = 0, first = 0;
    for (std::size_t r = 0; r < c.rows; ++r) {
      const auto values = w.row_values(c.row_begin + r);
      for (std::size_t col = 0; col < w.cols; ++col) {
        std::uint16_t bits;
        std::memcpy(&bits, &got[r * w.cols + col], sizeof bits);
        if (bits != quant::f32_to_bf16(values[col]) && mismatches++ == 0) first = r * w.cols + col;
      }
    }
    std::size_t guard_written = 0;
    for (std::size_t i = c.rows * w.cols; i < got.size(); ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, &got[i], sizeof bits);
      guard_written += bits == 0xFFFF ? 0 : 1;
    }
    const std::string what =
        describe(type, w.rows, w.cols) + " rows " + std::to_string(c.row_begin) + "+" + std::to_string(c.rows);
    EXPECT_EQ(mismatches, 0u) << what << ", first at element " << first;
    EXPECT_EQ(guard_written, 0u) << what << ": wrote past the end";
  }
}

// Rows by device token ids (repeats, first and last row included) as f32, bit-equal to the CPU dequantization.
TEST_P(CudaWeightKernels, GatherRowsMatchesCpu) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(7 + static_cast<unsigned>(type));
  const std::vector<Shape> shapes = {{151936, 256, 257}, {300, 4096, 300}, {50, 1024, 50}};
  for (const Shape& shape : shapes) {
    const HostWeight w = make_weight(type, shape.rows, shape.cols, shape.distinct, rng);
    const DeviceBuffer<std::byte> weight(w.bytes);
    std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(w.rows - 1));
    std::vector<std::int32_t> ids = {0, static_cast<std::int32_t>(w.rows - 1)};
    while (ids.size() < 37) ids.push_back(pick(rng));
    ids.push_back(ids[5]);
    const DeviceBuffer<std::int32_t> ids_dev(ids);
    constexpr std::size_t kGuard = 64;
    DeviceBuffer<float> out(ids.size() * w.cols + kGuard);
    out.poison();
    gather_weight_rows(type, weight.get(), w.cols, ids_dev.get(), ids.size(), out.get(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = out.download();
    std::size_t mismatches = 0;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      const auto values = w.row_values(static_cast<std::size_t>(ids[t]));
      mismatches += std::memcmp(&got[t * w.cols], values.data(), w.cols * sizeof(float)) == 0 ? 0 : 1;
    }
    std::size_t guard_written = 0;
    for (std::size_t i = ids.size() * w.cols; i < got.size(); ++i) guard_written += std::isnan(got[i]) ? 0 : 1;
    EXPECT_EQ(mismatches, 0u) << describe(type, w.rows, w.cols) << ": rows differing from the CPU";
    EXPECT_EQ(guard_written, 0u) << describe(type, w.rows, w.cols) << ": wrote past the end";
  }
}

// Σ_c row[c] · x[t][c] in double for every row of w (rows repeated as the weight repeats them).
std::vector<double> reference_products(const HostWeight& w, const std::vector<double>& x, std::size_t tokens) {
  std::vector<double> y(tokens * w.rows);
  for (std::size_t r = 0; r < w.rows; ++r) {
    const auto row = w.row_values(r);
    for (std::size_t t = 0; t < tokens; ++t) {
      double sum = 0.0;
      for (std::size_t c = 0; c < w.cols; ++c) sum += static_cast<double>(row[c]) * x[t * w.cols + c];
      y[t * w.rows + r] = sum;
    }
  }
  return y;
}

// ‖got − want‖ / ‖want‖ over tokens rows of `rows` values at stride ldy, infinite if one is not finite;
// `gap_written` counts values past `rows` in a row that are no longer NaN.
double relative_error(const std::vector<float>& got, std::size_t ldy, const std::vector<double>& want, std::size_t rows,
                      std::size_t tokens, std::size_t& gap_written) {
  double err2 = 0.0, ref2 = 0.0;
  gap_written = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double g = got[t * ldy + r], ref = want[t * rows + r];
      if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
      err2 += (g - ref) * (g - ref);
      ref2 += ref * ref;
    }
    for (std::size_t r = rows; r < ldy; ++r) gap_written += std::isnan(got[t * ldy + r]) ? 0 : 1;
  }
  return std::sqrt(err2 / ref2);
}

// Expects y within 1e-5 of want (relative) and every value past `rows` in a row still NaN.
void expect_products(const std::vector<float>& y, std::size_t ldy, const std::vector<double>& want, std::size_t rows,
                     std::size_t tokens, const std::string& what) {
  std::size_t gap = 0;
  EXPECT_LT(relative_error(y, ldy, want, rows, tokens, gap), 1e-5) << what;
  EXPECT_EQ(gap, 0u) << what << ": wrote past rows into the ldy gap";
}

// Three weights of one type over one x in one launch (q, k and v of different heights, biases on two), each
// output as a GEMV of its own would give, and nothing written past an output's rows.
TEST_P(CudaWeightKernels, GroupedGemvMatchesDoubleReference) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(99 + static_cast<unsigned>(type));
  const std::size_t cols = 1024;
  const std::size_t heights[] = {1000, 200, 72};
  std::vector<HostWeight> host;
  std::vector<std::unique_ptr<DeviceBuffer<std::byte>>> weights;
  for (const auto rows : heights) {
    host.push_back(make_weight(type, rows, cols, rows, rng));
    weights.push_back(std::make_unique<DeviceBuffer<std::byte>>(host.back().bytes));
  }
  for (const std::size_t tokens : {1u, 3u, 8u}) {
    const std::vector<float> x = random_floats(tokens * cols, rng);
    const DeviceBuffer<float> x_dev(x);
    std::vector<std::vector<float>> biases;
    std::vector<std::unique_ptr<DeviceBuffer<float>>> bias_dev, y_dev;
    GemvOutput outputs[3];
    for (std::size_t i = 0; i < 3; ++i) {
      biases.push_back(random_floats(heights[i], rng));
      bias_dev.push_back(std::make_unique<DeviceBuffer<float>>(biases.back()));
      y_dev.push_back(std::make_unique<DeviceBuffer<float>>(tokens * (heights[i] + 5)));
      y_dev.back()->poison();
      outputs[i] = {weights[i]->get(), heights[i], i == 1 ? nullptr : bias_dev[i]->get(), y_dev[i]->get(),
                    heights[i] + 5};
    }
    weight_gemv_group(type, outputs, cols, {x_dev.get(), nullptr}, tokens, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<double> xd(x.begin(), x.end());
    for (std::size_t i = 0; i < 3; ++i) {
      auto want = reference_products(host[i], xd, tokens);
      if (i != 1) {
        for (std::size_t t = 0; t < tokens; ++t) {
          for (std::size_t r = 0; r < heights[i]; ++r) want[t * heights[i] + r] += biases[i][r];
        }
      }
      expect_products(y_dev[i]->download(), heights[i] + 5, want, heights[i], tokens,
                      describe(type, heights[i], cols) + " (output " + std::to_string(i) + "), " +
                          std::to_string(tokens) + " tokens");
    }
  }
}

// The gated input: y = W (silu(gate) * up), SwiGLU's product made as the GEMV reads it.
TEST_P(CudaWeightKernels, GatedGemvMatchesDoubleReference) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(7 + static_cast<unsigned>(type));
  const HostWeight w = make_weight(type, 300, 3072, 300, rng);
  const DeviceBuffer<std::byte> weight(w.bytes);
  for (const std::size_t tokens : {1u, 2u, 8u}) {
    std::vector<float> gate = random_floats(tokens * w.cols, rng);
    for (auto& g : gate) g *= 3.0f;  // well into both tails of silu
    const std::vector<float> up = random_floats(tokens * w.cols, rng);
    std::vector<double> product(gate.size());
    for (std::size_t i = 0; i < gate.size(); ++i) {
      product[i] = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i];
    }
    const DeviceBuffer<float> gate_dev(gate), up_dev(up);
    DeviceBuffer<float> y_dev(tokens * (w.rows + 2));
    y_dev.poison();
    const GemvOutput output{weight.get(), w.rows, nullptr, y_dev.get(), w.rows + 2};
    weight_gemv_group(type, std::span(&output, 1), w.cols, {gate_dev.get(), up_dev.get()}, tokens, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    expect_products(y_dev.download(), w.rows + 2, reference_products(w, product, tokens), w.rows, tokens,
                    describe(type, w.rows, w.cols) + ", gated, " + std::to_string(tokens) + " tokens");
  }
}

// The normed input and the accumulating output: y = y0 + W (rms_norm(x) * norm), the residual stream read
// through a sub-block's norm and a projection added back into it.
TEST_P(CudaWeightKernels, NormedAccumulatingGemvMatchesDoubleReference) {
  REQUIRE_GPU();
  const WeightType type = GetParam();
  std::mt19937 rng(31 + static_cast<unsigned>(type));
  const HostWeight w = make_weight(type, 200, 1024, 200, rng);
  const DeviceBuffer<std::byte> weight(w.bytes);
  std::vector<float> norm = random_floats(w.cols, rng);
  for (auto& n : norm) n = 1.0f + 0.2f * n;
  const DeviceBuffer<float> norm_dev(norm);
  const float eps = 1e-6f;
  for (const std::size_t tokens : {1u, 5u, 8u}) {
    std::vector<float> x = random_floats(tokens * w.cols, rng);
    for (auto& v : x) v *= 4.0f;
    std::vector<double> normed(x.size());
    for (std::size_t t = 0; t < tokens; ++t) {
      double squares = 0.0;
      for (std::size_t c = 0; c < w.cols; ++c) squares += static_cast<double>(x[t * w.cols + c]) * x[t * w.cols + c];
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(w.cols) + eps);
      for (std::size_t c = 0; c < w.cols; ++c) normed[t * w.cols + c] = x[t * w.cols + c] * inv * norm[c];
    }
    const std::size_t ldy = w.rows + 1;
    std::vector<float> y0(tokens * ldy, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t r = 0; r < w.rows; ++r) y0[t * ldy + r] = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    }
    const DeviceBuffer<float> x_dev(x);
    DeviceBuffer<float> y_dev(y0);
    const GemvOutput output{weight.get(), w.rows, nullptr, y_dev.get(), ldy, true};
    weight_gemv_group(type, std::span(&output, 1), w.cols, {.x = x_dev.get(), .norm = norm_dev.get(), .eps = eps},
                      tokens, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    auto want = reference_products(w, normed, tokens);
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t r = 0; r < w.rows; ++r) want[t * w.rows + r] += y0[t * ldy + r];
    }
    expect_products(y_dev.download(), ldy, want, w.rows, tokens,
                    describe(type, w.rows, w.cols) + ", normed and accumulated, " + std::to_string(tokens) + " tokens");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaWeightKernels, ::testing::ValuesIn(kAllTypes),
                         [](const auto& param_info) { return std::string(quant::weight_type_name(param_info.param)); });

// Arguments are checked before anything reaches the GPU, so these run on machines without one too.
TEST(CudaWeightKernelsArguments, TooManyTokensThrow) {
  try {
    weight_gemv(WeightType::BF16, nullptr, 16, 64, nullptr, kGemvMaxTokens + 1, nullptr, nullptr, 16, nullptr);
    FAIL() << "9 tokens were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("9 tokens"), std::string::npos) << e.what();
  }
}

TEST(CudaWeightKernelsArguments, BadGroupsAndInputsThrow) {
  GemvOutput four[4]{};
  try {
    weight_gemv_group(WeightType::BF16, four, 64, {}, 1, nullptr);
    FAIL() << "4 outputs were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4 outputs in one launch (1 to 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(weight_gemv_group(WeightType::BF16, std::span(four, 0), 64, {}, 1, nullptr), std::invalid_argument);
  // An input is gated or normed, not both.
  const float* some = reinterpret_cast<const float*>(std::uintptr_t{256});
  EXPECT_THROW(
      weight_gemv_group(WeightType::BF16, std::span(four, 1), 64, {.x = some, .up = some, .norm = some}, 1, nullptr),
      std::invalid_argument);
}

TEST(CudaWeightKernelsArguments, UnsupportedColsThrow) {
  try {
    weight_gemv(WeightType::Q4_K, nullptr, 16, 100, nullptr, 1, nullptr, nullptr, 16, nullptr);
    FAIL() << "100 Q4_K columns were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cols 100"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(weight_gemv(WeightType::F16, nullptr, 16, 12, nullptr, 1, nullptr, nullptr, 16, nullptr),
               std::invalid_argument);
  EXPECT_THROW(dequantize_to_bf16(WeightType::Q8_0, nullptr, 0, 4, 48, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(gather_weight_rows(WeightType::Q6_K, nullptr, 128, nullptr, 1, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(weight_gemv(WeightType::F32, nullptr, 16, 64, nullptr, 1, nullptr, nullptr, 15, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace engine::cuda
