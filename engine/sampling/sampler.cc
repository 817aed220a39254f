#include "engine/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/sampling/token_mask.h"

namespace engine::sampling {
namespace {

// vLLM's _SAMPLING_EPS: a temperature below it is greedy.
constexpr float kGreedyTemperature = 1e-5f;
// top-p buckets: 1/16 nat wide, 1024 of them spanning 64 nats (a probability ratio of 1e-28); the last
// takes the tail.
constexpr std::size_t kTopPBuckets = 1024;
constexpr float kBucketsPerNat = 16.0f;
// Tokens the first widening step of top-p sorts within its crossing bucket.
constexpr std::ptrdiff_t kTopPFirstChunk = 64;

std::string number(float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

[[noreturn]] void refuse(const std::string& message) {
  throw SamplingError(message);
}

// False for NaN, which every range refuses.
bool in_closed(float value, float low, float high) {
  return value >= low && value <= high;
}

// Best first (ranks_before) for the sampler's candidates.
template <typename T>
bool better(const T& a, const T& b) {
  return ranks_before(a.logit, a.token, b.logit, b.token);
}

// A uniform double in [0, 1) from the top 53 bits: unlike std::uniform_real_distribution, the same on every
// standard library, so a seed means the same tokens wherever the server runs.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

void validate(const SamplingParams& p, std::size_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    refuse("temperature must be a finite number >= 0, got " + number(p.temperature));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) refuse("top_p must be in (0, 1], got " + number(p.top_p));
  if (p.top_k < -1) refuse("top_k must be -1 or 0 (all tokens) or at least 1, got " + std::to_string(p.top_k));
  if (!in_closed(p.min_p, 0.0f, 1.0f)) refuse("min_p must be in [0, 1], got " + number(p.min_p));
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) {
    refuse("repetition_penalty must be a finite number > 0, got " + number(p.repetition_penalty));
  }
  if (!in_closed(p.presence_penalty, -2.0f, 2.0f)) {
    refuse("presence_penalty must be in [-2, 2], got " + number(p.presence_penalty));
  }
  if (!in_closed(p.frequency_penalty, -2.0f, 2.0f)) {
    refuse("frequency_penalty must be in [-2, 2], got " + number(p.frequency_penalty));
  }
  // How many a request may ask for is the server's --max-logprobs, checked where the request is read.
  if (p.logprobs < -1) refuse("logprobs must be -1 (none) or at least 0, got " + std::to_string(p.logprobs));
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || static_cast<std::size_t>(token) >= vocab_size) {
      refuse("logit_bias token id " + std::to_string(token) + " is outside the vocabulary [0, " +
             std::to_string(vocab_size) + ")");
    }
    if (std::isnan(bias)) refuse("logit_bias value for token " + std::to_string(token) + " must be a number, got nan");
  }
}

SequenceSampler::SequenceSampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens,
                                 std::unique_ptr<TokenConstraint> constraint)
    : params_(std::move(params)),
      temperature_(params_.temperature > 0.0f && params_.temperature < kMinTemperature ? kMinTemperature
                                                                                       : params_.temperature),
      prompt_tokens_(prompt_tokens.begin(), prompt_tokens.end()),
      rng_(params_.seed ? *params_.seed : fresh_seed()),
      constraint_(std::move(constraint)) {
  // logit_bias arrives as a JSON object: one value per id, the last one given winning, clamped to OpenAI's range.
  logit_bias_ = params_.logit_bias;
  std::stable_sort(logit_bias_.begin(), logit_bias_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < logit_bias_.size(); ++i) {
    const bool last_of_id = i + 1 == logit_bias_.size() || logit_bias_[i + 1].first != logit_bias_[i].first;
    if (last_of_id) {
      logit_bias_[kept++] = {logit_bias_[i].first, std::clamp(logit_bias_[i].second, -kMaxLogitBias, kMaxLogitBias)};
    }
  }
  logit_bias_.resize(kept);

  // The repetition penalty needs only which tokens the prompt holds, not how often.
  std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
  prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()), prompt_tokens_.end());
}

