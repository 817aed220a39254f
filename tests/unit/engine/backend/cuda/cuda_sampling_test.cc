// Sampling on the GPU against SequenceSampler (the host's, the reference): greedy choices, bias and
// penalties and raw log-probabilities exactly as on the host; draws that stay inside the host's top-k /
// top-p / min-p set and follow its distribution; seeded streams that repeat. Skipped without a GPU.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/sampling/sampler.h"
#include "tests/support/allow_set_constraint.h"
#include "tests/support/require_gpu.h"

namespace engine::backend {
namespace {

using sampling::SampledToken;
using sampling::SamplingParams;
using sampling::SequenceSampler;

constexpr std::size_t kVocab = 1000;

class CudaSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing_support::no_gpu_reason().empty()) return;
    gpu_ = make_cuda_backend({});
    KvCacheShape shape;
    shape.num_layers = 1;
    shape.num_kv_heads = 1;
    shape.head_dim = 64;
    shape.block_size = 16;
    shape.num_blocks = 4;
    RopeSpec rope;
    rope.inv_freq.assign(32, 1.0);
    gpu_->init_cache(shape, rope);
  }

  std::vector<float> random_logits(std::size_t rows, float scale = 3.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(rows * kVocab);
    for (auto& x : v) x = dist(rng_);
    return v;
  }

  // Device sampling of `rows` rows of logits, samplers[i] choosing row i (each records its token).
  std::vector<SampledToken> sample_on_gpu(const std::vector<float>& logits, std::vector<SequenceSampler*> samplers,
                                          std::size_t vocab = kVocab) {
    const std::size_t rows = samplers.size();
    gpu_->begin_step({});
    const Tensor t = gpu_->alloc(rows, vocab);
    EXPECT_EQ(cudaMemcpy(t.data, logits.data(), rows * vocab * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<sampling::SamplingStep> steps;
    for (auto* s : samplers) steps.push_back(s->device_step(vocab));
    std::vector<SampledToken> out(rows);
    gpu_->sample(t, steps, out);
    for (std::size_t i = 0; i < rows; ++i) samplers[i]->record(out[i].token);
    return out;
  }

  std::mt19937 rng_{std::random_device{}()};
  std::unique_ptr<Backend> gpu_;
};

// Greedy choices after bias and every penalty, over several steps (so output counts matter), with the raw
// distribution's log-probabilities, equal the host sampler's.
TEST_F(CudaSamplingTest, GreedyWithBiasPenaltiesAndLogprobsEqualsTheHost) {
  REQUIRE_GPU();
  const std::vector<std::int32_t> prompt = {5, 17, 17, 300, 999};
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0;
  params[0].logprobs = 5;
  params[1].temperature = 0;
  params[1].repetition_penalty = 1.7f;
  params[1].logit_bias = {{3, 4.0f}, {17, -2.0f}, {3, 9.0f}};
  params[1].logprobs = 0;
  params[2].temperature = 0;
  params[2].frequency_penalty = 1.5f;
  params[2].presence_penalty = 0.8f;
  params[2].logprobs = 20;
  params[3].temperature = 0;
  params[3].repetition_penalty = 0.6f;
  params[3].frequency_penalty = -0.5f;
  params[3].logit_bias = {{999, 150.0f}};  // clamped to 100
  std::vector<std::unique_ptr<SequenceSampler>> host, device;
  std::vector<SequenceSampler*> device_ptrs;
  for (const auto& p : params) {
    host.push_back(std::make_unique<SequenceSampler>(p, prompt));
    device.push_back(std::make_unique<SequenceSampler>(p, prompt));
    device_ptrs.push_back(device.back().get());
  }
  for (int step = 0; step < 6; ++step) {
    // Few distinct values, so penalties and ties decide.
    auto logits = random_logits(params.size(), 1.0f);
    for (auto& x : logits) x = std::round(x * 4) / 4;
    const auto got = sample_on_gpu(logits, device_ptrs);
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(i * kVocab),
                             logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * kVocab));
      const auto want = host[i]->sample(row);
      EXPECT_EQ(got[i].token, want.token) << "row " << i << ", step " << step;
      if (params[i].logprobs >= 0) {
        EXPECT_NEAR(got[i].logprob, want.logprob, 1e-5) << "row " << i << ", step " << step;
        ASSERT_EQ(got[i].top.size(), want.top.size()) << "row " << i;
        for (std::size_t n = 0; n < want.top.size(); ++n) {
          EXPECT_EQ(got[i].top[n].token, want.top[n].token) << "row " << i << ", top " << n;
          EXPECT_NEAR(got[i].top[n].logprob, want.top[n].logprob, 1e-5) << "row " << i << ", top " << n;
        }
      }
    }
  }
}

