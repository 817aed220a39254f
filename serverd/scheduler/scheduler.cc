#include "serverd/scheduler/scheduler.h"

#include <algorithm>
#include <iostream>

#include "base/printable.h"

namespace serverd::scheduler {

using api::FinishReason;

struct Scheduler::Sequence {
  std::uint64_t handle = 0;
  api::GenerationRequest request;
  std::shared_ptr<api::GenerationSink> sink;
  engine::sampling::SequenceSampler sampler;
  engine::runtime::SequenceCache cache;
  std::vector<std::int32_t> tokens;  // the prompt, then every generated token
  std::size_t generated = 0;
  std::vector<engine::runtime::BlockKey> block_keys;  // of tokens' full blocks, for the prefix cache
  std::size_t blocks_cached = 0;                      // of its blocks, those offered to the prefix cache
  bool prefix_looked_up = false;
  api::SequenceTimings timings;
  bool cached_reported = false;  // on_prompt_cached was called
  std::size_t next_scored = 1;   // prompt_logprobs: the first prompt token whose log-probability is still owed
  std::optional<engine::model::PooledState> pooled;  // an embedding: its prompt's hidden states pooled so far

  // Whether prompt tokens are still to be scored. Scoring token t needs the logits at position t - 1.
  bool scoring() const { return request.prompt_logprobs && next_scored < request.prompt_tokens.size(); }
  // Whether every prompt position's hidden state goes into its embedding (mean and first-token pooling), so
  // that none may come from the prefix cache. Last-token pooling needs only the last, which is always computed.
  bool pools_every_position() const {
    return request.pooling && request.pooling->config.type != engine::model::PoolingType::Last;
  }
  // Whether a chunk of `count` positions from `cache.cached` ends a last-token-pooled prompt.
  bool pools_last_row(std::size_t count) const {
    return request.pooling && !pools_every_position() && cache.cached + count == tokens.size();
  }
  // Of the `count` positions this step computes from `cache.cached`, the first one scored and how many are.
  std::size_t first_scored() const { return std::max(cache.cached, next_scored - 1); }
  std::size_t scored_in(std::size_t count) const {
    if (!scoring()) return 0;
    const std::size_t end = std::min(cache.cached + count, request.prompt_tokens.size() - 1);
    return end > first_scored() ? end - first_scored() : 0;
  }

  Sequence(std::uint64_t h, api::GenerationRequest r, std::shared_ptr<api::GenerationSink> s)
      : handle(h),
        request(std::move(r)),
        sink(std::move(s)),
        sampler(request.sampling, request.prompt_tokens, request.make_constraint ? request.make_constraint() : nullptr),
        tokens(request.prompt_tokens) {
    timings.queued = api::SequenceTimings::Clock::now();
  }
};

struct Scheduler::Planned {
  Sequence* seq;
  std::size_t count;   // tokens computed in this step
  bool logits;         // the step reaches the end of the sequence's known tokens: sample after it
  std::size_t scored;  // prompt tokens scored in this step
};

Scheduler::Scheduler(engine::runtime::Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  // With none, a sequence scoring its prompt could never move.
  if (options_.max_scored_tokens == 0) throw std::invalid_argument("SchedulerOptions::max_scored_tokens must be >= 1");
  for (const auto id : options_.eos_token_ids.empty() ? engine.checkpoint().eos_token_ids() : options_.eos_token_ids) {
    eos_ids_.insert(id);
  }
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::uint64_t Scheduler::submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) {
  if (request.prompt_tokens.empty()) throw std::invalid_argument("a generation request needs a prompt token");
  if (request.pooling.has_value() != options_.pooling) {
    throw std::invalid_argument(options_.pooling ? "a pooling scheduler takes embedding requests only"
                                                 : "an embedding request needs a pooling scheduler");
  }
  if (request.pooling && (request.max_tokens != 0 || request.prompt_logprobs)) {
    throw std::invalid_argument("an embedding request generates and scores nothing (max_tokens 0, no prompt_logprobs)");
  }
  if (request.max_tokens == 0 && !request.prompt_logprobs && !request.pooling) {
    throw std::invalid_argument("a generation request with max_tokens 0 must ask for prompt_logprobs");
  }
  const auto pooling_type = request.pooling ? std::optional(request.pooling->config.type) : std::nullopt;
  std::uint64_t handle = 0;
  {
    const std::lock_guard lock(mutex_);
    if (incoming_.size() + waiting_count_.load() >= options_.max_waiting) {
      throw api::GeneratorOverloaded("the server has " + std::to_string(options_.max_waiting) +
                                     " sequences waiting; retry shortly");
    }
    handle = next_handle_++;
    incoming_.push_back(std::make_unique<Sequence>(handle, std::move(request), std::move(sink)));
    if (pooling_type) incoming_.back()->pooled.emplace(*pooling_type, engine_.config().hidden_size);
  }
  wake_.notify_all();
  return handle;
}

void Scheduler::cancel(std::uint64_t handle) {
  {
    const std::lock_guard lock(mutex_);
    cancelled_.push_back(handle);
  }
  wake_.notify_all();
}

api::GeneratorStats Scheduler::stats() const {
  api::GeneratorStats s;
  s.running = running_count_.load();
  s.waiting = waiting_count_.load();
  s.kv_cache_usage = kv_usage_.load();
  s.prefix_cache_queries = prefix_queries_.load();
  s.prefix_cache_hits = prefix_hits_.load();
  s.preemptions = preemptions_.load();
  for (std::size_t i = 0; i < s.steps_by_tokens.size(); ++i) s.steps_by_tokens[i] = steps_by_tokens_[i].load();
  s.step_tokens = step_tokens_.load();
  return s;
}

void Scheduler::run() {
  std::vector<Planned> plan;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !cancelled_.empty() || !running_.empty() || !waiting_.empty();
      });
      if (stopping_) break;
    }
    take_new_work();
    plan.clear();
    if (plan_step(plan)) {
      execute(plan);
    } else if (!waiting_.empty() && running_.empty()) {
      // Nothing can run: the first waiting sequence does not fit even in an empty cache.
      finish(*waiting_.front(), FinishReason::Abort, std::nullopt);
      waiting_.pop_front();
    }
    update_stats();
  }
  take_new_work();
  for (auto& seq : running_) finish(*seq, FinishReason::Abort, std::nullopt);
  for (auto& seq : waiting_) finish(*seq, FinishReason::Abort, std::nullopt);
  running_.clear();
  waiting_.clear();
}

