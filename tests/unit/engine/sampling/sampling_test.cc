#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"

namespace engine::sampling {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;

constexpr std::size_t kQwenVocab = 151936;

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SamplingParams seeded(std::uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

std::vector<float> logits_of(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (const double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Draws `n` tokens from the same logits (a fresh copy each step; no penalties, so steps are independent).
std::vector<std::size_t> histogram(SequenceSampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<std::size_t> counts(logits.size());
  for (int i = 0; i < n; ++i) {
    std::vector<float> step = logits;
    ++counts.at(static_cast<std::size_t>(sampler.sample(step).token));
  }
  return counts;
}

std::set<std::int32_t> drawn(const std::vector<std::size_t>& counts) {
  std::set<std::int32_t> tokens;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) tokens.insert(static_cast<std::int32_t>(i));
  }
  return tokens;
}

// Pearson's statistic of observed counts against expected probabilities.
double chi_square(const std::vector<std::size_t>& counts, const std::vector<double>& expected) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  double statistic = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    statistic += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return statistic;
}

std::vector<double> normalised(std::vector<double> weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights) w /= total;
  return weights;
}

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (const float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v) - max);
  std::vector<double> out;
  for (const float v : logits) out.push_back(static_cast<double>(v) - max - std::log(sum));
  return out;
}

std::vector<float> random_logits(std::size_t vocab, std::uint32_t seed, float spread = 4.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-spread, spread);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = distribution(generator);
  return logits;
}

std::string error_of(const SamplingParams& params, std::size_t vocab = 100) {
  try {
    validate(params, vocab);
  } catch (const SamplingError& e) {
    return e.what();
  }
  return "";
}

// ---- greedy ----------------------------------------------------------------------------------------------------

TEST(Greedy, PicksTheArgmax) {
  SequenceSampler sampler(greedy(), {});
  std::vector<float> logits{0.1f, 3.0f, -1.0f, 2.9f};
  EXPECT_EQ(sampler.sample(logits).token, 1);
  std::vector<float> last{-5.0f, -4.0f, -3.0f, -2.5f};
  EXPECT_EQ(sampler.sample(last).token, 3);
}

