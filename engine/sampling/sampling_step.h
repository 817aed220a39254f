#pragma once

// One sequence's sampling for one step, as a device sampler takes it: the sequence's parameters with the
// token-specific parts (logit bias and penalties) merged into one adjustment per touched token, the tokens a
// constraint allows, and the key of this step's random draw. SequenceSampler::device_step() makes it;
// SequenceSampler::record() takes the token back.

#include <cstdint>
#include <vector>

namespace engine::sampling {

// A token whose logit the bias or a penalty changes. Applied in SequenceSampler's order: bias, then the
// repetition penalty (when `repeat`), then frequency (× output_count) and presence (when output_count > 0).
struct TokenAdjustment {
  std::int32_t token = 0;
  float bias = 0.0f;
  std::uint32_t output_count = 0;
  bool repeat = false;
};

// The sequence's parameters for the step: plain data, so that a device sampler uploads them as they are.
struct StepParams {
  float temperature = 1.0f;  // as applied (raised to the minimum); 0: greedy
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int logprobs = -1;
  std::uint64_t draw_key = 0;  // from the sequence's random stream: seeded sequences repeat their draws
};

struct SamplingStep {
  StepParams params;
  std::vector<TokenAdjustment> adjustments;  // ascending token ids, each once
  // Empty: every token. Else a bitmask (token_constraint.h) over the vocabulary, applied after the
  // adjustments: a clear bit's logit is -inf before temperature, top-k/top-p/min-p and the draw.
  std::vector<std::uint32_t> allowed;
};

}  // namespace engine::sampling
