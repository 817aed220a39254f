// The continuous-batching scheduler on the CPU engine with a tiny random Qwen3 model: sequences batched
// together, prefilled in chunks, preempted and recomputed, or reusing a cached prefix generate exactly the
// tokens they generate alone; stop conditions, cancellation and block accounting. Prompt log-probabilities
// (prompt_logprobs) match the float64 reference and come out the same, each exactly once, whole, in
// chunks, beside a cached prefix and across a preemption. Constrained sequences (structured outputs) take
// only their own constraint's tokens, in one batch, each token fed to it once across a preemption, and end
// with Stop when it ends or Length at max_tokens. Embeddings (a pooling scheduler) match the float64
// reference's pooled hidden states whole, in chunks and waiting for blocks; last-token pooling alone takes a
// cached prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>

#include "engine/model_writer/model_writer.h"
#include "serverd/scheduler/scheduler.h"
#include "tests/support/allow_set_constraint.h"
#include "tests/support/reference_model.h"
#include "tests/support/reference_scores.h"
#include "tests/support/temp_dir.h"

namespace {

using serverd::api::FinishReason;
using serverd::api::GenerationRequest;
using serverd::scheduler::Scheduler;
using serverd::scheduler::SchedulerOptions;
using testing_support::AllowSetConstraint;

// Collects one sequence's prompt log-probabilities and tokens; wait() returns once on_finish has run.
class RecordingSink final : public serverd::api::GenerationSink {
 public:
  void on_prompt_logprobs(std::span<const serverd::api::PromptLogprob> entries) override {
    const std::lock_guard lock(mutex_);
    if (!tokens_.empty()) ADD_FAILURE() << "prompt log-probabilities after a generated token";
    prompt_logprobs_.insert(prompt_logprobs_.end(), entries.begin(), entries.end());
  }
  void on_tokens(std::span<const serverd::api::GeneratedToken> tokens) override {
    const std::lock_guard lock(mutex_);
    for (const auto& t : tokens) tokens_.push_back(t.sampled.token);
    changed_.notify_all();
  }
  void on_prompt_cached(std::size_t tokens) override {
    const std::lock_guard lock(mutex_);
    cached_.push_back(tokens);
  }
  void on_pooled(std::vector<float> embedding) override {
    const std::lock_guard lock(mutex_);
    if (!embedding_.empty()) ADD_FAILURE() << "a second embedding";
    embedding_ = std::move(embedding);
  }
  void on_finish(FinishReason reason, std::optional<std::int32_t> stop_token,
                 const serverd::api::SequenceTimings& timings) override {
    const std::lock_guard lock(mutex_);
    reason_ = reason;
    stop_token_ = stop_token;
    timings_ = timings;
    ++finishes_;
    changed_.notify_all();
  }
  bool wait_tokens(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(120), [&] { return tokens_.size() >= n || finishes_ > 0; });
  }
  std::vector<std::int32_t> wait() {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(changed_.wait_for(lock, std::chrono::seconds(120), [&] { return finishes_ > 0; }));
    return tokens_;
  }
  // Read after wait().
  const std::vector<serverd::api::PromptLogprob>& prompt_logprobs() const { return prompt_logprobs_; }
  FinishReason reason() const { return reason_; }
  std::optional<std::int32_t> stop_token() const { return stop_token_; }
  const serverd::api::SequenceTimings& timings() const { return timings_; }
  int finishes() const { return finishes_; }
  const std::vector<float>& embedding() const { return embedding_; }
  std::vector<std::size_t> cached() {
    const std::lock_guard lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::int32_t> tokens_;
  std::vector<serverd::api::PromptLogprob> prompt_logprobs_;
  FinishReason reason_ = FinishReason::Abort;
  std::optional<std::int32_t> stop_token_;
  serverd::api::SequenceTimings timings_;
  int finishes_ = 0;
  std::vector<std::size_t> cached_;  // each on_prompt_cached
  std::vector<float> embedding_;
};

std::vector<std::int32_t> prompt(std::size_t length, int salt) {
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < length; ++i) ids.push_back(static_cast<std::int32_t>((i * 37 + salt * 101 + 5) % 500));
  return ids;
}

