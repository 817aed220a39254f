// The gated feed-forward activations (silu_mul, gelu_tanh_mul, gpt-oss's clamped_swiglu_mul) at every SIMD level the
// CPU runs: within a few float ulps of the float64 value over the whole range (large negative and positive gates, the
// tail around 0, lengths that are not a multiple of the vector width), in place, and the same bits whatever the thread
// pool splits.
#include "engine/cpu/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/simd_levels.h"

namespace {

using engine::cpu::ThreadPool;
using engine::cpu::kernels::GatedMulFn;
using engine::cpu::kernels::Table;

std::vector<float> gates() {
  std::vector<float> g = {-100.0f, -87.5f, -30.0f, -17.0f, -1.0f, -1e-3f, -1e-30f, 0.0f, 1e-30f,
                          1e-3f,   0.5f,   1.0f,   5.0f,   30.0f, 88.0f,  100.0f,  1e4f};
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  while (g.size() < 1003) g.push_back(normal(random));  // 1003: a tail at every vector width
  return g;
}

// GELU's tanh approximation's argument of the sigmoid it equals: gelu_tanh(g) = g * sigmoid(z(g)).
double gelu_sigmoid_argument(double g) {
  return 2 * std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g);
}

struct Activation {
  const char* name;
  double (*reference)(double g, double u);
  // How much a float rounding of the sigmoid's argument moves the result, relatively: 1 for silu (whose
  // argument is the gate itself), 1 + |z| for GELU, whose argument is a cubic of the gate computed in float.
  double (*conditioning)(double g);
  GatedMulFn Table::*kernel;
  void (*pooled)(ThreadPool&, const float*, const float*, std::size_t, float*);
};

const Activation kActivations[] = {
    {"silu_mul", [](double g, double u) { return g / (1.0 + std::exp(-g)) * u; }, [](double) { return 1.0; },
     &Table::silu_mul, engine::cpu::silu_mul},
    // 0.5 g (1 + tanh(a)) as g / (1 + e^-2a): the same value, without 1 + tanh(a) cancelling to 0 for a < -19.
    {"gelu_tanh_mul", [](double g, double u) { return g / (1.0 + std::exp(-gelu_sigmoid_argument(g))) * u; },
     [](double g) { return 1.0 + std::abs(gelu_sigmoid_argument(g)); }, &Table::gelu_tanh_mul,
     engine::cpu::gelu_tanh_mul},
};

class GatedMul : public testing::TestWithParam<Activation> {};

INSTANTIATE_TEST_SUITE_P(Activations, GatedMul, testing::ValuesIn(kActivations),
                         [](const testing::TestParamInfo<Activation>& activation) {
                           return std::string(activation.param.name);
                         });

TEST_P(GatedMul, EveryLevelIsWithinAFewUlpsOfFloat64) {
  const Activation& act = GetParam();
  const std::vector<float> g = gates();
  std::vector<float> u(g.size());
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = 0.25f + static_cast<float>(i % 7) * 0.5f;
  for (const auto level : engine::cpu::supported_simd_levels()) {
    SCOPED_TRACE(std::string(level));
    std::vector<float> out(g.size(), -1.0f);
    (engine::cpu::table_or_throw(level).*act.kernel)(g.data(), u.data(), g.size(), out.data());
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double want = act.reference(g[i], u[i]);
      // exp to about 2 ulp, then a multiply-add, a divide and a multiply: 1e-6 relative is ~8 ulp. Below
      // -86 the exp stops at e^-86 (about 4e-38, a normal float), so such gates give |g| * 4e-38 where the
      // exact value is smaller still: an absolute 1e-33.
      EXPECT_NEAR(out[i], want, 1e-6 * act.conditioning(g[i]) * std::abs(want) + 1e-33) << "gate " << g[i];
    }
  }
}

TEST_P(GatedMul, InPlaceAndOverAnyThreadsTheSameBits) {
  const Activation& act = GetParam();
  const std::vector<float> g = gates();
  const std::vector<float> u(g.size(), 1.5f);
  std::vector<float> expected(g.size());
  ThreadPool one(1), two(2);
  act.pooled(one, g.data(), u.data(), g.size(), expected.data());
  for (const std::size_t n : {g.size(), std::size_t{40000}}) {
    std::vector<float> big_g(n), big_u(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      big_g[i] = g[i % g.size()];
      big_u[i] = u[i % u.size()];
      want[i] = expected[i % g.size()];
    }
    act.pooled(two, big_g.data(), big_u.data(), n, big_g.data());  // out is gate
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(big_g[i], want[i]) << "element " << i << " of " << n;
  }
}

// gpt-oss's clamped SwiGLU, alpha 1.702 and limit 7: the gate capped above, the up clamped on both sides, then
// (u + 1) · g · sigmoid(alpha g); at every level within a few ulps of float64 (the sigmoid's argument is alpha g,
// computed in float), and the same bits in place and over any threads.
TEST(ClampedSwiglu, EveryLevelIsWithinAFewUlpsOfFloat64AndClamps) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  const std::vector<float> g = gates();
  std::vector<float> u(g.size());
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = -12.0f + static_cast<float>(i % 25);  // both clamps reached
  const auto reference = [&](double gate, double up) {
    const double gc = std::min(gate, double{kLimit}), uc = std::clamp(up, -double{kLimit}, double{kLimit});
    return (uc + 1) * gc / (1 + std::exp(-double{kAlpha} * gc));
  };
  for (const auto level : engine::cpu::supported_simd_levels()) {
    SCOPED_TRACE(std::string(level));
    std::vector<float> out(g.size(), -1.0f);
    engine::cpu::table_or_throw(level).clamped_swiglu_mul(g.data(), u.data(), g.size(), kAlpha, kLimit, out.data());
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double want = reference(g[i], u[i]);
      const double conditioning = 1 + std::abs(kAlpha * std::min(g[i], kLimit));
      EXPECT_NEAR(out[i], want, 1e-6 * conditioning * std::abs(want) + 1e-33) << "gate " << g[i] << " up " << u[i];
    }
  }
  // The clamps themselves: a gate past the limit acts as the limit, an up past it as ±limit.
  const float gate[] = {100.0f, 7.0f, -3.0f}, up[] = {50.0f, -50.0f, 7.0f};
  float out[3];
  ThreadPool one(1);
  engine::cpu::clamped_swiglu_mul(one, gate, up, 3, kAlpha, kLimit, out);
  EXPECT_NEAR(out[0], reference(7.0, 7.0), 1e-5 * out[0]) << "gate 100 acts as 7, up 50 as 7";
  EXPECT_NEAR(out[1], reference(7.0, -7.0), 1e-5 * -out[1]) << "up -50 acts as -7";
  EXPECT_NEAR(out[2], reference(-3.0, 7.0), 1e-6);
  // In place and over two threads: the bits of one thread.
  const std::size_t n = 40000;
  std::vector<float> big_g(n), big_u(n), want(n);
  for (std::size_t i = 0; i < n; ++i) {
    big_g[i] = g[i % g.size()];
    big_u[i] = u[i % u.size()];
  }
  engine::cpu::clamped_swiglu_mul(one, big_g.data(), big_u.data(), n, kAlpha, kLimit, want.data());
  ThreadPool two(2);
  engine::cpu::clamped_swiglu_mul(two, big_g.data(), big_u.data(), n, kAlpha, kLimit, big_g.data());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(big_g[i], want[i]) << "element " << i;
}

}  // namespace
