#pragma once

// Per-sequence sampling as vLLM's OpenAI server applies it: logit bias, penalties, temperature, top-k,
// top-p, min-p, then a draw from the sequence's own random stream (so a seeded request gets the same tokens
// whatever else shares its batch), with the top-N log-probabilities of the model's raw distribution.

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace engine::sampling {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0 or -1: all tokens
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; over prompt and output tokens (vLLM / transformers semantics)
  float presence_penalty = 0.0f;    // [-2, 2]; over output tokens
  float frequency_penalty = 0.0f;   // [-2, 2]; over output tokens
  std::vector<std::pair<std::int32_t, float>> logit_bias;  // added to the logits first
  std::optional<std::uint64_t> seed;                       // none: a fresh nondeterministic stream
  int logprobs = -1;  // -1: none; 0: the chosen token's only; N: also the N most likely
};

// Thrown for parameters out of range; the message names the parameter, its value and the allowed range.
class SamplingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Checks every field against its range (and logit_bias ids against vocab_size). Throws SamplingError.
void validate(const SamplingParams& params, std::size_t vocab_size);

struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  std::int32_t token = 0;
  float logprob = 0.0f;             // of the chosen token under the raw (unprocessed) distribution
  std::vector<TokenLogprob> top;    // the `logprobs` most likely under that distribution, descending
};

// The sampling state of one sequence: its parameters, the token counts the penalties need, its random
// stream. Not thread-safe; one per sequence.
class SequenceSampler {
 public:
  SequenceSampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens);

  // Chooses the next token from this step's logits (vocab-sized, modified in place) and records it as output.
  SampledToken sample(std::span<float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::unordered_map<std::int32_t, std::uint32_t> prompt_counts_;
  std::unordered_map<std::int32_t, std::uint32_t> output_counts_;
  std::mt19937_64 rng_;
};

}  // namespace engine::sampling