GenerationRequest request(std::vector<std::int32_t> tokens, std::size_t max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(tokens);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

GenerationRequest scoring(std::vector<std::int32_t> tokens, std::size_t max_tokens, std::size_t top) {
  auto r = request(std::move(tokens), max_tokens);
  r.prompt_logprobs = top;
  return r;
}

// Entries equal in every number (the CPU engine computes a row the same way in any step).
void expect_same_entries(const std::vector<serverd::api::PromptLogprob>& got,
                         const std::vector<serverd::api::PromptLogprob>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].token, want[i].token);
    EXPECT_EQ(got[i].logprob, want[i].logprob);
    EXPECT_EQ(got[i].rank, want[i].rank);
    ASSERT_EQ(got[i].top.size(), want[i].top.size());
    for (std::size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_EQ(got[i].top[k].token, want[i].top[k].token);
      EXPECT_EQ(got[i].top[k].logprob, want[i].top[k].logprob);
    }
  }
}

class SchedulerTest : public testing::Test {
 protected:
  void SetUp() override {
    engine::tools::ModelWriterOptions options;
    options.arch = engine::model::Architecture::Qwen3;
    options.out_dir = dir_.path();
    options.seed = 3;
    engine::tools::write_model(options);
  }

  std::unique_ptr<engine::runtime::Engine> load(std::size_t kv_blocks = 0,
                                                std::size_t block_size = engine::runtime::kDefaultBlockSize) {
    engine::runtime::EngineOptions options;
    options.threads = 2;
    options.max_model_len = 256;
    options.block_size = block_size;
    // f32 keys and values: the cache is sized in f32 blocks below, and prompt scores meet the reference to 1e-4.
    options.kv_cache_dtype = engine::runtime::KvCacheDtype::Float32;
    if (kv_blocks) {
      const auto& c = engine::runtime::Engine::load(dir_.path(), options)->config();
      options.kv_cache_bytes = kv_blocks * c.num_layers * 2 * c.num_kv_heads * block_size * c.head_dim * sizeof(float);
      options.max_model_len = kv_blocks * block_size;
    }
    return engine::runtime::Engine::load(dir_.path(), options);
  }

  // Each request run alone, one after another.
  std::vector<std::vector<std::int32_t>> alone(const std::vector<GenerationRequest>& requests) {
    auto engine = load();
    Scheduler generator(*engine, {});
    std::vector<std::vector<std::int32_t>> out;
    for (const auto& r : requests) {
      auto sink = std::make_shared<RecordingSink>();
      generator.submit(r, sink);
      out.push_back(sink->wait());
    }
    return out;
  }

  // All requests submitted at once.
  std::vector<std::vector<std::int32_t>> together(Scheduler& generator,
                                                  const std::vector<GenerationRequest>& requests) {
    std::vector<std::vector<std::int32_t>> out;
    for (auto& sink : sinks_together(generator, requests)) out.push_back(sink->wait());
    return out;
  }
  std::vector<std::shared_ptr<RecordingSink>> sinks_together(Scheduler& generator,
                                                             const std::vector<GenerationRequest>& requests) {
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (const auto& r : requests) {
      sinks.push_back(std::make_shared<RecordingSink>());
      generator.submit(r, sinks.back());
    }
    for (auto& sink : sinks) sink->wait();
    return sinks;
  }

  testing_support::TempDir dir_;
};

TEST_F(SchedulerTest, BatchedSequencesGenerateWhatTheyGenerateAlone) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request(prompt(5 + 7 * static_cast<std::size_t>(i), i), 12));
  const auto expected = alone(requests);
  auto engine = load();
  Scheduler generator(*engine, {});
  EXPECT_EQ(together(generator, requests), expected);
  for (const auto& tokens : expected) EXPECT_EQ(tokens.size(), 12u);
}

