#pragma once

// Continuous batching on the engine: one engine thread runs step after step. Each step first continues the
// running sequences (a decode token each, or the next chunk of a prompt), then admits waiting ones under
// the sequence and token budgets (long prompts are prefilled in chunks), reusing cached prompt prefixes.
// When KV blocks run out the most recently admitted sequence is preempted and later recomputed. A cancelled
// sequence (client gone, stop string found) leaves at the start of the next step with its blocks.
// A sequence asking for prompt_logprobs has its prompt tokens scored as its prefill computes them (a prompt
// chunk's rows are scored, the last one sampled): it takes from the prefix cache only positions whose
// log-probabilities are already delivered, so nothing is skipped, and a recompute scores nothing twice.
// A sequence with a constraint (structured outputs) keeps it in its sampler, which sees only sampled tokens:
// a recompute feeds it nothing again; it ends with Stop once the constraint is terminated.
// An embedding request (pooling) computes its prompt, every position's hidden state pooled as its chunks
// come (mean and first-token pooling take nothing from the prefix cache), and ends with Length after
// on_pooled().

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/sampling/sampler.h"
#include "serverd/api/generator.h"

namespace serverd::scheduler {

struct SchedulerOptions {
  std::size_t max_num_seqs = 256;             // sequences in one step
  std::size_t max_num_batched_tokens = 2048;  // tokens in one step (prefill chunks included)
  std::size_t max_waiting = 4096;             // queued sequences before submit() reports overload
  bool prefix_caching = true;                 // --no-enable-prefix-caching turns it off
  std::vector<std::int32_t> eos_token_ids;    // the ids that end a sequence; empty: the checkpoint's
  // Prompt tokens scored in one step: each holds a row of vocab_size logits until it is scanned.
  std::size_t max_scored_tokens = 512;
  // The engine serves embeddings (vLLM's pooling runner): every request is pooled (GenerationRequest::pooling)
  // and steps return hidden states; none generates.
  bool pooling = false;
};

class Scheduler final : public api::Generator {
 public:
  // Starts the engine thread. The engine must outlive the generator.
  Scheduler(engine::runtime::Engine& engine, SchedulerOptions options);
  // Stops the engine thread; sequences still queued or running end with Abort.
  ~Scheduler() override;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::uint64_t submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) override;
  void cancel(std::uint64_t handle) override;
  api::GeneratorStats stats() const override;

  // Engine steps run so far.
  std::uint64_t steps() const { return steps_.load(); }

 private:
  struct Sequence;
  struct Planned;

  void run();
  void take_new_work();
  bool plan_step(std::vector<Planned>& plan);
  // Tokens of `seq` to compute in this step, within the token budget and the scored-token budget.
  std::size_t chunk(const Sequence& seq, std::size_t budget, std::size_t scored_budget) const;
  void preempt(std::size_t running_index);
  void execute(std::vector<Planned>& plan);
  void finish(Sequence& seq, api::FinishReason reason, std::optional<std::int32_t> stop_token);
  void update_stats();
  void count_step(const std::vector<Planned>& plan);

  engine::runtime::Engine& engine_;
  const SchedulerOptions options_;
  std::unordered_set<std::int32_t> eos_ids_;

  // Shared with the I/O threads.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  std::vector<std::uint64_t> cancelled_;
  std::uint64_t next_handle_ = 1;
  bool stopping_ = false;

  // The engine thread's own.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;       // in admission order
  std::vector<engine::sampling::SampledToken> sampled_;  // reused from step to step
  std::vector<engine::sampling::ScoredToken> scored_;
  std::vector<float> hidden_;  // a pooling step's hidden states

  std::atomic<std::size_t> running_count_{0}, waiting_count_{0};
  std::atomic<double> kv_usage_{0.0};
  std::atomic<std::uint64_t> prefix_queries_{0}, prefix_hits_{0}, steps_{0}, preemptions_{0};
  std::array<std::atomic<std::uint64_t>, api::kIterationTokenBuckets.size() + 1> steps_by_tokens_{};
  std::atomic<std::uint64_t> step_tokens_{0};
  std::thread thread_;
};

}  // namespace serverd::scheduler
