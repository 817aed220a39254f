#pragma once

// Checks a scored token (engine::sampling::ScoredToken, vLLM's prompt_logprobs entry) against the float64
// reference logits of the row that predicts it: the log-probability within twice the logits' tolerance (the
// token's logit and the normaliser each), the top tokens in the reference's order and vLLM's rank, each
// wherever rounding within that tolerance cannot reorder them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <span>
#include <vector>

#include "engine/sampling/logprobs.h"

namespace testing_support {

// Returns whether the rank was compared (no other logit lies within the tolerance of the token's).
inline bool expect_scored_like_reference(const engine::sampling::ScoredToken& scored, std::span<const double> row,
                                         double relative_tolerance) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0, scale = 0;
  for (const double v : row) {
    sum += std::exp(v - max);
    scale = std::max(scale, std::abs(v));
  }
  const double lse = max + std::log(sum);
  const double tolerance = 2 * relative_tolerance * scale;
  const auto clear_of_others = [&](std::size_t index) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i != index && std::abs(row[i] - row[index]) <= tolerance) return false;
    }
    return true;
  };
  const auto target = static_cast<std::size_t>(scored.token);
  EXPECT_NEAR(scored.logprob, row[target] - lse, tolerance);

  std::vector<std::size_t> order(row.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
  const std::size_t top = scored.top.size();
  for (std::size_t k = 0; k < top; ++k) {
    EXPECT_NEAR(scored.top[k].logprob, row[static_cast<std::size_t>(scored.top[k].token)] - lse, tolerance);
    if (clear_of_others(order[k])) {
      EXPECT_EQ(scored.top[k].token, static_cast<std::int32_t>(order[k])) << "top " << k;
    }
  }
  if (!clear_of_others(target)) return false;
  const auto in_top = std::find(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), target);
  const auto at_least = std::count_if(row.begin(), row.end(), [&](double v) { return v >= row[target]; });
  // vLLM's dictionary keeps the top list's rank for a token in it.
  EXPECT_EQ(scored.rank, in_top != order.begin() + static_cast<std::ptrdiff_t>(top)
                             ? static_cast<std::size_t>(in_top - order.begin()) + 1
                             : static_cast<std::size_t>(at_least));
  return true;
}

}  // namespace testing_support