TEST_F(SchedulerTest, ChunkedPrefillUnderASmallTokenBudget) {
  std::vector<GenerationRequest> requests = {request(prompt(37, 1), 8), request(prompt(20, 2), 8)};
  const auto expected = alone(requests);
  auto engine = load();
  SchedulerOptions options;
  options.max_num_batched_tokens = 8;
  Scheduler generator(*engine, options);
  EXPECT_EQ(together(generator, requests), expected);
  // 8 tokens a step: the 37-token prompt takes ceil(37 / 8) = 5 steps to its first token, then 7 more
  // tokens follow one a step. Without chunking both prompts fit one step, and 8 steps finish both.
  EXPECT_GE(generator.steps(), (37u + 7) / 8 + 7);
  Scheduler unchunked(*engine, {});
  EXPECT_EQ(together(unchunked, requests), expected);
  EXPECT_EQ(unchunked.steps(), 8u);
}

TEST_F(SchedulerTest, PrefixCacheReusesBlocksAndChangesNothing) {
  const auto shared = prompt(48, 7);
  auto longer = shared;
  for (int i = 0; i < 9; ++i) longer.push_back(static_cast<std::int32_t>(300 + i));
  const auto expected = alone({request(longer, 10)});

  auto engine = load();
  Scheduler generator(*engine, {});
  together(generator, {request(shared, 4)});
  const auto before = generator.stats();
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(request(longer, 10), sink);
  EXPECT_EQ(sink->wait(), expected[0]);
  const auto after = generator.stats();
  EXPECT_EQ(after.prefix_cache_queries - before.prefix_cache_queries, longer.size());
  EXPECT_EQ(after.prefix_cache_hits - before.prefix_cache_hits, 48u);  // three full blocks of 16
  EXPECT_EQ(sink->cached(), std::vector<std::size_t>{48});             // reported once, before the tokens
  EXPECT_EQ(engine->block_size(), 16u);
}

// --no-enable-prefix-caching: every prompt is computed in full, and nothing is reported cached.
TEST_F(SchedulerTest, PrefixCachingOffComputesEveryPrompt) {
  const auto shared = prompt(48, 7);
  auto longer = shared;
  for (int i = 0; i < 9; ++i) longer.push_back(static_cast<std::int32_t>(300 + i));
  const auto expected = alone({request(longer, 10)});
  auto engine = load();
  SchedulerOptions options;
  options.prefix_caching = false;
  Scheduler generator(*engine, options);
  together(generator, {request(shared, 4)});
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(request(longer, 10), sink);
  EXPECT_EQ(sink->wait(), expected[0]);
  EXPECT_EQ(generator.stats().prefix_cache_hits, 0u);
  EXPECT_EQ(generator.stats().prefix_cache_queries, 0u);
  EXPECT_EQ(sink->cached(), std::vector<std::size_t>{0});
  EXPECT_EQ(engine->kv_cache().cached_blocks(), 0u);
}

// The ids that end a sequence come from the options when given (serverd adds --tokenizer's EOS).
TEST_F(SchedulerTest, EosIdsFromTheOptionsEndSequences) {
  const auto greedy = alone({request(prompt(10, 4), 6)})[0];
  auto engine = load();
  SchedulerOptions options;
  options.eos_token_ids = {greedy[2]};
  Scheduler generator(*engine, options);
  auto stopping = request(prompt(10, 4), 6);
  stopping.ignore_eos = false;
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(stopping, sink);
  const auto tokens = sink->wait();
  EXPECT_EQ(sink->reason(), FinishReason::Stop);
  EXPECT_EQ(sink->stop_token(), greedy[2]);
  EXPECT_LE(tokens.size(), 3u);
}

