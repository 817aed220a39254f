#pragma once

// Per-sequence sampling as vLLM's OpenAI server applies it: logit bias, penalties, the constraint's mask
// (structured outputs), temperature, min-p, top-k, top-p, then a draw from the sequence's own random stream
// (so a seeded request gets the same tokens whatever else shares its batch), with the top-N
// log-probabilities of the model's raw distribution.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampling_step.h"
#include "engine/sampling/token_constraint.h"

namespace engine::sampling {

// OpenAI's range for a logit_bias value; vLLM clamps values outside it rather than refusing them.
inline constexpr float kMaxLogitBias = 100.0f;
// vLLM raises a temperature in (0, kMinTemperature) to kMinTemperature (smaller ones overflow its float
// softmax), so only an exact 0 is greedy.
inline constexpr float kMinTemperature = 0.01f;

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int top_k = 0;                    // 0 or -1: all tokens
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; over prompt and output tokens (vLLM / transformers semantics)
  float presence_penalty = 0.0f;    // [-2, 2]; over output tokens
  float frequency_penalty = 0.0f;   // [-2, 2]; over output tokens
  std::vector<std::pair<std::int32_t, float>> logit_bias;  // added to the logits first
  std::optional<std::uint64_t> seed;                       // none: a fresh nondeterministic stream
  int logprobs = -1;  // -1: none; 0: the chosen token's only; N: also the N most likely (the server caps N)
};

// Thrown for parameters out of range; the message names the parameter, its value and the allowed range.
class SamplingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Checks every field against its range (and logit_bias ids against vocab_size). Throws SamplingError. A
// logit_bias value outside [-kMaxLogitBias, kMaxLogitBias] is accepted and clamped when sampling; NaN is refused.
void validate(const SamplingParams& params, std::size_t vocab_size);

struct SampledToken {
  std::int32_t token = 0;
  float logprob = 0.0f;           // of the chosen token under the raw (unprocessed) distribution
  std::vector<TokenLogprob> top;  // the `logprobs` most likely under that distribution, descending
};

// The sampling state of one sequence: its parameters, the token counts the penalties need, its random
// stream. Not thread-safe; one per sequence.
class SequenceSampler {
 public:
  // `constraint` (may be null) restricts every token this sampler chooses; it sees each one chosen.
  SequenceSampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens,
                  std::unique_ptr<TokenConstraint> constraint = nullptr);

  // Chooses the next token from this step's logits (vocab-sized, modified in place: on return they hold the
  // logits after bias, penalties and the mask, before temperature) and records it as output.
  // Order (vLLM's V1 sampler): logit bias, repetition, frequency and presence penalties; the constraint's
  // forbidden tokens to -inf; then greedy argmax at temperature 0, else temperature, min-p, top-k, top-p and
  // a draw. Log-probabilities stay the raw distribution's (vLLM's default). Throws SamplingError for empty
  // logits, a logit_bias id outside them, or a constraint that allows no token.
  SampledToken sample(std::span<float> logits);

  // The same choice made on a device: this step's parameters and adjustments, the constraint's mask over
  // `vocab_size` tokens, and a draw key from this sequence's stream (advancing it); the device's token
  // comes back through record().
  SamplingStep device_step(std::size_t vocab_size);
  // Counts the token as output and advances the constraint past it. Throws std::logic_error when the
  // constraint refuses it (a device that ignored the mask).
  void record(std::int32_t token);

  // Replaces the constraint (null: none). The tokens recorded before stay counted for the penalties.
  void set_constraint(std::unique_ptr<TokenConstraint> constraint) { constraint_ = std::move(constraint); }
  const TokenConstraint* constraint() const { return constraint_.get(); }
  // True once the constraint lets nothing more follow (its grammar ended).
  bool constraint_terminated() const { return constraint_ && constraint_->is_terminated(); }

  const SamplingParams& params() const { return params_; }

 private:
  // A token still in the running for the draw.
  struct Candidate {
    float logit = 0.0f;   // after bias and penalties, before temperature
    float weight = 0.0f;  // exp((logit - max) / temperature): unnormalised probability
    std::int32_t token = 0;
  };

  void apply_bias_and_penalties(std::span<float> logits, bool keep_raw);
  // The constraint's forbidden tokens to -inf (nothing without one).
  void apply_constraint(std::span<float> logits);
  std::int32_t draw(std::span<const float> logits);
  float kth_largest(std::span<const float> logits, std::size_t k);
  std::size_t apply_top_p(double total, float max_logit, float inverse_temperature, double& kept_mass);
  float raw_logit(std::span<const float> logits, std::int32_t token) const;

  SamplingParams params_;
  float temperature_ = 1.0f;                                // params_.temperature as vLLM applies it
  std::vector<std::pair<std::int32_t, float>> logit_bias_;  // by id, one per id (the last given), clamped
  std::vector<std::int32_t> prompt_tokens_;                 // distinct, ascending
  std::unordered_map<std::int32_t, std::uint32_t> output_counts_;
  std::mt19937_64 rng_;
  std::unique_ptr<TokenConstraint> constraint_;

  // Scratch reused across steps: once grown, a step allocates only the result's `top` and a first-seen output
  // token's count.
  std::vector<Candidate> candidates_;
  LogprobScanner scanner_;
  std::vector<float> heap_;
  std::vector<std::pair<std::int32_t, float>> raw_logits_;  // (token, logit before bias/penalties)
  std::vector<std::uint32_t> mask_;                         // the constraint's bitmask for this step
};

}  // namespace engine::sampling