TEST(Greedy, TiesGoToTheLowestId) {
  SequenceSampler sampler(greedy(), {});
  std::vector<float> logits{1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  EXPECT_EQ(sampler.sample(logits).token, 1);
}

TEST(Greedy, SkipsNaNAndInfinity) {
  SequenceSampler sampler(greedy(), {});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits{nan, -inf, 0.5f, nan, 0.25f};
  EXPECT_EQ(sampler.sample(logits).token, 2);
}

TEST(Greedy, IgnoresTheSeed) {
  auto a_params = greedy();
  a_params.seed = 1;
  auto b_params = greedy();
  b_params.seed = 2;
  SequenceSampler a(a_params, {});
  SequenceSampler b(b_params, {});
  const auto logits = random_logits(1000, 5);
  for (int i = 0; i < 5; ++i) {
    auto la = logits;
    auto lb = logits;
    EXPECT_EQ(a.sample(la).token, b.sample(lb).token);
  }
}

// ---- temperature and the draw ----------------------------------------------------------------------------------

// With 4 degrees of freedom, chi-square exceeds 18.47 with probability 0.001; the seeds are fixed, so each check
// passes or fails the same way every run.
constexpr double kChiSquare4Dof = 18.47;
const std::vector<double> kFive{0.5, 0.25, 0.15, 0.07, 0.03};

TEST(Temperature, OneDrawsTheModelDistribution) {
  SequenceSampler sampler(seeded(1234), {});
  const auto counts = histogram(sampler, logits_of(kFive), 20000);
  EXPECT_LT(chi_square(counts, kFive), kChiSquare4Dof);
  // The bound has teeth: the same counts are far from a slightly different distribution.
  EXPECT_GT(chi_square(counts, {0.47, 0.27, 0.15, 0.08, 0.03}), kChiSquare4Dof);
}

TEST(Temperature, ScalesTheLogits) {
  for (const double temperature : {0.5, 2.0}) {
    SCOPED_TRACE(temperature);
    auto params = seeded(99);
    params.temperature = static_cast<float>(temperature);
    SequenceSampler sampler(params, {});
    const auto counts = histogram(sampler, logits_of(kFive), 20000);
    std::vector<double> expected;
    for (const double p : kFive) expected.push_back(std::pow(p, 1.0 / temperature));
    expected = normalised(expected);
    EXPECT_LT(chi_square(counts, expected), kChiSquare4Dof);
    EXPECT_GT(chi_square(counts, kFive), kChiSquare4Dof);
  }
}

TEST(Temperature, BelowTheMinimumIsRaisedToItNotGreedy) {
  // vLLM raises 0 < T < 0.01 to 0.01: T = 1e-6 samples exactly as T = 0.01 does.
  auto tiny = seeded(7);
  tiny.temperature = 1e-6f;
  auto minimum = seeded(7);
  minimum.temperature = kMinTemperature;
  SequenceSampler a(tiny, {});
  SequenceSampler b(minimum, {});
  const std::vector<float> logits{0.0f, 0.01f};  // at T = 0.01, token 0 has probability 1 / (1 + e)
  std::vector<std::size_t> counts(2);
  for (int i = 0; i < 400; ++i) {
    auto la = logits;
    auto lb = logits;
    const auto token = a.sample(la).token;
    ASSERT_EQ(token, b.sample(lb).token);
    ++counts[static_cast<std::size_t>(token)];
  }
  EXPECT_GT(counts[0], 60u);
  EXPECT_GT(counts[1], 200u);
}

// ---- top-k, top-p, min-p ---------------------------------------------------------------------------------------

TEST(TopK, KeepsTheKMostLikely) {
  auto params = seeded(11);
  params.top_k = 2;
  SequenceSampler sampler(params, {});
  const auto counts = histogram(sampler, {1.0f, 4.0f, 3.0f, 2.0f, 0.0f}, 3000);
  EXPECT_EQ(drawn(counts), (std::set<std::int32_t>{1, 2}));
  // Renormalised over the two: e^4 : e^3.
  const double p1 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_LT(chi_square({counts[1], counts[2]}, {p1, 1.0 - p1}), 10.83);  // 1 dof, p = 0.001
}

TEST(TopK, KeepsTiesAtTheBoundary) {
  auto params = seeded(12);
  params.top_k = 2;
  SequenceSampler sampler(params, {});
  const auto counts = histogram(sampler, {5.0f, 3.0f, 1.0f, 3.0f}, 3000);
  EXPECT_EQ(drawn(counts), (std::set<std::int32_t>{0, 1, 3}));
}

TEST(TopK, MinusOneZeroAndAboveTheVocabularyKeepEverything) {
  for (const int k : {-1, 0, 5, 1000}) {
    SCOPED_TRACE(k);
    auto params = seeded(13);
    params.top_k = k;
    SequenceSampler sampler(params, {});
    EXPECT_EQ(drawn(histogram(sampler, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, 500)).size(), 5u);
  }
}

TEST(TopK, ScatteredAmongAThousandKeepsExactlyTheBest) {
  // 100 kept of 2000 with distinct logits scattered over the ids, so the selection is not handed sorted input.
  std::vector<float> logits(2000);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = -static_cast<float>((i * 7919) % 2000) * 0.001f;
  auto params = seeded(14);
  params.top_k = 100;
  SequenceSampler sampler(params, {});
  std::set<std::int32_t> expected;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if ((i * 7919) % 2000 < 100) expected.insert(static_cast<std::int32_t>(i));
  }
  EXPECT_EQ(drawn(histogram(sampler, logits, 20000)), expected);
}