// A chat's next turn begins with the last turn's prompt and answer: the answer's full blocks were cached
// as they were computed, so the next prompt finds them too, whatever the block size.
TEST_F(SchedulerTest, PrefixCacheHoldsBlocksOfGeneratedTokens) {
  for (const std::size_t block_size : {std::size_t{8}, std::size_t{16}}) {
    auto engine = load(0, block_size);
    ASSERT_EQ(engine->block_size(), block_size);
    Scheduler generator(*engine, {});
    const auto first_prompt = prompt(40, 11);
    const auto answer = together(generator, {request(first_prompt, 12)})[0];
    auto next_prompt = first_prompt;
    next_prompt.insert(next_prompt.end(), answer.begin(), answer.end());
    for (int i = 0; i < 5; ++i) next_prompt.push_back(static_cast<std::int32_t>(400 + i));
    const auto expected = alone({request(next_prompt, 6)});
    const auto before = generator.stats();
    EXPECT_EQ(together(generator, {request(next_prompt, 6)}), expected);
    // The first sequence computed 51 positions (its last token was never fed back): every full block of
    // those is found, beyond the 40 prompt tokens.
    const std::size_t computed_blocks = (first_prompt.size() + answer.size() - 1) / block_size;
    EXPECT_EQ(generator.stats().prefix_cache_hits - before.prefix_cache_hits, computed_blocks * block_size)
        << "block size " << block_size;
    EXPECT_GT(computed_blocks * block_size, first_prompt.size());
  }
}

TEST_F(SchedulerTest, PreemptedSequencesAreRecomputedToTheSameTokens) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(request(prompt(30, 10 + i), 40));
  const auto expected = alone(requests);
  auto engine = load(/*kv_blocks=*/12);  // each sequence needs 5 blocks: four cannot run at once
  Scheduler generator(*engine, {});
  EXPECT_EQ(together(generator, requests), expected);
  EXPECT_GT(generator.stats().preemptions, 0u);
}

TEST_F(SchedulerTest, TimingsAndStepTokensAsVllmCountsThem) {
  auto engine = load();
  Scheduler generator(*engine, {});
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(request(prompt(20, 3), 5), sink);
  ASSERT_EQ(sink->wait().size(), 5u);
  const auto& t = sink->timings();
  ASSERT_TRUE(t.scheduled && t.first_token && t.last_token);
  EXPECT_LE(t.queued, *t.scheduled);
  EXPECT_LT(*t.scheduled, *t.first_token);  // the prefill step ran in between
  EXPECT_LT(*t.first_token, *t.last_token);
  // Five steps: the first counts the whole prompt with its token (21), each later one its token.
  const auto stats = generator.stats();
  EXPECT_EQ(stats.step_tokens, 25u);
  EXPECT_EQ(stats.steps_by_tokens[0], 4u);  // at most 1 token
  EXPECT_EQ(stats.steps_by_tokens[3], 1u);  // 17 to 32 tokens
  EXPECT_EQ(stats.preemptions, 0u);
}

TEST_F(SchedulerTest, StopTokenEndsAfterMinTokensAndLengthEndsAtMaxTokens) {
  const auto free_run = alone({request(prompt(10, 4), 12)})[0];
  ASSERT_EQ(free_run.size(), 12u);
  auto engine = load();
  Scheduler generator(*engine, {});

  auto stop_at = request(prompt(10, 4), 12);
  stop_at.stop_token_ids = {free_run[3]};
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(stop_at, sink);
  const auto stopped = sink->wait();
  const auto first =
      static_cast<std::size_t>(std::find(free_run.begin(), free_run.end(), free_run[3]) - free_run.begin());
  EXPECT_EQ(stopped,
            std::vector<std::int32_t>(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(first) + 1));
  EXPECT_EQ(sink->reason(), FinishReason::Stop);
  EXPECT_EQ(sink->stop_token(), free_run[3]);

  stop_at.min_tokens = 12;
  sink = std::make_shared<RecordingSink>();
  generator.submit(stop_at, sink);
  EXPECT_EQ(sink->wait(), free_run);
  EXPECT_EQ(sink->reason(), FinishReason::Length);
}