SampledToken SequenceSampler::sample(std::span<float> logits) {
  if (logits.empty()) refuse("sample: empty logits");
  if (logits.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    refuse("sample: " + std::to_string(logits.size()) + " logits exceed the token id range");
  }
  if (!logit_bias_.empty() &&
      (logit_bias_.front().first < 0 || static_cast<std::size_t>(logit_bias_.back().first) >= logits.size())) {
    refuse("logit_bias token ids must be in [0, " + std::to_string(logits.size()) + ")");
  }

  SampledToken result;
  const bool want_logprobs = params_.logprobs >= 0;
  double log_normaliser = 0.0;
  if (want_logprobs) {
    // Of the raw logits, before bias and penalties change them.
    log_normaliser =
        scanner_.scan(logits, static_cast<std::size_t>(params_.logprobs), std::nullopt, result.top).log_normaliser;
  }

  apply_bias_and_penalties(logits, want_logprobs);
  // The chosen token is always an allowed one, which the mask left as it was: raw_logit() stays right.
  apply_constraint(logits);

  if (temperature_ < kGreedyTemperature) {
    // One pass; strict > keeps the lowest id among ties and never picks a NaN.
    float best = -std::numeric_limits<float>::infinity();
    std::size_t best_index = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] > best) {
        best = logits[i];
        best_index = i;
      }
    }
    result.token = static_cast<std::int32_t>(best_index);
  } else {
    result.token = draw(logits);
  }

  if (want_logprobs) {
    result.logprob = static_cast<float>(static_cast<double>(raw_logit(logits, result.token)) - log_normaliser);
  }
  record(result.token);
  return result;
}

void SequenceSampler::record(std::int32_t token) {
  if (constraint_ && !constraint_->accept(token)) {
    throw std::logic_error("sampling: the constraint refused token " + std::to_string(token) +
                           ", which its own mask allowed (or a device sampler did not apply the mask)");
  }
  ++output_counts_[token];
}

void SequenceSampler::apply_constraint(std::span<float> logits) {
  if (!constraint_) return;
  mask_.assign(bitmask_words(logits.size()), 0u);
  constraint_->fill_bitmask(mask_);
  if (apply_token_mask(logits, mask_) == 0) {
    refuse("sample: the output constraint allows none of the " + std::to_string(logits.size()) + " tokens");
  }
}

SamplingStep SequenceSampler::device_step(std::size_t vocab_size) {
  SamplingStep step;
  step.params = {.temperature = temperature_ < kGreedyTemperature ? 0.0f : temperature_,
                 .top_k = params_.top_k,
                 .top_p = params_.top_p,
                 .min_p = params_.min_p,
                 .repetition_penalty = params_.repetition_penalty,
                 .presence_penalty = params_.presence_penalty,
                 .frequency_penalty = params_.frequency_penalty,
                 .logprobs = params_.logprobs,
                 .draw_key = rng_()};
  // One entry per touched token, merged from the three ascending sources.
  auto& adj = step.adjustments;
  for (const auto& [token, bias] : logit_bias_) adj.push_back({token, bias, 0, false});
  if (params_.repetition_penalty != 1.0f) {
    for (const auto token : prompt_tokens_) adj.push_back({token, 0.0f, 0, true});
  }
  const bool output_penalties =
      params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (output_penalties) {
    for (const auto& [token, count] : output_counts_) {
      adj.push_back({token, 0.0f, count, params_.repetition_penalty != 1.0f});
    }
  }
  std::sort(adj.begin(), adj.end(), [](const auto& a, const auto& b) { return a.token < b.token; });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < adj.size(); ++i) {
    if (kept > 0 && adj[kept - 1].token == adj[i].token) {
      auto& merged = adj[kept - 1];
      merged.bias += adj[i].bias;
      merged.output_count += adj[i].output_count;
      merged.repeat = merged.repeat || adj[i].repeat;
    } else {
      adj[kept++] = adj[i];
    }
  }
  adj.resize(kept);
  if (constraint_) {
    step.allowed.assign(bitmask_words(vocab_size), 0u);
    constraint_->fill_bitmask(step.allowed);
  }
  return step;
}

