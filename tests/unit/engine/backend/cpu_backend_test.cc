#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"

namespace engine::backend {
namespace {

// The CPU backend repacks a matrix where its SIMD level reads a repacking, but never a table only looked up
// (an embedding the output does not share: the products never stream it, so a repacking would only double its
// memory) nor a mixture's expert (only the experts a step's tokens are routed to are read, where a repacked
// copy of every one would hold the whole model in memory).
TEST(CpuBackend, ALookupOnlyTableAndAnExpertAreReadInPlaceNotRepacked) {
  const auto type = quant::WeightType::Q4_K;
  const std::vector<std::byte> blocks(32 * *quant::row_bytes(type, 256));
  {
    cpu::ThreadPool pool(1);
    if (cpu::repack_weights(pool, {type, blocks.data(), 32, 256}) == nullptr) {
      GTEST_SKIP() << "the SIMD level " << cpu::simd_level() << " reads Q4_K as stored";
    }
  }
  auto backend = make_cpu_backend(1);
  const auto matrix_of = [&](bool lookup_only, bool expert) {
    WeightSource source{type, blocks, 32, 256};
    source.lookup_only = lookup_only;
    source.expert = expert;
    return static_cast<const cpu::WeightMatrix*>(backend->add_weight(source).handle);
  };
  EXPECT_NE(matrix_of(false, false)->repacked, nullptr);
  for (const auto* kept : {matrix_of(true, false), matrix_of(false, true)}) {
    EXPECT_EQ(kept->repacked, nullptr);
    EXPECT_EQ(kept->data, blocks.data());
  }
}

// A small mixture in f32: 4 experts of 16 over 32 dimensions, 2 per token, and a shared expert of 8.
class MoeBlockTest : public testing::Test {
 protected:
  static constexpr std::size_t kHidden = 32, kInter = 16, kShared = 8, kExperts = 4, kTopK = 2;

  void SetUp() override {
    std::mt19937 random(11);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    const auto matrix = [&](std::size_t rows, std::size_t cols, bool expert) {
      auto& values = storage_.emplace_back(rows * cols);
      for (auto& v : values) v = normal(random);
      WeightSource source{quant::WeightType::F32, std::as_bytes(std::span<const float>(values)), rows, cols};
      source.expert = expert;
      return &weights_.emplace_back(backend_->add_weight(source));
    };
    router_ = matrix(kExperts, kHidden, false);
    for (std::size_t e = 0; e < kExperts; ++e) {
      experts_.push_back({matrix(kInter, kHidden, true), matrix(kInter, kHidden, true), matrix(kHidden, kInter, true)});
    }
    shared_ = {matrix(kShared, kHidden, false), matrix(kShared, kHidden, false), matrix(kHidden, kShared, false)};
    shared_gate_ = matrix(1, kHidden, false);
    // gpt-oss's form: biases on the router and on each expert's products, large enough that the clamps bite.
    std::normal_distribution<float> large(0.0f, 5.0f);
    const auto bias = [&](std::size_t n) {
      auto& values = bias_storage_.emplace_back(n);
      for (auto& v : values) v = large(random);
      return &weights_.emplace_back(backend_->add_weight(
          WeightSource{quant::WeightType::F32, std::as_bytes(std::span<const float>(values)), 1, n}));
    };
    router_bias_ = bias(kExperts);
    for (const auto& e : experts_) {
      biased_experts_.push_back({e.gate, e.up, e.down, bias(kInter), bias(kInter), bias(kHidden)});
    }
    KvCacheShape shape;
    shape.num_layers = 1;
    shape.num_kv_heads = 1;
    shape.head_dim = 64;
    shape.block_size = 16;
    shape.num_blocks = 2;
    backend_->init_cache(shape, RopeSpec{std::vector<double>(32, 1.0)});
    for (auto& v : inputs_) v = normal(random);
  }