// Rows with a constraint beside rows without, over a vocabulary that ends inside a mask word: greedy rows
// take the host's choice (the best allowed token), drawing rows never take a forbidden one, the raw
// log-probabilities are the host's, and each constraint sees its own row's tokens.
TEST_F(CudaSamplingTest, TheConstraintMaskRestrictsGreedyAndDrawnRowsOnly) {
  REQUIRE_GPU();
  constexpr std::size_t kOddVocab = 1003;
  const std::set<std::int32_t> allowed = {0, 31, 32, 500, 1002};
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0;
  params[0].logprobs = 4;
  params[1].temperature = 0;  // unconstrained
  params[2].seed = 5;
  params[2].top_k = 3;
  params[3].seed = 6;
  params[3].top_p = 0.9f;
  std::vector<std::shared_ptr<std::vector<std::int32_t>>> accepted;
  std::vector<std::unique_ptr<SequenceSampler>> host, device;
  std::vector<SequenceSampler*> device_ptrs;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto make = [&] {
      accepted.push_back(std::make_shared<std::vector<std::int32_t>>());
      return i == 1 ? nullptr : testing_support::AllowSetConstraint::only(allowed, accepted.back());
    };
    host.push_back(std::make_unique<SequenceSampler>(params[i], std::vector<std::int32_t>{}, make()));
    device.push_back(std::make_unique<SequenceSampler>(params[i], std::vector<std::int32_t>{}, make()));
    device_ptrs.push_back(device.back().get());
  }
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int step = 0; step < 40; ++step) {
    std::vector<float> logits(params.size() * kOddVocab);
    for (auto& x : logits) x = dist(rng_);
    const auto got = sample_on_gpu(logits, device_ptrs, kOddVocab);
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(i * kOddVocab),
                             logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * kOddVocab));
      const auto want = host[i]->sample(row);
      if (i != 1) {
        EXPECT_TRUE(allowed.contains(got[i].token)) << "row " << i << " drew " << got[i].token;
      }
      if (params[i].temperature == 0) {
        EXPECT_EQ(got[i].token, want.token) << "row " << i << ", step " << step;
      }
    }
    ASSERT_EQ(got[0].top.size(), 4u);
    std::vector<float> row0(logits.begin(), logits.begin() + kOddVocab);
    SequenceSampler raw(params[0], std::vector<std::int32_t>{});
    const auto unconstrained = raw.sample(row0);
    for (std::size_t n = 0; n < 4; ++n) {
      EXPECT_EQ(got[0].top[n].token, unconstrained.top[n].token);
      EXPECT_NEAR(got[0].top[n].logprob, unconstrained.top[n].logprob, 1e-5);
    }
  }
  // accepted[2 * i + 1] is device row i's constraint.
  EXPECT_EQ(accepted[1]->size(), 40u);
  EXPECT_EQ(accepted[7]->size(), 40u);
}

// A vocabulary that is not a multiple of 4: the first row's scan takes 16-byte loads and a scalar tail, the
// rows after it (not 16-byte aligned) scalar loads only. The best logit sits in the tail, in the middle of
// a quad, or tied with an earlier token (the earlier wins), with and without log-probabilities and bias.
TEST_F(CudaSamplingTest, GreedyScansAnyVocabularyWidth) {
  REQUIRE_GPU();
  constexpr std::size_t kOddVocab = 1003;
  const std::vector<std::int32_t> prompt = {5};
  std::vector<SamplingParams> params(4);
  for (auto& p : params) p.temperature = 0;
  params[1].logprobs = 3;
  params[3].logit_bias = {{7, 0.5f}};
  std::vector<float> logits(params.size() * kOddVocab);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& x : logits) x = dist(rng_);
  logits[0 * kOddVocab + 1002] = 50.0f;                                      // the last token, in the tail
  logits[1 * kOddVocab + 501] = 50.0f;                                       // misaligned row
  logits[2 * kOddVocab + 6] = logits[2 * kOddVocab + 999] = 50.0f;           // a tie: token 6
  logits[3 * kOddVocab + 7] = 49.75f, logits[3 * kOddVocab + 1001] = 50.0f;  // bias makes 7 the best
  std::vector<std::unique_ptr<SequenceSampler>> host, device;
  std::vector<SequenceSampler*> device_ptrs;
  for (const auto& p : params) {
    host.push_back(std::make_unique<SequenceSampler>(p, prompt));
    device.push_back(std::make_unique<SequenceSampler>(p, prompt));
    device_ptrs.push_back(device.back().get());
  }
  const auto got = sample_on_gpu(logits, device_ptrs, kOddVocab);
  const std::int32_t expected[] = {1002, 501, 6, 7};
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(i * kOddVocab),
                           logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * kOddVocab));
    const auto want = host[i]->sample(row);
    EXPECT_EQ(want.token, expected[i]) << "row " << i << " (the host)";
    EXPECT_EQ(got[i].token, expected[i]) << "row " << i;
    if (params[i].logprobs >= 0) {
      EXPECT_NEAR(got[i].logprob, want.logprob, 1e-5) << "row " << i;
    }
  }
}

