#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace engine::sampling {

LogprobScanner::Summary LogprobScanner::scan(std::span<const float> logits, std::size_t top_n,
                                             std::optional<std::int32_t> rank_of, std::vector<TokenLogprob>& top) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::size_t wanted = std::min(top_n, logits.size());
  // A NaN target counts nothing, as vLLM's comparison would.
  const float target = rank_of ? logits[static_cast<std::size_t>(*rank_of)] : std::numeric_limits<float>::quiet_NaN();
  // The heap's front is the worst of the best `wanted` so far, so a token enters with one comparison.
  const auto worse_first = [](const Scored& a, const Scored& b) {
    return ranks_before(a.logit, a.token, b.logit, b.token);
  };
  heap_.clear();
  float max_logit = kNegInf;
  double sum = 0.0;
  std::size_t at_least = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (v >= target) ++at_least;
    if (v > max_logit) {
      // A new maximum rescales what was summed against the old one (exp(-inf) = 0 for the first).
      sum = sum * std::exp(static_cast<double>(max_logit) - static_cast<double>(v)) + 1.0;
      max_logit = v;
    } else if (v != kNegInf) {
      sum += std::exp(v - max_logit);  // NaN stays NaN, as it would in any softmax
    }
    if (wanted == 0 || std::isnan(v)) continue;
    const Scored scored{v, static_cast<std::int32_t>(i)};
    if (heap_.size() < wanted) {
      heap_.push_back(scored);
      std::push_heap(heap_.begin(), heap_.end(), worse_first);
    } else if (ranks_before(v, scored.token, heap_.front().logit, heap_.front().token)) {
      std::pop_heap(heap_.begin(), heap_.end(), worse_first);
      heap_.back() = scored;
      std::push_heap(heap_.begin(), heap_.end(), worse_first);
    }
  }
  const double log_normaliser = static_cast<double>(max_logit) + std::log(sum);
  std::sort_heap(heap_.begin(), heap_.end(), worse_first);
  top.clear();
  top.reserve(heap_.size());
  for (const Scored& s : heap_) {
    top.push_back({s.token, static_cast<float>(static_cast<double>(s.logit) - log_normaliser)});
  }
  return {log_normaliser, at_least};
}

ScoredToken LogprobScanner::score(std::span<const float> logits, std::int32_t token, std::size_t top_n) {
  if (token < 0 || static_cast<std::size_t>(token) >= logits.size()) {
    throw std::out_of_range("scoring token " + std::to_string(token) + " against a row of " +
                            std::to_string(logits.size()) + " logits");
  }
  ScoredToken out;
  out.token = token;
  const Summary summary = scan(logits, top_n, token, out.top);
  out.logprob =
      static_cast<float>(static_cast<double>(logits[static_cast<std::size_t>(token)]) - summary.log_normaliser);
  out.rank = summary.at_least;
  const auto in_top = std::find_if(out.top.begin(), out.top.end(), [&](const auto& t) { return t.token == token; });
  if (in_top != out.top.end()) out.rank = static_cast<std::size_t>(in_top - out.top.begin()) + 1;
  return out;
}

}  // namespace engine::sampling
