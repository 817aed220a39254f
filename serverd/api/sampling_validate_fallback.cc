// Built only while the engine's sampler library (engine_sampling) is not part of the build: a stand-in for
// engine::sampling::validate with the contract engine/sampling/sampler.h states (every field against its
// range; the message starts with the parameter's name, then its value and the allowed range). CMake drops
// this file as soon as the engine_sampling target exists.
#include <cmath>
#include <string>

#include "engine/sampling/sampler.h"

namespace engine::sampling {
namespace {

[[noreturn]] void refuse(const std::string& name, const std::string& value, const std::string& range) {
  throw SamplingError(name + " must be " + range + ", got " + value);
}

bool within(float value, float low, float high) {
  return value >= low && value <= high;
}  // false for NaN

}  // namespace

void validate(const SamplingParams& p, std::size_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    refuse("temperature", std::to_string(p.temperature), "a finite number >= 0");
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) refuse("top_p", std::to_string(p.top_p), "in (0, 1]");
  if (p.top_k < -1) refuse("top_k", std::to_string(p.top_k), "-1 or 0 (all tokens) or at least 1");
  if (!within(p.min_p, 0.0f, 1.0f)) refuse("min_p", std::to_string(p.min_p), "in [0, 1]");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) {
    refuse("repetition_penalty", std::to_string(p.repetition_penalty), "a finite number > 0");
  }
  if (!within(p.presence_penalty, -2.0f, 2.0f)) {
    refuse("presence_penalty", std::to_string(p.presence_penalty), "in [-2, 2]");
  }
  if (!within(p.frequency_penalty, -2.0f, 2.0f)) {
    refuse("frequency_penalty", std::to_string(p.frequency_penalty), "in [-2, 2]");
  }
  if (p.logprobs < -1) refuse("logprobs", std::to_string(p.logprobs), "-1 (none) or at least 0");
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || static_cast<std::size_t>(token) >= vocab_size) {
      refuse("logit_bias", "token id " + std::to_string(token), "in [0, " + std::to_string(vocab_size) + ")");
    }
    if (std::isnan(bias)) refuse("logit_bias", "nan for token " + std::to_string(token), "a number");
  }
}

}  // namespace engine::sampling