TEST_F(SchedulerTest, CancelAbortsAndEveryBlockReturns) {
  auto engine = load();
  auto pending = std::make_shared<RecordingSink>();
  {
    Scheduler generator(*engine, {});
    auto sink = std::make_shared<RecordingSink>();
    const auto handle = generator.submit(request(prompt(40, 5), 200), sink);
    ASSERT_TRUE(sink->wait_tokens(2));
    generator.cancel(handle);
    const auto tokens = sink->wait();
    EXPECT_LT(tokens.size(), 200u);
    EXPECT_EQ(sink->reason(), FinishReason::Abort);
    generator.cancel(handle);  // a finished handle: nothing happens
    EXPECT_EQ(sink->finishes(), 1);
    // A sequence still generating when the generator stops ends with Abort too, exactly once.
    generator.submit(request(prompt(8, 6), 500), pending);
    ASSERT_TRUE(pending->wait_tokens(1));
    EXPECT_EQ(pending->finishes(), 0);
  }
  EXPECT_EQ(pending->finishes(), 1);
  EXPECT_EQ(pending->reason(), FinishReason::Abort);
  EXPECT_LT(pending->wait().size(), 500u);
  EXPECT_EQ(engine->kv_cache().num_free(), engine->kv_cache().num_blocks());
}

TEST_F(SchedulerTest, SeededSamplingIsTheSameInAnyBatch) {
  auto seeded = request(prompt(12, 8), 16);
  seeded.sampling.temperature = 1.0f;
  seeded.sampling.seed = 1234;
  const auto expected = alone({seeded})[0];
  std::vector<GenerationRequest> crowd = {request(prompt(30, 9), 20), seeded, request(prompt(7, 2), 5)};
  crowd[0].sampling.temperature = 0.8f;
  auto engine = load();
  Scheduler generator(*engine, {});
  EXPECT_EQ(together(generator, crowd)[1], expected);
}

// Scored whole, in chunks of 3 scored tokens under an 8-token budget, and after the prompt's blocks were
// cached by others: the same numbers every time, matching the reference; the scoring request takes nothing
// from the prefix cache (vLLM skips it for prompt_logprobs), and counts no lookup.
TEST_F(SchedulerTest, PromptLogprobsMatchTheReferenceWholeInChunksAndBesideACachedPrefix) {
  const auto tokens = prompt(45, 12);
  const auto reference = testing_support::reference_logits(dir_.path(), {tokens});
  std::vector<serverd::api::PromptLogprob> whole;
  std::vector<std::int32_t> whole_tokens;
  {
    auto engine = load();
    Scheduler generator(*engine, {});
    const auto sink = sinks_together(generator, {scoring(tokens, 3, 4)})[0];
    whole = sink->prompt_logprobs();
    whole_tokens = sink->wait();
  }
  ASSERT_EQ(whole.size(), tokens.size() - 1);  // every token but the first, which nothing predicts
  std::size_t ranks = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(whole[i].token, tokens[i + 1]);
    ASSERT_EQ(whole[i].top.size(), 4u);
    if (testing_support::expect_scored_like_reference(whole[i], reference.row(0, i), 1e-4)) ++ranks;
  }
  EXPECT_GT(ranks, whole.size() / 2);
  EXPECT_EQ(whole_tokens, alone({request(tokens, 3)})[0]);

  {
    auto engine = load();
    SchedulerOptions options;
    options.max_num_batched_tokens = 8;
    options.max_scored_tokens = 3;
    Scheduler chunked(*engine, options);
    const auto sink = sinks_together(chunked, {scoring(tokens, 3, 4)})[0];
    expect_same_entries(sink->prompt_logprobs(), whole);
    EXPECT_EQ(sink->wait(), whole_tokens);
    EXPECT_GE(chunked.steps(), whole.size() / 3);
  }

  auto engine = load();
  Scheduler generator(*engine, {});
  together(generator, {request(tokens, 3)});
  const auto cached = generator.stats();
  together(generator, {request(tokens, 3)});
  const auto hit = generator.stats();
  ASSERT_EQ(hit.prefix_cache_hits - cached.prefix_cache_hits, 32u);  // the prompt's two full blocks are cached
  const auto sink = sinks_together(generator, {scoring(tokens, 3, 4)})[0];
  expect_same_entries(sink->prompt_logprobs(), whole);
  EXPECT_EQ(generator.stats().prefix_cache_hits, hit.prefix_cache_hits);
  EXPECT_EQ(generator.stats().prefix_cache_queries, hit.prefix_cache_queries);
}

