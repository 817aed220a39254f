// The constraint's mask in sampling: forbidden tokens out of greedy, filtered and seeded draws, the raw
// log-probabilities unchanged, every chosen token reported to the constraint, and the device step carrying
// the mask.

#include "engine/sampling/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/sampling/sampler.h"
#include "tests/support/allow_set_constraint.h"

namespace engine::sampling {
namespace {

using testing_support::AllowSetConstraint;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::shared_ptr<std::vector<std::int32_t>> accepted_list() {
  return std::make_shared<std::vector<std::int32_t>>();
}

std::vector<float> random_logits(std::size_t vocab, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-4.0f, 4.0f);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = distribution(generator);
  return logits;
}

TEST(ApplyTokenMask, ForbiddenTokensBecomeMinusInfinityAndTheAllowedAreCounted) {
  std::vector<float> logits(40, 1.5f);
  std::vector<std::uint32_t> mask(bitmask_words(logits.size()), 0u);
  mask[0] = (1u << 3) | (1u << 31);
  mask[1] = ~0u;  // tokens 32..39 allowed; the bits past 39 count for nothing
  EXPECT_EQ(apply_token_mask(logits, mask), 10u);
  for (std::size_t t = 0; t < logits.size(); ++t) {
    const bool allowed = t == 3 || t == 31 || t >= 32;
    EXPECT_EQ(logits[t], allowed ? 1.5f : -kInf) << t;
    EXPECT_EQ(mask_allows(mask, static_cast<std::int32_t>(t)), allowed) << t;
  }
  EXPECT_FALSE(mask_allows(mask, -1));
  EXPECT_FALSE(mask_allows(mask, 64));
}

TEST(ApplyTokenMask, RefusesAMaskShorterThanTheLogits) {
  std::vector<float> logits(33, 0.0f);
  std::vector<std::uint32_t> mask(1, ~0u);
  try {
    apply_token_mask(logits, mask);
    FAIL() << "a 1-word mask over 33 logits was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "a token bitmask of 1 words cannot cover 33 logits (2 needed)");
  }
}

TEST(ConstrainedSampling, GreedyPicksTheBestAllowedToken) {
  SamplingParams params;
  params.temperature = 0.0f;
  const auto accepted = accepted_list();
  SequenceSampler sampler(params, {}, AllowSetConstraint::only({1, 5, 7}, accepted));
  std::vector<float> logits = {0.0f, 1.0f, 0.0f, 9.0f, 0.0f, 2.0f, 8.0f, -1.0f};
  EXPECT_EQ(sampler.sample(logits).token, 5);
  EXPECT_EQ(logits[3], -kInf);  // the unconstrained argmax
  EXPECT_EQ(logits[5], 2.0f);
}

TEST(ConstrainedSampling, TheMaskComesAfterTheBiasAndBeforeTopK) {
  SamplingParams params;
  params.seed = 3;
  params.top_k = 1;  // the single best of the allowed tokens: top-k over the whole vocabulary would keep 0 only
  params.logit_bias = {{0, 100.0f}};
  const auto accepted = accepted_list();
  SequenceSampler sampler(params, {}, AllowSetConstraint::only({2, 4}, accepted));
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {5.0f, 0.0f, 1.0f, 0.0f, 0.5f};
    EXPECT_EQ(sampler.sample(logits).token, 2);
  }
}

TEST(ConstrainedSampling, SeededDrawsNeverTakeAForbiddenTokenAndRepeat) {
  const std::set<std::int32_t> allowed = {3, 17, 40, 41, 900};
  SamplingParams params;
  params.seed = 11;
  params.top_p = 0.95f;
  params.min_p = 0.01f;
  const auto run = [&] {
    const auto accepted = accepted_list();
    SequenceSampler sampler(params, {}, AllowSetConstraint::only(allowed, accepted));
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 400; ++i) {
      std::vector<float> logits = random_logits(1000, static_cast<std::uint32_t>(i));
      tokens.push_back(sampler.sample(logits).token);
    }
    return tokens;
  };
  const auto tokens = run();
  std::set<std::int32_t> seen(tokens.begin(), tokens.end());
  for (const auto t : seen) EXPECT_TRUE(allowed.contains(t)) << t;
  EXPECT_GE(seen.size(), 3u);  // a draw among the allowed, not a fixed pick
  EXPECT_EQ(run(), tokens);
}

