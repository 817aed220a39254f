#pragma once

// Log-probabilities of one row of raw logits, found in a single read of the row: log-softmax's normaliser
// (an online log-sum-exp), the most likely tokens and the rank of a given token. The sampler reports a
// sampled token's log-probabilities with it, and the engine scores prompt tokens (vLLM's prompt_logprobs)
// with it, so both agree on every number.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace engine::sampling {

struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

// A known token (a prompt token) scored under the logits that predict it.
struct ScoredToken {
  std::int32_t token = 0;
  float logprob = 0.0f;
  // vLLM's rank: how many tokens are at least as likely (1: the most likely). When the token is among `top`,
  // its place there (vLLM's dictionary keeps the top list's rank for it).
  std::size_t rank = 0;
  std::vector<TokenLogprob> top;  // the most likely tokens, best first
};

// Best first: the higher logit, then the lower id (so ties resolve like an argmax that keeps the first).
inline bool ranks_before(float logit, std::int32_t token, float other_logit, std::int32_t other_token) {
  return logit > other_logit || (logit == other_logit && token < other_token);
}

// Reusable scratch for scanning rows; one per thread.
class LogprobScanner {
 public:
  struct Summary {
    double log_normaliser = 0.0;  // log(sum(exp(logits)))
    std::size_t at_least = 0;     // logits >= the ranked token's (0 when none is ranked)
  };

  // Reads `logits` once. `top` receives the `top_n` most likely tokens (at most the row's size, NaN left
  // out) as log-probabilities, best first; `rank_of`, when given, is counted in Summary::at_least.
  // exp runs in float, relative to the running maximum, and the sum in double.
  Summary scan(std::span<const float> logits, std::size_t top_n, std::optional<std::int32_t> rank_of,
               std::vector<TokenLogprob>& top);

  // The token's log-probability, rank and the `top_n` most likely tokens. Throws std::out_of_range for a
  // token outside the row.
  ScoredToken score(std::span<const float> logits, std::int32_t token, std::size_t top_n);

 private:
  struct Scored {
    float logit = 0.0f;
    std::int32_t token = 0;
  };
  std::vector<Scored> heap_;
};

}  // namespace engine::sampling