  MoeBlock block(bool with_shared) const {
    return {
        router_, experts_, kTopK, !with_shared, with_shared ? &shared_ : nullptr, with_shared ? shared_gate_ : nullptr};
  }
  MoeBlock gpt_oss_block() const {
    MoeBlock b{router_, biased_experts_, kTopK, true};
    b.router_bias = router_bias_;
    b.clamped_swiglu = ClampedSwiglu{1.702f, 7.0f};
    return b;
  }

  // x + the block's output for the inputs' rows [first, first + count), run as one step.
  std::vector<float> run(bool with_shared, std::size_t first, std::size_t count) {
    return run(block(with_shared), first, count);
  }
  std::vector<float> run(const MoeBlock& moe, std::size_t first, std::size_t count) {
    const std::vector<std::int32_t> table = {1};
    backend_->begin_step({{{0, count, {table}}}, std::vector<std::int32_t>(count, 0), {}});
    const Tensor h = backend_->alloc(count, kHidden), x = backend_->alloc(count, kHidden);
    std::copy_n(inputs_.begin() + static_cast<std::ptrdiff_t>(first * kHidden), count * kHidden, h.data);
    std::fill_n(x.data, count * kHidden, 1.0f);
    backend_->moe_add(h, moe, x);
    return {x.data, x.data + count * kHidden};
  }

  // h · wᵀ in double for an f32 weight.
  static std::vector<double> product(std::span<const float> h, const std::vector<float>& w, std::size_t rows) {
    std::vector<double> out(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < h.size(); ++i) out[r] += static_cast<double>(h[i]) * w[r * h.size() + i];
    }
    return out;
  }
  // silu(h gateᵀ) * (h upᵀ) through down, from the matrices stored at `at` in storage_.
  std::vector<double> mlp(std::span<const float> h, std::size_t at, std::size_t inter) const {
    const auto gate = product(h, storage_[at], inter), up = product(h, storage_[at + 1], inter);
    std::vector<float> act(inter);
    for (std::size_t i = 0; i < inter; ++i) act[i] = static_cast<float>(gate[i] / (1 + std::exp(-gate[i])) * up[i]);
    return product(act, storage_[at + 2], kHidden);
  }

  // The block's output for input row t, as transformers computes it, in double.
  std::vector<double> expected(std::size_t t, bool with_shared) const {
    const std::span<const float> h(inputs_.data() + t * kHidden, kHidden);
    const auto scores = product(h, storage_[0], kExperts);
    std::vector<double> p(kExperts);
    const double top = *std::max_element(scores.begin(), scores.end());
    for (std::size_t e = 0; e < kExperts; ++e) p[e] = std::exp(scores[e] - top);
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    for (auto& v : p) v /= total;
    std::vector<std::size_t> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (std::size_t k = 0; k < kTopK; ++k) chosen += p[order[k]];
    std::vector<double> out(kHidden, 1.0);
    for (std::size_t k = 0; k < kTopK; ++k) {
      const double weight = with_shared ? p[order[k]] : p[order[k]] / chosen;
      const auto y = mlp(h, 1 + 3 * order[k], kInter);
      for (std::size_t i = 0; i < kHidden; ++i) out[i] += weight * y[i];
    }
    if (with_shared) {
      const double gate = 1 / (1 + std::exp(-product(h, storage_.back(), 1)[0]));
      const auto y = mlp(h, 1 + 3 * kExperts, kShared);
      for (std::size_t i = 0; i < kHidden; ++i) out[i] += gate * y[i];
    }
    return out;
  }