void SequenceSampler::apply_bias_and_penalties(std::span<float> logits, bool keep_raw) {
  raw_logits_.clear();
  const auto in_vocab = [&](std::int32_t token) {
    return token >= 0 && static_cast<std::size_t>(token) < logits.size();
  };
  // Only tokens touched here differ from their raw logit; the first value recorded for a token is its raw one.
  const auto touch = [&](std::int32_t token) -> float& {
    if (keep_raw) raw_logits_.emplace_back(token, logits[static_cast<std::size_t>(token)]);
    return logits[static_cast<std::size_t>(token)];
  };

  for (const auto& [token, bias] : logit_bias_) touch(token) += bias;

  // transformers' / vLLM's repetition penalty: shrink a positive logit, push a negative one further down.
  const float repetition = params_.repetition_penalty;
  const auto repeat = [&](std::int32_t token) {
    float& logit = touch(token);
    logit = logit > 0.0f ? logit / repetition : logit * repetition;
  };
  if (repetition != 1.0f) {
    for (const std::int32_t token : prompt_tokens_) {
      if (in_vocab(token)) repeat(token);
    }
  }

  const float frequency = params_.frequency_penalty;
  const float presence = params_.presence_penalty;
  for (const auto& [token, count] : output_counts_) {
    if (!in_vocab(token)) continue;
    // A token in the prompt had its repetition penalty above; each token gets it once.
    if (repetition != 1.0f && !std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), token)) {
      repeat(token);
    }
    if (frequency != 0.0f || presence != 0.0f) {
      float& logit = touch(token);
      logit -= frequency * static_cast<float>(count);
      logit -= presence;
    }
  }
}

float SequenceSampler::raw_logit(std::span<const float> logits, std::int32_t token) const {
  const auto first =
      std::find_if(raw_logits_.begin(), raw_logits_.end(), [&](const auto& entry) { return entry.first == token; });
  return first != raw_logits_.end() ? first->second : logits[static_cast<std::size_t>(token)];
}

float SequenceSampler::kth_largest(std::span<const float> logits, std::size_t k) {
  // A min-heap of the k largest so far: one pass, and past the first few thousand tokens a logit rarely
  // enters it, so this costs little more than reading the logits.
  heap_.clear();
  for (const float logit : logits) {
    if (std::isnan(logit)) continue;
    if (heap_.size() < k) {
      heap_.push_back(logit);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    } else if (logit > heap_.front()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      heap_.back() = logit;
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
  }
  return heap_.size() < k ? -std::numeric_limits<float>::infinity() : heap_.front();
}

std::int32_t SequenceSampler::draw(std::span<const float> logits) {
  float max_logit = -std::numeric_limits<float>::infinity();
  std::size_t argmax = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      argmax = i;
    }
  }
  // Nothing to normalise (every logit -inf or NaN, or one +inf): the argmax is the only meaningful choice.
  if (!std::isfinite(max_logit)) return static_cast<std::int32_t>(argmax);

  // top-k keeps every token whose logit reaches the k-th largest (ties at the boundary stay, as in vLLM).
  float lowest_kept = -std::numeric_limits<float>::infinity();
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < logits.size()) {
    lowest_kept = kth_largest(logits, static_cast<std::size_t>(params_.top_k));
  }

  const float inverse_temperature = 1.0f / temperature_;
  // min-p keeps p >= min_p * p_max, i.e. (logit - max) / T >= log(min_p), compared in log space so that exp
  // is paid only for the tokens kept. log(0) = -inf keeps every finite logit. (vLLM applies min-p before
  // top-k and top-p; min-p and top-k commute, top-p sees what both leave.)
  const float log_min_p = std::log(params_.min_p);
  candidates_.clear();
  if (candidates_.capacity() < logits.size()) candidates_.reserve(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (logit > -std::numeric_limits<float>::infinity() && logit >= lowest_kept) {
      const float scaled = (logit - max_logit) * inverse_temperature;
      if (scaled >= log_min_p) {
        const float weight = std::exp(scaled);
        candidates_.push_back({logit, weight, static_cast<std::int32_t>(i)});
        total += weight;
      }
    }
  }

  std::size_t kept = candidates_.size();
  double kept_mass = total;
  if (params_.top_p < 1.0f) kept = apply_top_p(total, max_logit, inverse_temperature, kept_mass);

  // Inverse CDF over the kept tokens, summed in the same order as their mass, so the walk ends inside.
  const double u = uniform01(rng_) * kept_mass;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += candidates_[i].weight;
    if (u < cumulative) return candidates_[i].token;
  }
  return kept > 0 ? candidates_[kept - 1].token : static_cast<std::int32_t>(argmax);
}