TEST(ConstrainedSampling, LogprobsStayTheRawDistributions) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.logprobs = 3;
  const std::vector<float> raw = random_logits(64, 5);
  SequenceSampler plain(params, {});
  const auto accepted = accepted_list();
  SequenceSampler constrained(params, {}, AllowSetConstraint::only({10, 20}, accepted));
  std::vector<float> a = raw, b = raw;
  const auto free_choice = plain.sample(a);
  const auto masked = constrained.sample(b);
  ASSERT_EQ(masked.top.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(masked.top[i].token, free_choice.top[i].token);
    EXPECT_EQ(masked.top[i].logprob, free_choice.top[i].logprob);
  }
  // The chosen token's log-probability under the raw distribution, not renormalised over the two allowed.
  double normaliser = 0.0;
  for (const float v : raw) normaliser += std::exp(static_cast<double>(v));
  EXPECT_NEAR(masked.logprob, raw[static_cast<std::size_t>(masked.token)] - std::log(normaliser), 1e-4);
  EXPECT_EQ(masked.token, raw[10] > raw[20] ? 10 : 20);
}

TEST(ConstrainedSampling, TheConstraintSeesEveryChosenTokenAndEnds) {
  SamplingParams params;
  params.seed = 1;
  const auto accepted = accepted_list();
  SequenceSampler sampler(params, {}, AllowSetConstraint::only({1, 2, 3}, accepted, 4));
  std::vector<std::int32_t> chosen;
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(sampler.constraint_terminated());
    std::vector<float> logits = random_logits(16, static_cast<std::uint32_t>(i));
    chosen.push_back(sampler.sample(logits).token);
  }
  EXPECT_EQ(*accepted, chosen);
  EXPECT_TRUE(sampler.constraint_terminated());
}

TEST(ConstrainedSampling, AMaskAllowingNothingIsAnError) {
  const auto accepted = accepted_list();
  SequenceSampler sampler(SamplingParams{}, {}, AllowSetConstraint::only({}, accepted));
  std::vector<float> logits(8, 0.0f);
  try {
    sampler.sample(logits);
    FAIL() << "sampled with every token forbidden";
  } catch (const SamplingError& e) {
    EXPECT_STREQ(e.what(), "sample: the output constraint allows none of the 8 tokens");
  }
}

TEST(ConstrainedSampling, SetConstraintReplacesOrRemovesIt) {
  SamplingParams params;
  params.temperature = 0.0f;
  SequenceSampler sampler(params, {});
  EXPECT_EQ(sampler.constraint(), nullptr);
  EXPECT_FALSE(sampler.constraint_terminated());
  const auto accepted = accepted_list();
  sampler.set_constraint(AllowSetConstraint::only({0}, accepted));
  std::vector<float> logits = {0.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits).token, 0);
  sampler.set_constraint(nullptr);
  logits = {0.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits).token, 1);
}

TEST(ConstrainedDeviceStep, CarriesTheMaskAndRecordFeedsTheConstraint) {
  const auto accepted = accepted_list();
  SequenceSampler sampler(SamplingParams{}, {}, AllowSetConstraint::only({2, 33, 69}, accepted));
  const SamplingStep step = sampler.device_step(70);
  ASSERT_EQ(step.allowed.size(), 3u);
  EXPECT_EQ(step.allowed[0], 1u << 2);
  EXPECT_EQ(step.allowed[1], 1u << 1);
  EXPECT_EQ(step.allowed[2], 1u << 5);
  sampler.record(33);
  EXPECT_EQ(*accepted, std::vector<std::int32_t>{33});
  EXPECT_THROW(sampler.record(3), std::logic_error);
  EXPECT_EQ(*accepted, std::vector<std::int32_t>{33});

  SequenceSampler plain(SamplingParams{}, {});
  EXPECT_TRUE(plain.device_step(70).allowed.empty());
}

}  // namespace
}  // namespace engine::sampling