// A long-decoding sequence outgrows a 5-block cache while a scoring sequence is midway through its prompt
// (2 scored tokens a step): the scoring one is preempted and recomputed, its delivered positions not scored
// again, and its log-probabilities come out as they do alone, each once and in order.
TEST_F(SchedulerTest, PromptLogprobsSurvivePreemptionExactlyOnce) {
  const auto decoding = request(prompt(8, 20), 70);
  const auto scored = scoring(prompt(60, 21), 2, 3);
  std::vector<serverd::api::PromptLogprob> expected;
  {
    auto engine = load();
    Scheduler generator(*engine, {});
    expected = sinks_together(generator, {scored})[0]->prompt_logprobs();
  }
  ASSERT_EQ(expected.size(), 59u);
  const auto expected_tokens = alone({decoding, scored});

  auto engine = load(/*kv_blocks=*/5);
  SchedulerOptions options;
  options.max_scored_tokens = 2;
  Scheduler generator(*engine, options);
  const auto sinks = sinks_together(generator, {decoding, scored});
  EXPECT_GT(generator.stats().preemptions, 0u);
  expect_same_entries(sinks[1]->prompt_logprobs(), expected);
  EXPECT_EQ(sinks[0]->wait(), expected_tokens[0]);
  EXPECT_EQ(sinks[1]->wait(), expected_tokens[1]);
  EXPECT_EQ(engine->kv_cache().num_free(), engine->kv_cache().num_blocks());
}

// A sequence with max_tokens 0 scores its prompt and ends with Length, generating nothing; one without
// prompt_logprobs may not ask for that.
TEST_F(SchedulerTest, PromptOnlySequenceScoresAndEndsWithoutAToken) {
  auto engine = load();
  Scheduler generator(*engine, {});
  const auto sink = sinks_together(generator, {scoring(prompt(20, 3), 0, 2)})[0];
  EXPECT_TRUE(sink->wait().empty());
  EXPECT_EQ(sink->reason(), FinishReason::Length);
  EXPECT_EQ(sink->prompt_logprobs().size(), 19u);
  EXPECT_THROW(generator.submit(request(prompt(20, 3), 0), std::make_shared<RecordingSink>()), std::invalid_argument);
}

SchedulerOptions pooling_options() {
  SchedulerOptions options;
  options.pooling = true;
  return options;
}

GenerationRequest embedding(std::vector<std::int32_t> tokens, engine::model::PoolingType type,
                            std::size_t dimensions = 0) {
  GenerationRequest r;
  r.prompt_tokens = std::move(tokens);
  r.max_tokens = 0;
  r.pooling = serverd::api::PoolingRequest{{type, true}, dimensions};
  return r;
}

void expect_near_reference(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-4);
}

