#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/backend/backend.h"

namespace engine::backend {
namespace {

std::vector<ExpertChoice> route(const std::vector<float>& scores, std::size_t top_k, bool normalize) {
  std::vector<ExpertChoice> out(top_k);
  route_token(scores, top_k, normalize, out);
  return out;
}

// The softmax of `scores` at `expert`, in double.
double probability(const std::vector<float>& scores, std::size_t expert) {
  double total = 0;
  for (const float s : scores) total += std::exp(static_cast<double>(s));
  return std::exp(static_cast<double>(scores[expert])) / total;
}

TEST(RouteToken, PicksTheLargestScoresBestFirstWithTheirSoftmaxProbabilities) {
  const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.25f, 0.0f};
  const auto chosen = route(scores, 2, false);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].expert, 1u);
  EXPECT_EQ(chosen[1].expert, 3u);
  EXPECT_NEAR(chosen[0].weight, probability(scores, 1), 1e-7);
  EXPECT_NEAR(chosen[1].weight, probability(scores, 3), 1e-7);
  EXPECT_LT(chosen[0].weight + chosen[1].weight, 0.95f);  // not renormalized
}

TEST(RouteToken, RenormalizedWeightsSumToOneInTheSameRatio) {
  const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.25f, 0.0f};
  const auto chosen = route(scores, 3, true);
  EXPECT_EQ(chosen[2].expert, 0u);
  EXPECT_NEAR(chosen[0].weight + chosen[1].weight + chosen[2].weight, 1.0, 1e-6);
  EXPECT_NEAR(chosen[0].weight / chosen[1].weight, std::exp(2.0 - 1.25), 1e-5);
}

TEST(RouteToken, TiesGoToTheLowerExpert) {
  const std::vector<float> scores = {1.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  const auto chosen = route(scores, 3, true);
  EXPECT_EQ(chosen[0].expert, 1u);
  EXPECT_EQ(chosen[1].expert, 2u);
  EXPECT_EQ(chosen[2].expert, 4u);
  const auto two = route({2.0f, 2.0f, 2.0f}, 1, false);
  EXPECT_EQ(two[0].expert, 0u);
}

TEST(RouteToken, LargeScoresDoNotOverflow) {
  const auto chosen = route({1000.0f, 999.0f, -1000.0f}, 2, true);
  EXPECT_EQ(chosen[0].expert, 0u);
  EXPECT_NEAR(chosen[0].weight, 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(std::isfinite(chosen[1].weight));
}

TEST(RouteToken, RefusesMoreChoicesThanExpertsByNumber) {
  std::vector<ExpertChoice> out(4);
  EXPECT_THAT(
      [&] {
        route_token(std::vector<float>{1, 2, 3}, 4, true, out);
      },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("4 of 3 experts")));
  std::vector<ExpertChoice> none;
  EXPECT_THROW(route_token(std::vector<float>{1, 2, 3}, 0, true, none), std::invalid_argument);
}

}  // namespace
}  // namespace engine::backend