void Scheduler::take_new_work() {
  std::deque<std::unique_ptr<Sequence>> incoming;
  std::vector<std::uint64_t> cancelled;
  {
    const std::lock_guard lock(mutex_);
    incoming.swap(incoming_);
    cancelled.swap(cancelled_);
  }
  for (auto& seq : incoming) waiting_.push_back(std::move(seq));
  for (const auto handle : cancelled) {
    const auto matches = [&](const std::unique_ptr<Sequence>& s) { return s->handle == handle; };
    if (const auto it = std::find_if(running_.begin(), running_.end(), matches); it != running_.end()) {
      finish(**it, FinishReason::Abort, std::nullopt);
      running_.erase(it);
    } else if (const auto w = std::find_if(waiting_.begin(), waiting_.end(), matches); w != waiting_.end()) {
      finish(**w, FinishReason::Abort, std::nullopt);
      waiting_.erase(w);
    }
  }
}

void Scheduler::preempt(std::size_t running_index) {
  auto seq = std::move(running_[running_index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  engine_.release(seq->cache);  // its full blocks stay in the prefix cache; the rest is recomputed later
  seq->blocks_cached = 0;
  ++preemptions_;
  waiting_.push_front(std::move(seq));
}

std::size_t Scheduler::chunk(const Sequence& seq, std::size_t budget, std::size_t scored_budget) const {
  std::size_t n = std::min(seq.tokens.size() - seq.cache.cached, budget);
  // Positions before first_scored() are recomputed (after a preemption) without scoring.
  if (seq.scoring()) n = std::min(n, seq.first_scored() + scored_budget - seq.cache.cached);
  return n;
}

bool Scheduler::plan_step(std::vector<Planned>& plan) {
  std::size_t budget = options_.max_num_batched_tokens;
  std::size_t scored_budget = options_.max_scored_tokens;
  const auto add = [&](Sequence& seq, std::size_t n) {
    const bool samples = seq.cache.cached + n == seq.tokens.size() && seq.request.max_tokens > 0;
    plan.push_back({&seq, n, samples, seq.scored_in(n)});
    budget -= n;
    scored_budget -= plan.back().scored;
  };
  // Running sequences first, oldest first; the newest give way when blocks run out.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& seq = *running_[i];
    const std::size_t n = chunk(seq, budget, scored_budget);
    if (n == 0) continue;  // no scored-token budget left this step
    bool preempted_self = false;
    while (!engine_.reserve(seq.cache, seq.cache.cached + n)) {
      const std::size_t victim = running_.size() - 1;
      preempted_self = victim == i;
      preempt(victim);
      if (preempted_self) break;
    }
    if (preempted_self) break;
    add(seq, n);
  }
  // Then waiting sequences, first come first served, while the budgets and blocks allow.
  while (!waiting_.empty() && running_.size() < options_.max_num_seqs && budget > 0) {
    Sequence& seq = *waiting_.front();
    // A sequence scoring its prompt must compute every position whose logits still score a token: as in vLLM,
    // a fresh one takes nothing from the prefix cache (and counts no lookup); one preempted midway may take
    // the positions whose log-probabilities it delivered.
    const std::size_t cacheable = seq.pools_every_position() ? 0
                                  : seq.scoring()            ? seq.next_scored - 1
                                                             : seq.tokens.size();
    const bool look_up = options_.prefix_caching && cacheable > 0;
    if (look_up) {
      auto& kv = engine_.kv_cache();
      kv.extend_keys(seq.tokens, seq.block_keys);
      // The block holding the last known token is always computed, so that there are logits to sample.
      const std::size_t max_blocks =
          std::min((seq.tokens.size() - 1) / engine_.block_size(), cacheable / engine_.block_size());
      const std::size_t hits = kv.match(seq.tokens, seq.block_keys, max_blocks, seq.cache.block_table);
      seq.cache.cached = hits * engine_.block_size();
      seq.blocks_cached = hits;
    }
    const std::size_t n = chunk(seq, budget, scored_budget);
    if (n == 0 || !engine_.reserve(seq.cache, seq.cache.cached + n)) {
      // It waits (for the scored-token budget, or for running sequences to free blocks) holding nothing:
      // blocks it matched would starve the running ones. It looks its prefix up again next time.
      engine_.release(seq.cache);
      seq.blocks_cached = 0;
      break;
    }
    if (look_up) {
      prefix_queries_ += seq.tokens.size();  // as vLLM counts: every known token, generated ones included
      prefix_hits_ += seq.cache.cached;
    }
    if (!seq.timings.scheduled) seq.timings.scheduled = api::SequenceTimings::Clock::now();
    add(seq, n);
    if (!seq.cached_reported) {
      seq.cached_reported = true;
      seq.sink->on_prompt_cached(seq.cache.cached);
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return !plan.empty();
}

void Scheduler::execute(std::vector<Planned>& plan) {
  std::vector<engine::runtime::StepInput> inputs;
  std::vector<engine::sampling::SequenceSampler*> samplers;
  inputs.reserve(plan.size());
  for (const auto& p : plan) {
    Sequence& seq = *p.seq;
    const std::span<const std::int32_t> tokens(seq.tokens.data() + seq.cache.cached, p.count);
    // Mean and first-token pooling take the hidden state of every position computed; last-token pooling only
    // the prompt's last, in its last chunk.
    engine::runtime::StepInput input{&seq.cache, tokens, seq.pools_every_position(),
                                     !p.logits && !seq.pools_every_position() && !seq.pools_last_row(p.count)};
    if (p.scored > 0) {
      // The row of position q scores prompt token q + 1.
      const std::size_t first = seq.first_scored();
      input.score_first = first - seq.cache.cached;
      input.score_targets = std::span(seq.tokens).subspan(first + 1, p.scored);
      input.score_top = *seq.request.prompt_logprobs;
    }
    inputs.push_back(input);
    if (p.logits) samplers.push_back(&seq.sampler);
  }
  try {
    if (options_.pooling) {
      engine_.step_hidden(inputs, hidden_);
    } else {
      engine_.step_and_sample(inputs, samplers, sampled_, scored_);
    }
  } catch (const std::exception& e) {
    std::cerr << "serverd: an engine step failed: " << base::printable(e.what()) << "; its sequences are aborted\n";
    for (const auto& p : plan) p.seq->cache.cached = 0;
    std::vector<std::uint64_t> failed;
    for (const auto& p : plan) failed.push_back(p.seq->handle);
    for (const auto handle : failed) {
      const auto it = std::find_if(running_.begin(), running_.end(), [&](auto& s) { return s->handle == handle; });
      finish(**it, FinishReason::Abort, std::nullopt);
      running_.erase(it);
    }
    return;
  }
  ++steps_;
  count_step(plan);  // before any sink hears of the step, so that stats() read after it include the step
  const auto stepped = api::SequenceTimings::Clock::now();
  const std::size_t bs = engine_.block_size();
  std::size_t row = 0;
  std::size_t scored_row = 0;
  std::size_t hidden_row = 0;
  const std::size_t hidden_size = engine_.config().hidden_size;
  std::vector<std::uint64_t> done;
  for (const auto& p : plan) {
    Sequence& seq = *p.seq;
    if (seq.pooled) {
      // The step advanced cached past this chunk: its rows are the chunk's, or (last-token pooling) its last.
      const std::size_t rows = seq.pools_every_position() ? p.count : (seq.cache.cached == seq.tokens.size() ? 1 : 0);
      seq.pooled->add(seq.cache.cached - rows,
                      std::span(hidden_).subspan(hidden_row * hidden_size, rows * hidden_size));
      hidden_row += rows;
    }
    if (p.scored > 0) {
      seq.sink->on_prompt_logprobs(std::span(scored_).subspan(scored_row, p.scored));
      scored_row += p.scored;
      seq.next_scored += p.scored;
    }
    // Blocks this step filled, of prompt or generated tokens, join the prefix cache.
    if (const std::size_t full = seq.cache.cached / bs; options_.prefix_caching && full > seq.blocks_cached) {
      auto& kv = engine_.kv_cache();
      kv.extend_keys(seq.tokens, seq.block_keys);
      kv.cache_blocks(seq.tokens, seq.block_keys, seq.cache.block_table, seq.blocks_cached, full);
      seq.blocks_cached = full;
    }
    if (!p.logits) {
      if (seq.request.max_tokens == 0 && seq.cache.cached == seq.tokens.size()) {
        if (seq.pooled) {
          const auto& pooling = *seq.request.pooling;
          seq.sink->on_pooled(seq.pooled->finish(seq.tokens.size(), pooling.dimensions, pooling.config.normalize));
        }
        finish(seq, FinishReason::Length, std::nullopt);  // a prompt scored or pooled, nothing to generate
        done.push_back(seq.handle);
      }
      continue;
    }
    const auto& sampled = sampled_[row];
    ++row;
    const std::int32_t token = sampled.token;
    if (!seq.timings.first_token) seq.timings.first_token = stepped;
    seq.timings.last_token = stepped;
    seq.tokens.push_back(token);
    ++seq.generated;
    const api::GeneratedToken out{sampled};
    seq.sink->on_tokens(std::span(&out, 1));

    const bool eos = !seq.request.ignore_eos && eos_ids_.contains(token);
    const auto& stops = seq.request.stop_token_ids;
    const bool stop_id = std::find(stops.begin(), stops.end(), token) != stops.end();
    if ((eos || stop_id) && seq.generated >= seq.request.min_tokens) {
      finish(seq, FinishReason::Stop, token);
      done.push_back(seq.handle);
    } else if (seq.sampler.constraint_terminated()) {
      // The grammar ended (vLLM's stop): nothing more may follow, whatever min_tokens or ignore_eos say.
      finish(seq, FinishReason::Stop, eos || stop_id ? std::optional(token) : std::nullopt);
      done.push_back(seq.handle);
    } else if (seq.generated >= seq.request.max_tokens || seq.tokens.size() >= engine_.max_model_len()) {
      finish(seq, FinishReason::Length, std::nullopt);
      done.push_back(seq.handle);
    }
  }
  if (!done.empty()) {
    std::erase_if(running_, [&](const std::unique_ptr<Sequence>& s) {
      return std::find(done.begin(), done.end(), s->handle) != done.end();
    });
  }
}

void Scheduler::count_step(const std::vector<Planned>& plan) {
  // As vLLM counts a step's tokens: a sequence's whole prompt with its first token, then one per token.
  std::uint64_t tokens = 0;
  for (const auto& p : plan) {
    if (p.logits) tokens += 1 + (p.seq->timings.first_token ? 0 : p.seq->request.prompt_tokens.size());
  }
  const auto& bounds = api::kIterationTokenBuckets;
  const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(tokens)) - bounds.begin();
  ++steps_by_tokens_[static_cast<std::size_t>(bucket)];
  step_tokens_ += tokens;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, std::optional<std::int32_t> stop_token) {
  if (!seq.cache.block_table.empty()) engine_.release(seq.cache);
  seq.sink->on_finish(reason, stop_token, seq.timings);
}

void Scheduler::update_stats() {
  running_count_ = running_.size();
  std::size_t queued = waiting_.size();
  {
    const std::lock_guard lock(mutex_);
    queued += incoming_.size();
  }
  waiting_count_ = queued;
  kv_usage_ = engine_.kv_cache().usage();
}

}  // namespace serverd::scheduler