TEST_F(SchedulerTest, EmbeddingsMatchTheReferenceWholeInChunksAndInASmallCache) {
  using engine::model::PoolingType;
  const std::vector<std::vector<std::int32_t>> prompts = {prompt(37, 1), prompt(20, 2), prompt(30, 4), prompt(9, 5)};
  const PoolingType types[] = {PoolingType::Mean, PoolingType::Last, PoolingType::Cls, PoolingType::Mean};
  const std::size_t dimensions[] = {0, 0, 0, 16};
  std::vector<std::vector<double>> want;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    want.push_back(testing_support::reference_embedding(dir_.path(), prompts[i], types[i], dimensions[i]));
  }
  std::vector<GenerationRequest> requests;
  for (std::size_t i = 0; i < prompts.size(); ++i) requests.push_back(embedding(prompts[i], types[i], dimensions[i]));

  SchedulerOptions chunked = pooling_options();
  chunked.max_num_batched_tokens = 8;  // the 37-token prompt pools over five chunks
  auto engine = load();
  Scheduler whole(*engine, pooling_options());
  Scheduler in_chunks(*engine, chunked);
  // Four blocks for prompts of three, two, two and one: they wait for each other's blocks.
  auto small = load(/*kv_blocks=*/4);
  Scheduler waiting(*small, pooling_options());
  for (Scheduler* generator : {&whole, &in_chunks, &waiting}) {
    const auto sinks = sinks_together(*generator, requests);
    for (std::size_t i = 0; i < sinks.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_TRUE(sinks[i]->wait().empty());
      EXPECT_EQ(sinks[i]->reason(), FinishReason::Length);
      expect_near_reference(sinks[i]->embedding(), want[i]);
    }
  }
  EXPECT_GE(in_chunks.steps(), 5u);
}

TEST_F(SchedulerTest, OnlyLastTokenPoolingTakesACachedPrefix) {
  using engine::model::PoolingType;
  const auto tokens = prompt(40, 6);  // two full blocks of 16, then the last block computed
  auto engine = load();
  Scheduler generator(*engine, pooling_options());
  const auto cached_of = [&](PoolingType type) {
    sinks_together(generator, {embedding(tokens, type)});
    const auto second = sinks_together(generator, {embedding(tokens, type)})[0];
    expect_near_reference(second->embedding(), testing_support::reference_embedding(dir_.path(), tokens, type));
    return second->cached();
  };
  EXPECT_EQ(cached_of(PoolingType::Last), std::vector<std::size_t>{32});
  EXPECT_EQ(cached_of(PoolingType::Mean), std::vector<std::size_t>{0});
}

TEST_F(SchedulerTest, APoolingSchedulerTakesEmbeddingRequestsOnly) {
  auto engine = load();
  Scheduler pooling(*engine, pooling_options());
  EXPECT_THROW(pooling.submit(request(prompt(5, 1), 4), std::make_shared<RecordingSink>()), std::invalid_argument);
  Scheduler generating(*engine, {});
  EXPECT_THROW(
      generating.submit(embedding(prompt(5, 1), engine::model::PoolingType::Last), std::make_shared<RecordingSink>()),
      std::invalid_argument);
}

}  // namespace

namespace {

// A request whose every sequence gets its own AllowSetConstraint over `allowed`, ending after `ends_after`
// tokens; each constraint's accepted tokens land in `accepted` (one list per sequence made).
GenerationRequest constrained(GenerationRequest r, std::set<std::int32_t> allowed, std::size_t ends_after,
                              std::shared_ptr<std::vector<std::shared_ptr<std::vector<std::int32_t>>>> accepted) {
  r.make_constraint = [allowed = std::move(allowed), ends_after, accepted] {
    accepted->push_back(std::make_shared<std::vector<std::int32_t>>());
    return AllowSetConstraint::only(allowed, accepted->back(), ends_after);
  };
  return r;
}

using AcceptedLists = std::vector<std::shared_ptr<std::vector<std::int32_t>>>;

}  // namespace

