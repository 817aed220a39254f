#pragma once

// A deterministic Generator for serverd's tests: an engine thread that emits, one token per sequence per step,
// what a script says the model would produce, and applies the stop rules a real scheduler applies (EOS
// unless ignore_eos, stop_token_ids, min_tokens, max_tokens). It reports SequenceTimings as a scheduler
// would (queued at submit, scheduled at its first step, each token at its step). A request with
// prompt_logprobs first gets its prompt's (prompt_scored's numbers), in two pieces, and one with max_tokens 0
// then ends with Length; a pooling request gets embedding_of() its request, then ends with Length. Tests can hold
// sequences after some tokens, wait for cancellations, and read what was submitted.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "serverd/api/generator.h"

namespace serverd_test {

class FakeGenerator final : public serverd::api::Generator {
 public:
  // The tokens the "model" would produce for a request, before stop rules and max_tokens.
  using Script = std::function<std::vector<std::int32_t>(const serverd::api::GenerationRequest&)>;

  // The default script echoes the prompt, then the first EOS id.
  explicit FakeGenerator(std::vector<std::int32_t> eos_ids);
  ~FakeGenerator() override;

  std::uint64_t submit(serverd::api::GenerationRequest request,
                       std::shared_ptr<serverd::api::GenerationSink> sink) override;
  void cancel(std::uint64_t handle) override;
  serverd::api::GeneratorStats stats() const override;

  void set_script(Script script);
  // Sequences emit at most `tokens` tokens, then wait for release() (or a cancel).
  void hold_after(std::size_t tokens);
  void release();
  // Sequences that score their prompt (prompt_logprobs) do nothing while set; the others go on.
  void hold_prompt_scoring(bool hold);
  // submit() throws GeneratorOverloaded while set.
  void set_overloaded(bool overloaded);
  void set_stats(serverd::api::GeneratorStats stats);
  // Each sequence reports this many prompt tokens served from a prefix cache (on_prompt_cached) before its
  // first token.
  void set_cached_prompt_tokens(std::size_t tokens);

  // Waits (bounded, so a bug fails instead of hanging) until `predicate` holds, checked whenever the fake's
  // state changes. Returns the predicate's last value.
  bool wait_until(const std::function<bool(const FakeGenerator&)>& predicate,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // Read under the fake's lock by wait_until predicates, or by tests.
  std::size_t submitted_count() const;
  std::size_t cancelled_count() const;
  std::size_t active_count() const;
  // Sequences that have emitted at least `tokens` tokens and are not finished.
  std::size_t holding_count(std::size_t tokens) const;
  std::vector<serverd::api::GenerationRequest> submitted() const;

  // The log-probabilities the fake reports for `token` (and its top list) when asked.
  static engine::sampling::SampledToken sampled(std::int32_t token, int logprobs);
  // What the fake reports for a prompt token: 'a', 'b', ... are the most likely, a tenth of a nat apart; a
  // token among the `top` has that place, any other ranks 1000 + its id with -5 - id / 100.
  static serverd::api::PromptLogprob prompt_scored(std::int32_t token, std::size_t top);
  // The embedding the fake pools for a request: 8 values (each prompt token's id plus its place, the prompt
  // repeated as needed), cut to its dimensions, normalised when it says so.
  static std::vector<float> embedding_of(const serverd::api::GenerationRequest& request);

 private:
  struct Sequence {
    serverd::api::GenerationRequest request;
    std::shared_ptr<serverd::api::GenerationSink> sink;
    std::vector<std::int32_t> script;
    std::size_t emitted = 0;
    bool prompt_scored = false;
    bool cancelled = false;
    serverd::api::SequenceTimings timings;
  };
  void run();
  void changed();  // with mutex_ held
  bool is_eos(std::int32_t token) const;

  const std::vector<std::int32_t> eos_ids_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  Script script_;
  std::map<std::uint64_t, Sequence> active_;
  std::vector<serverd::api::GenerationRequest> submitted_;
  std::set<std::uint64_t> cancelled_;
  std::uint64_t next_handle_ = 1;
  std::uint64_t version_ = 0;  // bumped on every change
  std::size_t hold_after_ = SIZE_MAX;
  bool hold_scoring_ = false;
  bool overloaded_ = false;
  bool stopping_ = false;
  serverd::api::GeneratorStats stats_;
  std::optional<std::size_t> cached_prompt_tokens_;
  std::thread engine_;
};

}  // namespace serverd_test