TEST(TopP, KeepsTheSmallestSetReachingP) {
  const std::vector<double> probabilities{0.1, 0.4, 0.2, 0.3};  // ranked 1, 3, 2, 0
  const struct {
    float top_p;
    std::set<std::int32_t> kept;
  } cases[] = {{0.3f, {1}}, {0.65f, {1, 3}}, {0.75f, {1, 3, 2}}, {0.95f, {1, 3, 2, 0}}, {1.0f, {0, 1, 2, 3}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.top_p);
    auto params = seeded(21);
    params.top_p = c.top_p;
    SequenceSampler sampler(params, {});
    EXPECT_EQ(drawn(histogram(sampler, logits_of(probabilities), 3000)), c.kept);
  }
}

TEST(TopP, DrawsTheRenormalisedKeptDistribution) {
  auto params = seeded(22);
  params.top_p = 0.75f;
  SequenceSampler sampler(params, {});
  const auto counts = histogram(sampler, logits_of({0.4, 0.3, 0.2, 0.1}), 20000);
  EXPECT_EQ(counts[3], 0u);
  EXPECT_LT(chi_square({counts[0], counts[1], counts[2]}, normalised({0.4, 0.3, 0.2})), 13.82);  // 2 dof
}

// What top-p keeps by a full sort (ties ranked by lower id), in double; `margin` is how far past top_p the
// kept mass reaches, so a test can rule out a cut that rounding could move.
struct TopPReference {
  std::set<std::int32_t> kept;
  double margin = 0.0;
};

TopPReference top_p_reference(const std::vector<float>& logits, double top_p) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  const auto logprobs = log_softmax(logits);
  TopPReference reference;
  double mass = 0.0;
  for (const std::int32_t token : order) {
    reference.kept.insert(token);
    mass += std::exp(logprobs[static_cast<std::size_t>(token)]);
    if (mass >= top_p) break;
  }
  reference.margin = mass - top_p;
  return reference;
}

TEST(TopP, CutDeepInAWideVocabularyMatchesAFullSort) {
  // 300 heavy tokens of distinct, close logits scattered over 2000 ids, the rest negligible: the cut falls
  // among many close tokens.
  std::vector<float> logits(2000, -30.0f);
  for (std::size_t j = 0; j < 300; ++j) logits[(j * 7919) % 2000] = -static_cast<float>(j) * 0.001f;
  const auto reference = top_p_reference(logits, 0.5);
  ASSERT_GT(reference.margin, 1e-4);  // not a rounding-sensitive cut
  ASSERT_GT(reference.kept.size(), 128u);

  auto params = seeded(23);
  params.top_p = 0.5f;
  SequenceSampler sampler(params, {});
  EXPECT_EQ(drawn(histogram(sampler, logits, 20000)), reference.kept);
}

TEST(TopP, CutInsideALargeTieGroupMatchesAFullSort) {
  // 50 levels 0.2 apart, 100 tokens each, interleaved over the ids: levels 0-2 are kept whole and the cut
  // falls 80 tokens into level 3, so the 100 tied tokens there are ranked by id past the first chunk.
  std::vector<float> logits(5000);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = -0.2f * static_cast<float>(i % 50);
  const auto reference = top_p_reference(logits, 0.53);
  ASSERT_GT(reference.margin, 1e-4);
  ASSERT_EQ(reference.kept.size(), 380u);

  auto params = seeded(25);
  params.top_p = 0.53f;
  SequenceSampler sampler(params, {});
  EXPECT_EQ(drawn(histogram(sampler, logits, 20000)), reference.kept);
}

TEST(TopP, AppliesToTheTopKSurvivorsRenormalised) {
  // After top-k = 2 the two left are 4/7 and 3/7, so top_p = 0.55 keeps only the first (over the full
  // distribution 0.4 < 0.55 would keep two).
  auto params = seeded(24);
  params.top_k = 2;
  params.top_p = 0.55f;
  SequenceSampler sampler(params, {});
  EXPECT_EQ(drawn(histogram(sampler, logits_of({0.4, 0.3, 0.2, 0.1}), 2000)), (std::set<std::int32_t>{0}));
}