TEST_F(SchedulerTest, ConstrainedSequencesInOneBatchEachTakeTheirOwnTokens) {
  auto engine = load();
  Scheduler generator(*engine, {});
  const auto lists = std::make_shared<AcceptedLists>();
  const std::set<std::int32_t> evens = {10, 12, 14, 16}, odds = {11, 13, 15};
  std::vector<GenerationRequest> requests;
  // One factory shared by two sequences (a request's n = 2): each still gets its own constraint.
  const auto even_request = constrained(request(prompt(12, 1), 8), evens, 100, lists);
  requests.push_back(even_request);
  requests.push_back(even_request);
  requests.push_back(constrained(request(prompt(9, 2), 8), odds, 100, lists));
  requests.push_back(request(prompt(7, 3), 8));  // unconstrained, in the same batch
  const auto sinks = sinks_together(generator, requests);
  ASSERT_EQ(lists->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto tokens = sinks[i]->wait();
    EXPECT_EQ(tokens.size(), 8u);
    for (const auto t : tokens) EXPECT_TRUE((i < 2 ? evens : odds).contains(t)) << "sequence " << i << ": " << t;
    EXPECT_EQ(*(*lists)[i], tokens) << "sequence " << i;
    EXPECT_EQ(sinks[i]->reason(), FinishReason::Length);
  }
  const auto free_tokens = sinks[3]->wait();
  EXPECT_FALSE(std::all_of(free_tokens.begin(), free_tokens.end(), [&](auto t) { return evens.contains(t); }));
}

TEST_F(SchedulerTest, AConstraintThatEndsStopsTheSequenceBeforeMaxTokens) {
  auto engine = load();
  Scheduler generator(*engine, {});
  const auto lists = std::make_shared<AcceptedLists>();
  auto r = constrained(request(prompt(10, 5), 20), {7, 8, 9}, 3, lists);
  r.min_tokens = 10;  // the grammar's end wins: nothing more may follow it
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(r, sink);
  EXPECT_EQ(sink->wait().size(), 3u);
  EXPECT_EQ(sink->reason(), FinishReason::Stop);
  EXPECT_EQ(sink->stop_token(), std::nullopt);  // an ordinary token: its text stays in the output

  // A grammar ending on the model's EOS id names it, so its text is left out.
  const std::int32_t eos = engine->checkpoint().eos_token_ids().front();
  auto ends_on_eos = constrained(request(prompt(10, 5), 20), {eos}, 1, lists);
  ends_on_eos.ignore_eos = false;
  sink = std::make_shared<RecordingSink>();
  generator.submit(ends_on_eos, sink);
  EXPECT_EQ(sink->wait(), std::vector<std::int32_t>{eos});
  EXPECT_EQ(sink->reason(), FinishReason::Stop);
  EXPECT_EQ(sink->stop_token(), eos);
}

TEST_F(SchedulerTest, MaxTokensBeforeTheConstraintEndsIsLength) {
  auto engine = load();
  Scheduler generator(*engine, {});
  const auto lists = std::make_shared<AcceptedLists>();
  auto sink = std::make_shared<RecordingSink>();
  generator.submit(constrained(request(prompt(10, 6), 4), {20, 21}, 10, lists), sink);
  EXPECT_EQ(sink->wait().size(), 4u);
  EXPECT_EQ(sink->reason(), FinishReason::Length);
}

TEST_F(SchedulerTest, APreemptedConstrainedSequenceFeedsEachTokenOnce) {
  const auto lists = std::make_shared<AcceptedLists>();
  std::vector<GenerationRequest> requests;
  std::set<std::int32_t> allowed;
  for (std::int32_t t = 100; t < 164; ++t) allowed.insert(t);
  for (int i = 0; i < 4; ++i) requests.push_back(constrained(request(prompt(30, 20 + i), 40), allowed, 1000, lists));
  auto engine = load(/*kv_blocks=*/12);  // each sequence needs 5 blocks: four cannot run at once
  Scheduler generator(*engine, {});
  const auto sinks = sinks_together(generator, requests);
  EXPECT_GT(generator.stats().preemptions, 0u);
  ASSERT_EQ(lists->size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto tokens = sinks[i]->wait();
    EXPECT_EQ(tokens.size(), 40u);
    EXPECT_EQ(*(*lists)[i], tokens) << "sequence " << i;
  }
}
