#include "engine/sampling/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace engine::sampling {
namespace {

// vLLM's _SAMPLING_EPS: a temperature below it is greedy.
constexpr float kGreedyTemperature = 1e-5f;
// Tokens the first widening step of top-p sorts; most top-p cut-offs fall within the first few hundred.
constexpr std::size_t kTopPFirstChunk = 64;

std::string number(float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

[[noreturn]] void refuse(const std::string& message) {
  throw SamplingError(message);
}

bool in_closed(float value, float low, float high) {
  return value >= low && value <= high;
}  // false for NaN

// Best first: the higher logit, then the lower id (so ties resolve like an argmax that keeps the first).
template <typename T>
bool better(const T& a, const T& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
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
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs) {
    refuse("logprobs must be in [-1, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(p.logprobs));
  }
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || static_cast<std::size_t>(token) >= vocab_size) {
      refuse("logit_bias token id " + std::to_string(token) + " is outside the vocabulary [0, " +
             std::to_string(vocab_size) + ")");
    }
    if (std::isnan(bias)) refuse("logit_bias value for token " + std::to_string(token) + " must be a number, got nan");
  }
}

SequenceSampler::SequenceSampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens)
    : params_(std::move(params)),
      temperature_(params_.temperature > 0.0f && params_.temperature < kMinTemperature ? kMinTemperature
                                                                                       : params_.temperature),
      prompt_tokens_(prompt_tokens.begin(), prompt_tokens.end()),
      rng_(params_.seed ? *params_.seed : fresh_seed()) {
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
    // log-sum-exp of the raw logits: exp in float (as the model's own softmax would be), sum in double.
    float max_logit = -std::numeric_limits<float>::infinity();
    for (const float v : logits) max_logit = std::max(max_logit, v);
    double sum = 0.0;
    for (const float v : logits) sum += std::exp(v - max_logit);
    log_normaliser = static_cast<double>(max_logit) + std::log(sum);
    top_logprobs(logits, log_normaliser, result.top);
  }

  apply_bias_and_penalties(logits, want_logprobs);

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
  ++output_counts_[result.token];
  return result;
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

void SequenceSampler::top_logprobs(std::span<const float> logits, double log_normaliser,
                                   std::vector<TokenLogprob>& out) {
  const std::size_t wanted = std::min(static_cast<std::size_t>(params_.logprobs), logits.size());
  out.clear();
  if (wanted == 0) return;
  // A heap of the best `wanted` so far whose front is the worst of them: one pass, no sort of the vocabulary.
  const auto cmp = [](const Scored& a, const Scored& b) { return better(a, b); };
  top_.clear();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const Scored scored{logits[i], static_cast<std::int32_t>(i)};
    if (std::isnan(scored.logit)) continue;
    if (top_.size() < wanted) {
      top_.push_back(scored);
      std::push_heap(top_.begin(), top_.end(), cmp);
    } else if (better(scored, top_.front())) {
      std::pop_heap(top_.begin(), top_.end(), cmp);
      top_.back() = scored;
      std::push_heap(top_.begin(), top_.end(), cmp);
    }
  }
  std::sort_heap(top_.begin(), top_.end(), cmp);
  out.reserve(top_.size());
  for (const Scored& scored : top_) {
    out.push_back({scored.token, static_cast<float>(static_cast<double>(scored.logit) - log_normaliser)});
  }
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

  const float inverse_temperature = 1.0f / temperature_;
  // min-p keeps p >= min_p * p_max, i.e. (logit - max) / T >= log(min_p): compared in log space so that the
  // exp below is only paid for the tokens top-k leaves. log(0) = -inf keeps every finite logit.
  const float log_min_p = std::log(params_.min_p);
  candidates_.clear();
  if (candidates_.capacity() < logits.size()) candidates_.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (logit > -std::numeric_limits<float>::infinity() && (logit - max_logit) * inverse_temperature >= log_min_p) {
      candidates_.push_back({logit, 0.0f, static_cast<std::int32_t>(i)});
    }
  }
  const auto by_rank = [](const Candidate& a, const Candidate& b) { return better(a, b); };
  auto first = candidates_.begin();
  std::size_t count = candidates_.size();

  // top-k keeps every token whose logit reaches the k-th largest (ties at the boundary stay, as in vLLM).
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < count) {
    const auto k = static_cast<std::size_t>(params_.top_k);
    std::nth_element(first, first + static_cast<std::ptrdiff_t>(k - 1), candidates_.end(), by_rank);
    const float kth = candidates_[k - 1].logit;
    const auto end = std::partition(first + static_cast<std::ptrdiff_t>(k), candidates_.end(),
                                    [&](const Candidate& c) { return c.logit >= kth; });
    count = static_cast<std::size_t>(end - first);
  }

  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    Candidate& c = candidates_[i];
    c.weight = std::exp((c.logit - max_logit) * inverse_temperature);
    total += c.weight;
  }

  // top-p keeps the most likely tokens down to the first whose cumulative probability reaches top_p. Rather
  // than sort every candidate, sort a chunk of the best at a time, doubling it until the mass is reached.
  std::size_t kept = count;
  double kept_mass = total;
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    bool reached = false;
    for (std::size_t begin = 0, chunk = kTopPFirstChunk; begin < count && !reached; chunk *= 2) {
      const std::size_t end = std::min(count, begin + chunk);
      const auto last = first + static_cast<std::ptrdiff_t>(count);
      if (end < count)
        std::nth_element(first + static_cast<std::ptrdiff_t>(begin), first + static_cast<std::ptrdiff_t>(end), last,
                         by_rank);
      std::sort(first + static_cast<std::ptrdiff_t>(begin), first + static_cast<std::ptrdiff_t>(end), by_rank);
      for (std::size_t i = begin; i < end; ++i) {
        mass += candidates_[i].weight;
        if (mass >= target) {
          kept = i + 1;
          reached = true;
          break;
        }
      }
      begin = end;
    }
    // Unreached only through rounding with top_p next to 1: everything stays, its mass summed in this order.
    kept_mass = mass;
  }

  // Inverse CDF over the kept tokens, summed in the same order as their mass, so the walk always ends inside.
  const double u = uniform01(rng_) * kept_mass;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < kept; ++i) {
    cumulative += candidates_[i].weight;
    if (u < cumulative) return candidates_[i].token;
  }
  return kept > 0 ? candidates_[kept - 1].token : static_cast<std::int32_t>(argmax);
}

}  // namespace engine::sampling