TEST(MinP, DropsTokensBelowAFractionOfTheMostLikely) {
  const std::vector<double> probabilities{0.5, 0.3, 0.12, 0.08};
  const struct {
    float min_p;
    std::set<std::int32_t> kept;
  } cases[] = {{0.0f, {0, 1, 2, 3}}, {0.2f, {0, 1, 2}}, {0.5f, {0, 1}}, {1.0f, {0}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.min_p);
    auto params = seeded(31);
    params.min_p = c.min_p;
    SequenceSampler sampler(params, {});
    EXPECT_EQ(drawn(histogram(sampler, logits_of(probabilities), 3000)), c.kept);
  }
}

TEST(MinP, ComparesTemperatureScaledProbabilities) {
  // Relative to the most likely: 0.6, 0.24, 0.16 at T = 1; their square roots 0.77, 0.49, 0.4 at T = 2.
  const auto logits = logits_of({0.5, 0.3, 0.12, 0.08});
  for (const auto& [temperature, kept] : std::map<float, std::set<std::int32_t>>{{1.0f, {0, 1}}, {2.0f, {0, 1, 2}}}) {
    SCOPED_TRACE(temperature);
    auto params = seeded(32);
    params.min_p = 0.45f;
    params.temperature = temperature;
    SequenceSampler sampler(params, {});
    EXPECT_EQ(drawn(histogram(sampler, logits, 3000)), kept);
  }
}

TEST(MinP, RunsBeforeTopP) {
  // vLLM's V1 order: min_p = 0.5 drops 0.2 (< 0.25), leaving 0.625 / 0.375, so top_p = 0.6 keeps token 0 alone
  // (top-p first would keep 0 and 1).
  auto params = seeded(33);
  params.min_p = 0.5f;
  params.top_p = 0.6f;
  SequenceSampler sampler(params, {});
  EXPECT_EQ(drawn(histogram(sampler, logits_of({0.5, 0.3, 0.2}), 2000)), (std::set<std::int32_t>{0}));
}

// ---- penalties and bias ----------------------------------------------------------------------------------------

TEST(Penalties, RepetitionDividesPositiveAndMultipliesNegativeLogits) {
  auto params = greedy();
  params.repetition_penalty = 1.5f;
  const std::vector<std::int32_t> prompt{0, 2, 0};
  SequenceSampler sampler(params, prompt);
  std::vector<float> logits{2.0f, 1.8f, -1.0f, -1.2f};
  EXPECT_EQ(sampler.sample(logits).token, 1);  // 2 / 1.5 < 1.8
  EXPECT_THAT(logits, ElementsAre(FloatEq(2.0f / 1.5f), 1.8f, FloatEq(-1.5f), -1.2f));

  SequenceSampler negative(params, prompt);
  std::vector<float> below{-5.0f, -5.0f, -1.0f, -1.2f};
  EXPECT_EQ(negative.sample(below).token, 3);  // -1 * 1.5 < -1.2
}

