// Which experts a token of a mixture-of-experts layer goes to: the same on every backend, so that a model's
// routing does not depend on the device it runs on.

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace engine::backend {

void route_token(std::span<const float> scores, std::size_t top_k, bool normalize, std::span<ExpertChoice> out) {
  if (top_k == 0 || top_k > scores.size() || out.size() != top_k) {
    throw std::invalid_argument("route_token: " + std::to_string(top_k) + " of " + std::to_string(scores.size()) +
                                " experts into " + std::to_string(out.size()) + " choices");
  }
  // Softmax in double: the largest score subtracted first, so exp never overflows.
  const float largest = *std::max_element(scores.begin(), scores.end());
  double total = 0;
  for (const float s : scores) total += std::exp(static_cast<double>(s) - largest);
  // The top_k by score (the softmax keeps the order), ties to the lower index.
  std::vector<std::uint32_t> order(scores.size());
  for (std::uint32_t e = 0; e < order.size(); ++e) order[e] = e;
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top_k), order.end(),
      [&](std::uint32_t a, std::uint32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
  double chosen = 0;
  std::vector<double> probability(top_k);
  for (std::size_t i = 0; i < top_k; ++i) {
    probability[i] = std::exp(static_cast<double>(scores[order[i]]) - largest) / total;
    chosen += probability[i];
  }
  for (std::size_t i = 0; i < top_k; ++i) {
    out[i] = {order[i], static_cast<float>(normalize ? probability[i] / chosen : probability[i])};
  }
}

}  // namespace engine::backend