std::size_t SequenceSampler::apply_top_p(double total, float max_logit, float inverse_temperature, double& kept_mass) {
  // top-p keeps the most likely tokens down to the first whose cumulative probability reaches top_p. Rather
  // than sort the candidates, bucket them by log-probability below the most likely (a better token never
  // lands in a later bucket): the buckets before the one where the mass crosses top_p are kept whole, those
  // after it dropped, and only the crossing bucket is ranked.
  const double target = static_cast<double>(params_.top_p) * total;
  const auto bucket_of = [&](const Candidate& c) {
    const float depth = (max_logit - c.logit) * inverse_temperature * kBucketsPerNat;
    return depth < static_cast<float>(kTopPBuckets - 1) ? static_cast<std::size_t>(depth) : kTopPBuckets - 1;
  };
  std::array<double, kTopPBuckets> bucket_mass{};
  for (const Candidate& c : candidates_) bucket_mass[bucket_of(c)] += c.weight;
  std::size_t crossing = 0;
  double before = 0.0;
  while (crossing + 1 < kTopPBuckets && before + bucket_mass[crossing] < target) before += bucket_mass[crossing++];

  const auto first = candidates_.begin();
  const auto crossing_begin =
      std::partition(first, candidates_.end(), [&](const Candidate& c) { return bucket_of(c) < crossing; });
  const auto crossing_end =
      std::partition(crossing_begin, candidates_.end(), [&](const Candidate& c) { return bucket_of(c) == crossing; });
  double mass = 0.0;
  for (auto it = first; it != crossing_begin; ++it) mass += it->weight;

  // Within the crossing bucket (all of them when the logits tie), sort a chunk of the best at a time,
  // doubling it until the mass is reached.
  const auto by_rank = [](const Candidate& a, const Candidate& b) { return better(a, b); };
  std::ptrdiff_t chunk = kTopPFirstChunk;
  for (auto begin = crossing_begin; begin != crossing_end; chunk *= 2) {
    const auto stop = crossing_end - begin > chunk ? begin + chunk : crossing_end;
    if (stop != crossing_end) std::nth_element(begin, stop, crossing_end, by_rank);
    std::sort(begin, stop, by_rank);
    for (auto it = begin; it != stop; ++it) {
      mass += it->weight;
      if (mass >= target) {
        kept_mass = mass;
        return static_cast<std::size_t>(it - first) + 1;
      }
    }
    begin = stop;
  }
  // Unreached only through rounding (the buckets summed in another order): the crossing bucket stays whole.
  kept_mass = mass;
  return static_cast<std::size_t>(crossing_end - first);
}

}  // namespace engine::sampling
