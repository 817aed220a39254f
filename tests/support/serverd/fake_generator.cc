#include "tests/support/serverd/fake_generator.h"

#include <algorithm>
#include <cmath>

namespace serverd_test {

using serverd::api::FinishReason;
using serverd::api::GeneratedToken;
using serverd::api::GenerationRequest;

FakeGenerator::FakeGenerator(std::vector<std::int32_t> eos_ids) : eos_ids_(std::move(eos_ids)) {
  script_ = [this](const GenerationRequest& request) {
    std::vector<std::int32_t> tokens = request.prompt_tokens;
    if (!eos_ids_.empty()) tokens.push_back(eos_ids_.front());
    return tokens;
  };
  engine_ = std::thread([this] { run(); });
}

FakeGenerator::~FakeGenerator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed();
  }
  engine_.join();
}

std::uint64_t FakeGenerator::submit(GenerationRequest request, std::shared_ptr<serverd::api::GenerationSink> sink) {
  std::lock_guard lock(mutex_);
  if (overloaded_) throw serverd::api::GeneratorOverloaded("the fake is full");
  const std::uint64_t handle = next_handle_++;
  Sequence sequence;
  sequence.timings.queued = serverd::api::SequenceTimings::Clock::now();
  sequence.script = script_(request);
  sequence.request = request;
  sequence.sink = std::move(sink);
  submitted_.push_back(std::move(request));
  active_.emplace(handle, std::move(sequence));
  changed();
  return handle;
}

void FakeGenerator::cancel(std::uint64_t handle) {
  std::lock_guard lock(mutex_);
  const auto found = active_.find(handle);
  if (found == active_.end()) return;
  found->second.cancelled = true;
  cancelled_.insert(handle);
  changed();
}

serverd::api::GeneratorStats FakeGenerator::stats() const {
  std::lock_guard lock(mutex_);
  auto stats = stats_;
  stats.running = active_.size();
  return stats;
}

void FakeGenerator::set_script(Script script) {
  std::lock_guard lock(mutex_);
  script_ = std::move(script);
}

void FakeGenerator::hold_after(std::size_t tokens) {
  std::lock_guard lock(mutex_);
  hold_after_ = tokens;
  changed();
}

void FakeGenerator::release() {
  hold_after(SIZE_MAX);
}

void FakeGenerator::hold_prompt_scoring(bool hold) {
  std::lock_guard lock(mutex_);
  hold_scoring_ = hold;
  changed();
}

void FakeGenerator::set_overloaded(bool overloaded) {
  std::lock_guard lock(mutex_);
  overloaded_ = overloaded;
}

void FakeGenerator::set_cached_prompt_tokens(std::size_t tokens) {
  std::lock_guard lock(mutex_);
  cached_prompt_tokens_ = tokens;
}

void FakeGenerator::set_stats(serverd::api::GeneratorStats stats) {
  std::lock_guard lock(mutex_);
  stats_ = stats;
}

bool FakeGenerator::wait_until(const std::function<bool(const FakeGenerator&)>& predicate,
                               std::chrono::milliseconds timeout) const {
  // The predicate reads through the public accessors, which take the lock, so it runs unlocked; the version
  // counter tells whether anything changed while it ran.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  for (;;) {
    const std::uint64_t seen = version_;
    lock.unlock();
    if (predicate(*this)) return true;
    lock.lock();
    if (!changed_.wait_until(lock, deadline, [&] { return version_ != seen; })) {
      lock.unlock();
      return predicate(*this);
    }
  }
}

std::size_t FakeGenerator::submitted_count() const {
  std::lock_guard lock(mutex_);
  return submitted_.size();
}

std::size_t FakeGenerator::cancelled_count() const {
  std::lock_guard lock(mutex_);
  return cancelled_.size();
}

std::size_t FakeGenerator::active_count() const {
  std::lock_guard lock(mutex_);
  return active_.size();
}

std::size_t FakeGenerator::holding_count(std::size_t tokens) const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(active_.begin(), active_.end(), [&](const auto& entry) { return entry.second.emitted >= tokens; }));
}

std::vector<GenerationRequest> FakeGenerator::submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

engine::sampling::SampledToken FakeGenerator::sampled(std::int32_t token, int logprobs) {
  engine::sampling::SampledToken s;
  s.token = token;
  s.logprob = -0.25f * static_cast<float>(1 + token % 4);
  // The chosen token is the most likely; the next ids follow, each half a nat less likely.
  for (int i = 0; i < logprobs; ++i) s.top.push_back({token + i, s.logprob - 0.5f * static_cast<float>(i)});
  return s;
}

serverd::api::PromptLogprob FakeGenerator::prompt_scored(std::int32_t token, std::size_t top) {
  serverd::api::PromptLogprob e;
  e.token = token;
  for (std::size_t i = 0; i < top; ++i) {
    e.top.push_back({'a' + static_cast<std::int32_t>(i), -0.1f * static_cast<float>(i + 1)});
  }
  if (token >= 'a' && static_cast<std::size_t>(token - 'a') < top) {
    const auto place = static_cast<std::size_t>(token - 'a');
    e.logprob = e.top[place].logprob;
    e.rank = place + 1;
  } else {
    e.logprob = -5.0f - 0.01f * static_cast<float>(token);
    e.rank = 1000 + static_cast<std::size_t>(token);
  }
  return e;
}