  // gpt-oss's block for input row t in double: router scores plus bias, softmax over the top k, each expert's
  // gate and up plus biases through the clamped SwiGLU, down plus bias.
  std::vector<double> expected_gpt_oss(std::size_t t) const {
    const std::span<const float> h(inputs_.data() + t * kHidden, kHidden);
    auto scores = product(h, storage_[0], kExperts);
    for (std::size_t e = 0; e < kExperts; ++e) scores[e] += bias_storage_[0][e];
    std::vector<std::size_t> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
    double total = 0;
    for (std::size_t k = 0; k < kTopK; ++k) total += std::exp(scores[order[k]] - scores[order[0]]);
    std::vector<double> out(kHidden, 1.0);
    for (std::size_t k = 0; k < kTopK; ++k) {
      const std::size_t e = order[k];
      const auto& b_gate = bias_storage_[1 + 3 * e];
      const auto& b_up = bias_storage_[2 + 3 * e];
      const auto& b_down = bias_storage_[3 + 3 * e];
      const auto gate = product(h, storage_[1 + 3 * e], kInter), up = product(h, storage_[2 + 3 * e], kInter);
      std::vector<float> act(kInter);
      for (std::size_t i = 0; i < kInter; ++i) {
        const double g = std::min(gate[i] + b_gate[i], 7.0), u = std::clamp(up[i] + b_up[i], -7.0, 7.0);
        act[i] = static_cast<float>((u + 1) * g / (1 + std::exp(-1.702 * g)));
      }
      const auto y = product(act, storage_[3 + 3 * e], kHidden);
      const double weight = std::exp(scores[e] - scores[order[0]]) / total;
      for (std::size_t i = 0; i < kHidden; ++i) out[i] += weight * (y[i] + b_down[i]);
    }
    return out;
  }

  std::unique_ptr<Backend> backend_ = make_cpu_backend(2);
  std::deque<std::vector<float>> storage_;       // router, each expert's gate, up, down, the shared ones, its gate
  std::deque<std::vector<float>> bias_storage_;  // the router's bias, each expert's gate, up and down biases
  const Weight* router_bias_ = nullptr;
  std::vector<ExpertWeights> biased_experts_;
  std::deque<Weight> weights_;
  const Weight* router_ = nullptr;
  std::vector<ExpertWeights> experts_;
  ExpertWeights shared_;
  const Weight* shared_gate_ = nullptr;
  std::vector<float> inputs_ = std::vector<float>(5 * kHidden);
};

TEST_F(MoeBlockTest, EachTokenGetsItsChosenExpertsWeightedAndTheSharedExpertGated) {
  for (const bool with_shared : {false, true}) {
    const auto out = run(with_shared, 0, 5);
    for (std::size_t t = 0; t < 5; ++t) {
      const auto want = expected(t, with_shared);
      for (std::size_t i = 0; i < kHidden; ++i) {
        EXPECT_NEAR(out[t * kHidden + i], want[i], 1e-5)
            << "token " << t << " value " << i << " shared " << with_shared;
      }
    }
  }
}

// gpt-oss's experts: the router's bias moves the choice, each product's bias and the clamped SwiGLU its output
// (checked to matter: without them the outputs differ).
TEST_F(MoeBlockTest, GptOssBiasesAndClampedSwigluMatchTheReference) {
  const auto out = run(gpt_oss_block(), 0, 5);
  double clamped = 0;
  for (std::size_t t = 0; t < 5; ++t) {
    const auto want = expected_gpt_oss(t);
    for (std::size_t i = 0; i < kHidden; ++i) {
      EXPECT_NEAR(out[t * kHidden + i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "token " << t << " value " << i;
    }
    const auto plain = expected(t, false);
    for (std::size_t i = 0; i < kHidden; ++i) clamped = std::max(clamped, std::abs(want[i] - plain[i]));
  }
  EXPECT_GT(clamped, 1.0) << "the biases and the activation changed nothing";
  for (std::size_t t = 0; t < 5; ++t) {
    const auto alone = run(gpt_oss_block(), t, 1);
    EXPECT_EQ(std::memcmp(alone.data(), out.data() + t * kHidden, kHidden * sizeof(float)), 0) << "token " << t;
  }
}

TEST_F(MoeBlockTest, ATokensOutputIsTheSameBitsAloneAndInABatch) {
  const auto batch = run(true, 0, 5);
  for (std::size_t t = 0; t < 5; ++t) {
    const auto alone = run(true, t, 1);
    EXPECT_EQ(std::memcmp(alone.data(), batch.data() + t * kHidden, kHidden * sizeof(float)), 0) << "token " << t;
  }
}

}  // namespace
}  // namespace engine::backend