// The tokens top-k, min-p and top-p leave, computed plainly: sort, cut.
std::set<std::int32_t> allowed(const float* logits, const SamplingParams& p) {
  std::vector<std::int32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
  const float max = logits[order[0]];
  std::vector<std::int32_t> kept;
  for (std::size_t r = 0; r < kVocab; ++r) {
    const auto t = order[r];
    if (p.top_k > 0 && logits[t] < logits[order[static_cast<std::size_t>(p.top_k) - 1]]) break;
    if ((logits[t] - max) / p.temperature < std::log(p.min_p)) break;
    kept.push_back(t);
  }
  double total = 0;
  for (const auto t : kept) total += std::exp((logits[t] - max) / p.temperature);
  std::set<std::int32_t> out;
  double mass = 0;
  for (const auto t : kept) {
    out.insert(t);
    mass += std::exp((logits[t] - max) / p.temperature);
    if (mass >= p.top_p * total) break;
  }
  return out;
}

TEST_F(CudaSamplingTest, DrawsStayInsideTopKTopPAndMinP) {
  REQUIRE_GPU();
  std::vector<SamplingParams> cases(4);
  cases[0].temperature = 0.7f;
  cases[0].top_k = 5;
  cases[1].temperature = 1.3f;
  cases[1].top_p = 0.6f;
  cases[2].temperature = 1.0f;
  cases[2].min_p = 0.2f;
  cases[3].temperature = 0.9f;
  cases[3].top_k = 50;
  cases[3].top_p = 0.8f;
  cases[3].min_p = 0.01f;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto logits = random_logits(1);
    const auto want = allowed(logits.data(), cases[c]);
    SequenceSampler sampler(cases[c], {});
    std::set<std::int32_t> seen;
    for (int draw = 0; draw < 300; ++draw) {
      const auto got = sample_on_gpu(logits, {&sampler});
      EXPECT_TRUE(want.contains(got[0].token)) << "case " << c << ": token " << got[0].token << " was cut";
      seen.insert(got[0].token);
    }
    EXPECT_GT(seen.size(), std::min<std::size_t>(want.size(), 2) - 1) << "case " << c << " never varied";
  }
}

// 4000 draws at top-k 4: each token's frequency within 4.5 standard deviations of its renormalised
// probability.
TEST_F(CudaSamplingTest, DrawsFollowTheRenormalisedDistribution) {
  REQUIRE_GPU();
  const auto one = random_logits(1, 1.0f);
  constexpr std::size_t kDraws = 4000;
  std::vector<float> logits;
  for (std::size_t i = 0; i < kDraws; ++i) logits.insert(logits.end(), one.begin(), one.end());
  SamplingParams p;
  p.top_k = 4;
  std::vector<std::unique_ptr<SequenceSampler>> samplers;
  std::vector<SequenceSampler*> ptrs;
  for (std::size_t i = 0; i < kDraws; ++i) {
    p.seed = i;
    samplers.push_back(std::make_unique<SequenceSampler>(p, std::vector<std::int32_t>{}));
    ptrs.push_back(samplers.back().get());
  }
  const auto got = sample_on_gpu(logits, ptrs);
  std::map<std::int32_t, int> counts;
  for (const auto& g : got) ++counts[g.token];
  std::vector<std::int32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return one[a] > one[b]; });
  double total = 0;
  for (int r = 0; r < 4; ++r) total += std::exp(one[order[r]] - one[order[0]]);
  int in_top = 0;
  for (int r = 0; r < 4; ++r) {
    const double prob = std::exp(one[order[r]] - one[order[0]]) / total;
    const double expected = prob * kDraws;
    const double sigma = std::sqrt(kDraws * prob * (1 - prob));
    EXPECT_NEAR(counts[order[r]], expected, 4.5 * sigma + 1) << "rank " << r;
    in_top += counts[order[r]];
  }
  EXPECT_EQ(in_top, static_cast<int>(kDraws));
}

TEST_F(CudaSamplingTest, SeededSequencesRepeatTheirDraws) {
  REQUIRE_GPU();
  SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 1234;
  SequenceSampler a(p, {}), b(p, {});
  p.seed = 4321;
  SequenceSampler c(p, {});
  bool differs = false;
  for (int step = 0; step < 20; ++step) {
    const auto logits = random_logits(1, 0.5f);
    std::vector<float> three;
    for (int i = 0; i < 3; ++i) three.insert(three.end(), logits.begin(), logits.end());
    const auto got = sample_on_gpu(three, {&a, &b, &c});
    EXPECT_EQ(got[0].token, got[1].token) << "step " << step;
    differs = differs || got[0].token != got[2].token;
  }
  EXPECT_TRUE(differs) << "another seed drew the same 20 tokens";
}

}  // namespace
}  // namespace engine::backend
