// The one-pass log-probability scan against a float64 log-softmax: the normaliser, the top tokens in order
// (ties by lower id), vLLM's rank (tokens at least as likely; the top list's place when the token is in it),
// and rows with -inf, very wide ranges or a token outside them.
#include "engine/sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace engine::sampling {
namespace {

std::vector<float> random_row(std::size_t size, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> row(size);
  for (auto& v : row) v = normal(rng);
  return row;
}

std::vector<double> reference_log_softmax(const std::vector<float>& row) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (const float v : row) sum += std::exp(static_cast<double>(v) - max);
  const double lse = max + std::log(sum);
  std::vector<double> out;
  for (const float v : row) out.push_back(static_cast<double>(v) - lse);
  return out;
}

TEST(LogprobScanner, MatchesAFloat64LogSoftmaxTopAndRank) {
  const auto row = random_row(50000, 3, 4.0f);
  const auto expected = reference_log_softmax(row);
  std::vector<std::int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return row[a] > row[b]; });

  LogprobScanner scanner;
  for (const std::int32_t token : {order[0], order[3], order[777], order[49999]}) {
    SCOPED_TRACE(token);
    const ScoredToken scored = scanner.score(row, token, 8);
    EXPECT_EQ(scored.token, token);
    EXPECT_NEAR(scored.logprob, expected[token], 1e-5);
    const auto at_least = std::count_if(row.begin(), row.end(), [&](float v) { return v >= row[token]; });
    const auto in_top = std::find(order.begin(), order.begin() + 8, token);
    if (in_top == order.begin() + 8) {
      EXPECT_EQ(scored.rank, static_cast<std::size_t>(at_least));
    } else {
      EXPECT_EQ(scored.rank, static_cast<std::size_t>(in_top - order.begin()) + 1);
    }
    ASSERT_EQ(scored.top.size(), 8u);
    for (std::size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(scored.top[i].token, order[i]);
      EXPECT_NEAR(scored.top[i].logprob, expected[order[i]], 1e-5);
    }
  }
}

TEST(LogprobScanner, RankCountsTiesAndTakesTheTopListsPlace) {
  const std::vector<float> row{1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  LogprobScanner scanner;
  // Three logits are at least 3: each tied token ranks 3 outside the top list.
  EXPECT_EQ(scanner.score(row, 4, 0).rank, 3u);
  EXPECT_EQ(scanner.score(row, 1, 0).rank, 3u);
  EXPECT_EQ(scanner.score(row, 2, 0).rank, 4u);
  // Ties rank the lower id first; a token in the top list has its place there (vLLM's dictionary).
  const auto scored = scanner.score(row, 3, 2);
  ASSERT_EQ(scored.top.size(), 2u);
  EXPECT_EQ(scored.top[0].token, 1);
  EXPECT_EQ(scored.top[1].token, 3);
  EXPECT_EQ(scored.rank, 2u);
  EXPECT_EQ(scanner.score(row, 4, 2).rank, 3u);
  // More asked for than the row holds: all of it.
  EXPECT_EQ(scanner.score(row, 0, 100).top.size(), 5u);
}

TEST(LogprobScanner, NegativeInfinityWideRangesAndTokensOutsideTheRow) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  LogprobScanner scanner;
  const std::vector<float> masked{-kInf, 0.0f, 0.0f};
  const auto scored = scanner.score(masked, 0, 3);
  EXPECT_EQ(scored.logprob, -kInf);
  EXPECT_EQ(scored.rank, 3u);
  ASSERT_EQ(scored.top.size(), 3u);
  EXPECT_EQ(scored.top[0].token, 1);
  EXPECT_NEAR(scored.top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(scored.top[2].token, 0);

  // A maximum that rises across 2000 nats: the running sum is rescaled, never overflows.
  std::vector<float> rising;
  for (int i = -1000; i <= 1000; ++i) rising.push_back(static_cast<float>(i));
  const auto last = scanner.score(rising, static_cast<std::int32_t>(rising.size() - 1), 1);
  EXPECT_NEAR(last.logprob, std::log(1 - std::exp(-1.0)), 1e-5);  // a geometric series of e^-1
  EXPECT_EQ(last.rank, 1u);

  EXPECT_THROW(scanner.score(masked, 3, 1), std::out_of_range);
  EXPECT_THROW(scanner.score(masked, -1, 1), std::out_of_range);
}

}  // namespace
}  // namespace engine::sampling