TEST(Penalties, RepetitionCoversOutputTokensOnce) {
  auto params = greedy();
  params.repetition_penalty = 2.0f;
  SequenceSampler sampler(params, std::vector<std::int32_t>{5});
  std::vector<float> first{3.0f, 2.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  EXPECT_EQ(sampler.sample(first).token, 0);
  std::vector<float> second{3.0f, 2.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  EXPECT_EQ(sampler.sample(second).token, 1);  // 3 / 2 < 2
  EXPECT_THAT(second, ElementsAre(1.5f, 2.0f, 0.0f, 0.0f, 0.0f, 0.5f));

  // A token both in the prompt and the output is divided once, not twice.
  SequenceSampler both(params, std::vector<std::int32_t>{0});
  std::vector<float> a{3.0f, 1.0f};
  EXPECT_EQ(both.sample(a).token, 0);  // 1.5 > 1
  std::vector<float> b{3.0f, 1.0f};
  EXPECT_EQ(both.sample(b).token, 0);
  EXPECT_EQ(b[0], 1.5f);
}

TEST(Penalties, FrequencyGrowsWithTheCount) {
  auto params = greedy();
  params.frequency_penalty = 0.1f;
  SequenceSampler sampler(params, {});
  std::vector<std::int32_t> tokens;
  std::vector<float> last;
  for (int i = 0; i < 4; ++i) {
    last = {1.0f, 0.75f, 0.0f};
    tokens.push_back(sampler.sample(last).token);
  }
  EXPECT_THAT(tokens, ElementsAre(0, 0, 0, 1));  // 1 - 0.1 * 3 < 0.75
  EXPECT_FLOAT_EQ(last[0], 0.7f);
}

TEST(Penalties, PresenceIsPaidOnce) {
  for (const auto& [presence, expected] :
       std::map<float, std::vector<std::int32_t>>{{0.2f, {0, 0, 0}}, {0.3f, {0, 1, 0}}}) {
    SCOPED_TRACE(presence);
    auto params = greedy();
    params.presence_penalty = presence;
    SequenceSampler sampler(params, {});
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 3; ++i) {
      std::vector<float> logits{1.0f, 0.75f, 0.0f};
      tokens.push_back(sampler.sample(logits).token);
      if (i == 2) {
        EXPECT_EQ(logits[0], 1.0f - presence);
      }
    }
    EXPECT_EQ(tokens, expected);
  }
}

TEST(Penalties, FrequencyAndPresenceIgnoreThePrompt) {
  auto params = greedy();
  params.frequency_penalty = 2.0f;
  params.presence_penalty = 2.0f;
  SequenceSampler sampler(params, std::vector<std::int32_t>{0, 0, 0});
  std::vector<float> logits{1.0f, 0.5f};
  EXPECT_EQ(sampler.sample(logits).token, 0);
  EXPECT_THAT(logits, ElementsAre(1.0f, 0.5f));
}

TEST(Penalties, ApplyAfterTheBiasInOrder) {
  // Bias, then repetition (of the biased logit), then frequency and presence.
  auto params = greedy();
  params.logit_bias = {{0, -2.0f}};
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  SequenceSampler sampler(params, std::vector<std::int32_t>{0});
  std::vector<float> first{1.0f, -10.0f, 0.0f};
  EXPECT_EQ(sampler.sample(first).token, 2);
  EXPECT_EQ(first[0], (1.0f - 2.0f) * 2.0f);  // -2, not 1 / 2 - 2
  std::vector<float> second{1.0f, -10.0f, 4.0f};
  EXPECT_EQ(sampler.sample(second).token, 2);
  EXPECT_FLOAT_EQ(second[2], 1.25f);
}

TEST(LogitBias, ForcesAndForbidsTokens) {
  auto params = seeded(41);
  params.logit_bias = {{3, 100.0f}};
  SequenceSampler forced(params, {});
  const auto logits = random_logits(50, 1);
  EXPECT_EQ(drawn(histogram(forced, logits, 1000)), (std::set<std::int32_t>{3}));

  auto banned = greedy();
  const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  banned.logit_bias = {{best, -100.0f}};
  SequenceSampler sampler(banned, {});
  auto step = logits;
  EXPECT_NE(sampler.sample(step).token, best);
}

TEST(LogitBias, ClampsToOpenAIRangeAndTheLastValueForAnIdWins) {
  auto params = greedy();
  params.logit_bias = {{0, 1000.0f}, {1, -1e30f}, {2, 5.0f}, {2, -7.0f}};
  SequenceSampler sampler(params, {});
  std::vector<float> logits{0.5f, 0.5f, 0.5f, 0.5f};
  sampler.sample(logits);
  EXPECT_THAT(logits, ElementsAre(100.5f, -99.5f, -6.5f, 0.5f));
}

// ---- seeds -----------------------------------------------------------------------------------------------------

TEST(Seed, SameSeedSameTokensWhateverIsInterleaved) {
  const auto logits = random_logits(1000, 3, 2.0f);
  SequenceSampler a(seeded(2024), {});
  SequenceSampler b(seeded(2024), {});
  SequenceSampler other(seeded(1), {});
  std::vector<std::int32_t> from_a;
  std::vector<std::int32_t> from_b;
  for (int i = 0; i < 200; ++i) {
    auto la = logits;
    from_a.push_back(a.sample(la).token);
    for (int j = 0; j < i % 3; ++j) {
      auto lo = logits;
      other.sample(lo);
    }
  }
  for (int i = 0; i < 200; ++i) {
    auto lb = logits;
    from_b.push_back(b.sample(lb).token);
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_GT(std::set<std::int32_t>(from_a.begin(), from_a.end()).size(), 50u);  // really random draws
}

TEST(Seed, DifferentSeedsAndNoSeedDiffer) {
  const auto logits = random_logits(1000, 4, 0.5f);
  const auto run = [&](SamplingParams params) {
    SequenceSampler sampler(std::move(params), {});
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 100; ++i) {
      auto step = logits;
      tokens.push_back(sampler.sample(step).token);
    }
    return tokens;
  };
  EXPECT_NE(run(seeded(1)), run(seeded(2)));
  EXPECT_NE(run(SamplingParams{}), run(SamplingParams{}));  // 100 draws of ~1000 tokens: a match is impossible
}

// ---- log-probabilities -----------------------------------------------------------------------------------------

TEST(Logprobs, AreTheRawDistributionsNotTheProcessedOne) {
  const auto raw = random_logits(1000, 9);
  const auto expected = log_softmax(raw);
  auto params = seeded(51);
  params.logprobs = 5;
  params.temperature = 0.7f;
  params.top_k = 10;
  params.repetition_penalty = 1.3f;
  params.frequency_penalty = 0.5f;
  params.logit_bias = {{17, 30.0f}};  // forces token 17 without changing its reported logprob
  SequenceSampler sampler(params, std::vector<std::int32_t>{1, 2, 17});

  std::vector<std::size_t> order(raw.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return raw[a] > raw[b]; });

  for (int step = 0; step < 3; ++step) {
    auto logits = raw;
    const auto result = sampler.sample(logits);
    ASSERT_EQ(result.token, 17);
    EXPECT_NEAR(result.logprob, expected[17], 1e-5);
    ASSERT_EQ(result.top.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(result.top[i].token, static_cast<std::int32_t>(order[i]));
      EXPECT_NEAR(result.top[i].logprob, expected[order[i]], 1e-5);
    }
  }
}