std::vector<float> FakeGenerator::embedding_of(const serverd::api::GenerationRequest& request) {
  const auto& prompt = request.prompt_tokens;
  std::size_t size = 8;
  if (request.pooling && request.pooling->dimensions != 0) size = std::min(size, request.pooling->dimensions);
  std::vector<float> v(size);
  for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<float>(prompt[i % prompt.size()]) + static_cast<float>(i);
  if (request.pooling && request.pooling->config.normalize) {
    double norm = 0;
    for (const float x : v) norm += double{x} * x;
    for (auto& x : v) x = static_cast<float>(x / std::sqrt(norm));
  }
  return v;
}

bool FakeGenerator::is_eos(std::int32_t token) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

void FakeGenerator::run() {
  struct Action {
    std::shared_ptr<serverd::api::GenerationSink> sink;
    std::vector<serverd::api::PromptLogprob> prompt;  // prompt tokens 1, 2, ...
    std::optional<GeneratedToken> token;
    std::optional<FinishReason> finish;
    std::optional<std::int32_t> stop_token;
    serverd::api::SequenceTimings timings;
    std::optional<std::size_t> cached;  // reported before the first token
    std::vector<float> embedding;       // a pooling request's
  };
  std::unique_lock lock(mutex_);
  for (;;) {
    // One step: every sequence that may move emits one token (or ends).
    const auto now = serverd::api::SequenceTimings::Clock::now();
    std::vector<Action> actions;
    for (auto it = active_.begin(); it != active_.end();) {
      Sequence& s = it->second;
      if (hold_scoring_ && s.request.prompt_logprobs && !s.cancelled) {
        ++it;
        continue;
      }
      if (!s.timings.scheduled) s.timings.scheduled = now;
      Action action{s.sink, {}, std::nullopt, std::nullopt, std::nullopt, {}, std::nullopt, {}};
      const auto& prompt = s.request.prompt_tokens;
      if (!s.cancelled && s.request.prompt_logprobs && !s.prompt_scored) {
        s.prompt_scored = true;
        for (std::size_t i = 1; i < prompt.size(); ++i) {
          action.prompt.push_back(prompt_scored(prompt[i], *s.request.prompt_logprobs));
        }
      }
      if (s.cancelled) {
        action.finish = FinishReason::Abort;
      } else if (s.request.pooling) {
        action.embedding = embedding_of(s.request);
        action.finish = FinishReason::Length;
      } else if (s.request.max_tokens == 0) {
        action.finish = FinishReason::Length;  // the prompt scored, nothing to generate
      } else if (s.emitted >= hold_after_) {
        if (!action.prompt.empty()) actions.push_back(std::move(action));
        ++it;
        continue;
      } else if (s.emitted >= s.script.size()) {
        action.finish = FinishReason::Length;  // the script has nothing more to say
      } else {
        if (s.emitted == 0) action.cached = cached_prompt_tokens_;
        const std::int32_t token = s.script[s.emitted++];
        action.token = GeneratedToken{sampled(token, s.request.sampling.logprobs)};
        if (!s.timings.first_token) s.timings.first_token = now;
        s.timings.last_token = now;
        const auto& r = s.request;
        const bool stop_id =
            std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
        if (((!r.ignore_eos && is_eos(token)) || stop_id) && s.emitted > r.min_tokens) {
          action.finish = FinishReason::Stop;
          action.stop_token = token;
        } else if (s.emitted >= r.max_tokens) {
          action.finish = FinishReason::Length;
        }
      }
      const bool done = action.finish.has_value();
      action.timings = s.timings;
      actions.push_back(std::move(action));
      it = done ? active_.erase(it) : std::next(it);
    }
    if (actions.empty()) {
      if (stopping_) break;
      changed_.wait(lock);
      continue;
    }
    lock.unlock();
    for (auto& action : actions) {
      if (action.cached) action.sink->on_prompt_cached(*action.cached);
      // In two pieces, as a chunked prefill would deliver them.
      const std::span<const serverd::api::PromptLogprob> prompt(action.prompt);
      if (prompt.size() > 1) action.sink->on_prompt_logprobs(prompt.first(prompt.size() / 2));
      if (!prompt.empty()) action.sink->on_prompt_logprobs(prompt.subspan(prompt.size() / 2));
      if (action.token) action.sink->on_tokens(std::span<const GeneratedToken>(&*action.token, 1));
      if (!action.embedding.empty()) action.sink->on_pooled(std::move(action.embedding));
      if (action.finish) action.sink->on_finish(*action.finish, action.stop_token, action.timings);
    }
    lock.lock();
    changed();
  }
  // Stopping: whatever is left ends as aborted, as a real engine would end it.
  auto left = std::move(active_);
  active_.clear();
  lock.unlock();
  for (auto& [handle, s] : left) s.sink->on_finish(FinishReason::Abort, std::nullopt, s.timings);
}

void FakeGenerator::changed() {
  ++version_;
  changed_.notify_all();
}

}  // namespace serverd_test