TEST(Logprobs, TiesRankTheLowerIdFirst) {
  auto params = greedy();
  params.logprobs = 3;
  SequenceSampler sampler(params, {});
  std::vector<float> logits{1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  const auto result = sampler.sample(logits);
  ASSERT_EQ(result.top.size(), 3u);
  EXPECT_EQ(result.top[0].token, 1);
  EXPECT_EQ(result.top[1].token, 3);
  EXPECT_EQ(result.top[2].token, 4);
  EXPECT_EQ(result.top[0].logprob, result.top[2].logprob);
}

TEST(Logprobs, CountsZeroNoneAndMoreThanTheVocabulary) {
  const std::vector<float> raw{0.0f, 1.0f, 2.0f};
  const auto expected = log_softmax(raw);
  for (const int n : {-1, 0, 20}) {
    SCOPED_TRACE(n);
    auto params = greedy();
    params.logprobs = n;
    SequenceSampler sampler(params, {});
    auto logits = raw;
    const auto result = sampler.sample(logits);
    EXPECT_EQ(result.token, 2);
    EXPECT_EQ(result.top.size(), n == 20 ? 3u : 0u);
    if (n >= 0) {
      EXPECT_NEAR(result.logprob, expected[2], 1e-6);
    }
  }
}

// ---- validation ------------------------------------------------------------------------------------------------

TEST(Validate, AcceptsTheDefaultsAndTheEdgesOfEachRange) {
  EXPECT_EQ(error_of(SamplingParams{}), "");
  SamplingParams edges;
  edges.temperature = 0.0f;
  edges.top_p = 1e-6f;
  edges.top_k = -1;
  edges.min_p = 1.0f;
  edges.repetition_penalty = 1e-3f;
  edges.presence_penalty = -2.0f;
  edges.frequency_penalty = 2.0f;
  edges.logprobs = 1000;                            // the server's --max-logprobs caps it, not the sampler
  edges.logit_bias = {{0, -100.0f}, {99, 250.0f}};  // out-of-range values are clamped, not refused
  EXPECT_EQ(error_of(edges), "");
}

TEST(Validate, NamesTheParameterItsValueAndTheRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto with = [](auto change) {
    SamplingParams p;
    change(p);
    return error_of(p);
  };
  EXPECT_EQ(with([](auto& p) { p.temperature = -0.5f; }), "temperature must be a finite number >= 0, got -0.5");
  EXPECT_EQ(with([](auto& p) { p.temperature = std::numeric_limits<float>::infinity(); }),
            "temperature must be a finite number >= 0, got inf");
  EXPECT_EQ(with([](auto& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(with([](auto& p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(with([&](auto& p) { p.top_p = nan; }), "top_p must be in (0, 1], got nan");
  EXPECT_EQ(with([](auto& p) { p.top_k = -2; }), "top_k must be -1 or 0 (all tokens) or at least 1, got -2");
  EXPECT_EQ(with([](auto& p) { p.min_p = 1.25f; }), "min_p must be in [0, 1], got 1.25");
  EXPECT_EQ(with([](auto& p) { p.min_p = -0.1f; }), "min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(with([](auto& p) { p.repetition_penalty = 0.0f; }),
            "repetition_penalty must be a finite number > 0, got 0");
  EXPECT_EQ(with([](auto& p) { p.presence_penalty = 2.5f; }), "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(with([](auto& p) { p.frequency_penalty = -3.0f; }), "frequency_penalty must be in [-2, 2], got -3");
  EXPECT_EQ(with([](auto& p) { p.logprobs = -2; }), "logprobs must be -1 (none) or at least 0, got -2");
  EXPECT_EQ(with([](auto& p) {
              p.logit_bias = {{100, 1.0f}};
            }),
            "logit_bias token id 100 is outside the vocabulary [0, 100)");
  EXPECT_EQ(with([](auto& p) {
              p.logit_bias = {{-1, 1.0f}};
            }),
            "logit_bias token id -1 is outside the vocabulary [0, 100)");
  EXPECT_EQ(with([&](auto& p) {
              p.logit_bias = {{7, nan}};
            }),
            "logit_bias value for token 7 must be a number, got nan");
}

TEST(Sample, RefusesEmptyLogitsAndABiasOutsideThem) {
  SequenceSampler empty(SamplingParams{}, {});
  std::vector<float> none;
  EXPECT_THROW(empty.sample(none), SamplingError);

  auto params = greedy();
  params.logit_bias = {{10, 1.0f}};
  SequenceSampler sampler(params, {});
  std::vector<float> logits(10, 0.0f);
  EXPECT_THROW(sampler.sample(logits), SamplingError);
}

// ---- a real vocabulary -----------------------------------------------------------------------------------------

TEST(LargeVocabulary, GreedyAndFilteredDrawsOverQwenSizedLogits) {
  auto logits = random_logits(kQwenVocab, 77, 8.0f);
  logits[kQwenVocab - 1] = 20.0f;
  {
    SequenceSampler sampler(greedy(), {});
    auto step = logits;
    EXPECT_EQ(sampler.sample(step).token, static_cast<std::int32_t>(kQwenVocab - 1));
  }

  SamplingParams params = seeded(88);
  params.temperature = 0.8f;
  params.top_k = 50;
  params.top_p = 0.9f;
  params.min_p = 0.01f;
  params.logprobs = 20;
  params.repetition_penalty = 1.1f;
  logits[kQwenVocab - 1] = 0.0f;
  const auto expected = log_softmax(logits);
  std::vector<std::int32_t> prompt(4096);
  std::iota(prompt.begin(), prompt.end(), 0);
  SequenceSampler sampler(params, prompt);
  for (int i = 0; i < 20; ++i) {
    auto step = logits;
    const auto result = sampler.sample(step);
    ASSERT_GE(result.token, 0);
    ASSERT_LT(result.token, static_cast<std::int32_t>(kQwenVocab));
    EXPECT_NEAR(result.logprob, expected[static_cast<std::size_t>(result.token)], 1e-4);
    ASSERT_EQ(result.top.size(), 20u);
    EXPECT_TRUE(std::is_sorted(result.top.begin(), result.top.end(),
                               [](const auto& a, const auto& b) { return a.logprob > b.logprob; }));
  }
}

TEST(LargeVocabulary, TopPWithoutTopKKeepsOnlyTheHeavyHalf) {
  // 3000 heavy tokens (logit 0) scattered over 151936, the rest at -20 (2e-9 each, 3e-4 in all). top_p = 0.4999
  // keeps the 1500 heavy tokens of lowest id (ties rank the lower id first), cut well past the first chunks.
  std::vector<float> logits(kQwenVocab, -20.0f);
  std::vector<std::int32_t> heavy;
  for (std::size_t j = 0; j < 3000; ++j) {
    const auto token = static_cast<std::int32_t>((j * 50021) % kQwenVocab);
    logits[static_cast<std::size_t>(token)] = 0.0f;
    heavy.push_back(token);
  }
  std::sort(heavy.begin(), heavy.end());
  const std::set<std::int32_t> kept(heavy.begin(), heavy.begin() + 1500);
  auto params = seeded(99);
  params.top_p = 0.4999f;
  SequenceSampler sampler(params, {});
  const auto counts = histogram(sampler, logits, 1000);
  const auto tokens = drawn(counts);
  EXPECT_TRUE(std::includes(kept.begin(), kept.end(), tokens.begin(), tokens.end()));
  EXPECT_GT(tokens.size(), 500u);
  EXPECT_GT(*tokens.rbegin(), heavy[1400]);
}

// What a device sampler is handed: one adjustment per touched token, ascending, the bias clamped and the
// last of a repeated id kept, the repetition penalty on prompt and output tokens once, output counts as
// recorded; greedy as temperature 0; each step a new draw key from the seeded stream.
TEST(DeviceStep, MergesBiasAndPenaltiesPerToken) {
  SamplingParams params = seeded(7);
  params.temperature = 0.0f;
  params.repetition_penalty = 1.3f;
  params.frequency_penalty = 0.5f;
  params.logit_bias = {{40, 1.0f}, {9, 250.0f}, {40, -3.0f}};
  SequenceSampler sampler(params, std::vector<std::int32_t>{9, 5, 5});
  sampler.record(5);
  sampler.record(12);
  sampler.record(12);
  const SamplingStep step = sampler.device_step(100);
  EXPECT_EQ(step.params.temperature, 0.0f);
  ASSERT_EQ(step.adjustments.size(), 4u);
  const auto expect = [&](std::size_t i, std::int32_t token, float bias, std::uint32_t count, bool repeat) {
    EXPECT_EQ(step.adjustments[i].token, token) << i;
    EXPECT_EQ(step.adjustments[i].bias, bias) << i;
    EXPECT_EQ(step.adjustments[i].output_count, count) << i;
    EXPECT_EQ(step.adjustments[i].repeat, repeat) << i;
  };
  expect(0, 5, 0.0f, 1, true);  // in the prompt and the output: one repetition penalty
  expect(1, 9, kMaxLogitBias, 0, true);
  expect(2, 12, 0.0f, 2, true);
  expect(3, 40, -3.0f, 0, false);

  SequenceSampler same(params, std::vector<std::int32_t>{9, 5, 5});
  EXPECT_EQ(same.device_step(100).params.draw_key, step.params.draw_key);
  EXPECT_NE(sampler.device_step(100).params.draw_key, step.params.draw_key);

  params.repetition_penalty = 1.0f;
  params.frequency_penalty = 0.0f;
  params.logit_bias.clear();
  params.temperature = 0.004f;  // raised to the minimum, not greedy
  SequenceSampler plain(params, std::vector<std::int32_t>{1, 2, 3});
  plain.record(2);
  const auto plain_step = plain.device_step(100);
  EXPECT_TRUE(plain_step.adjustments.empty());
  EXPECT_EQ(plain_step.params.temperature, kMinTemperature);
}

}  // namespace
}  // namespace engine::sampling
