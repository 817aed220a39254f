#pragma once

// The boundary between the OpenAI API layer and the engine's scheduler. The API layer turns each HTTP request
// into one GenerationRequest per sequence (a request with n = 3 and two prompts is six sequences), submits
// them to a Generator and turns what comes back through each GenerationSink into OpenAI responses.
//
// Threading contract (what the scheduler may rely on, and what it must provide):
//   - submit() and cancel() are called from the server's I/O threads, possibly concurrently, and never from
//     inside a sink callback (the API layer queues what a sink receives and handles it on its own threads).
//   - A sink's callbacks for one sequence never run concurrently with each other. They may run on the
//     engine thread, or even inside submit(); they must be cheap and they never block on the network.
//   - on_finish() is called exactly once per submitted sequence, last, also after cancel() (with Abort unless
//     the sequence had already finished), with the sequence's SequenceTimings. cancel() of a finished or
//     unknown handle does nothing.
//   - The token that ends a sequence with FinishReason::Stop (an EOS id, unless ignore_eos, or one of
//     stop_token_ids, once min_tokens tokens exist) is delivered through on_tokens() like any other sampled
//     token, then on_finish(Stop, that id). The API layer leaves its text out unless asked otherwise.
//   - A sequence whose constraint (make_constraint) ends is finished with Stop after the token that ended it
//     (stop_token: that token when it is an EOS or stop id, else none); each token reaches the constraint
//     exactly once, a recompute after preemption included.
//   - A request with prompt_logprobs gets the log-probabilities of its prompt tokens 1, 2, ... (nothing
//     predicts the first) through on_prompt_logprobs(), in order, each exactly once (a prefill in chunks, or
//     one recomputed after preemption, delivers them in pieces but never twice), all before the first
//     on_tokens(). A sequence that is aborted may end before all of them came.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/pooling.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/token_constraint.h"

namespace engine::tokenizer {
class Tokenizer;
}
namespace engine::template_ {
class ChatTemplate;
}

namespace serverd::api {

class ConstraintCompiler;  // structured_outputs.h

// An embedding to make of a prompt instead of tokens to generate (vLLM's pooling runner).
struct PoolingRequest {
  engine::model::PoolingConfig config;
  std::size_t dimensions = 0;  // the embedding cut to its first `dimensions` values before normalising; 0: whole
};

// One sequence to generate.
struct GenerationRequest {
  std::string request_id;  // "cmpl-<id>-<prompt>-<choice>", for the engine's logs
  std::vector<std::int32_t> prompt_tokens;
  engine::sampling::SamplingParams sampling;
  // At least 1, or 0 for a sequence that only scores its prompt (prompt_logprobs set; it ends with Length once
  // the prompt is computed); prompt_tokens.size() + max_tokens <= max_model_len.
  std::size_t max_tokens = 16;
  std::size_t min_tokens = 0;  // EOS and stop_token_ids cannot end the sequence before this many tokens
  bool ignore_eos = false;
  std::vector<std::int32_t> stop_token_ids;  // besides the model's EOS ids
  // vLLM's prompt_logprobs: score every prompt token after the first, with this many most likely tokens.
  std::optional<std::size_t> prompt_logprobs;
  // Structured outputs: makes the sequence's own constraint (a grammar matcher), called once in submit() on
  // the caller's thread; empty: none. Once the constraint is terminated the sequence ends with Stop.
  std::function<std::unique_ptr<engine::sampling::TokenConstraint>()> make_constraint;
  // An embedding of the prompt (max_tokens 0, no prompt_logprobs): delivered through on_pooled(), then
  // on_finish(Length). Only a pooling Generator takes it, and it takes nothing else.
  std::optional<PoolingRequest> pooling;
};

// One prompt token's log-probability, rank and the most likely tokens at its position.
using PromptLogprob = engine::sampling::ScoredToken;

struct GeneratedToken {
  engine::sampling::SampledToken sampled;
};

enum class FinishReason {
  Stop,    // an EOS id or a stop token id; on_finish's stop_token names it
  Length,  // max_tokens reached (or the context is full)
  Abort,   // cancelled, or the engine gave up on the sequence
};

// What only the scheduler sees of one sequence, on its own clock: vLLM's queue, prefill, decode and inference
// intervals are between these (vllm:request_queue_time_seconds, ...). A preemption resets none of them, as in
// vLLM: its cost falls into the prefill or decode interval it interrupted. Unset: the sequence never got there.
struct SequenceTimings {
  using Clock = std::chrono::steady_clock;
  Clock::time_point queued;                      // submit() took it
  std::optional<Clock::time_point> scheduled;    // first admitted into a step
  std::optional<Clock::time_point> first_token;  // the step that sampled its first token ended
  std::optional<Clock::time_point> last_token;   // the step that sampled its last token ended
};

class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Prompt tokens' log-probabilities, continuing where the last call stopped (from prompt token 1).
  virtual void on_prompt_logprobs(std::span<const PromptLogprob> entries) = 0;
  // One or more new tokens of the sequence, in order.
  virtual void on_tokens(std::span<const GeneratedToken> tokens) = 0;
  // The end of the sequence. `stop_token` is the token that stopped it (FinishReason::Stop only).
  virtual void on_finish(FinishReason reason, std::optional<std::int32_t> stop_token,
                         const SequenceTimings& timings) = 0;
  // How many prompt tokens the prefix cache held when the sequence was first scheduled (vLLM's
  // num_cached_tokens): at most once, before its first on_tokens(). A Generator without a cache need not call it.
  virtual void on_prompt_cached(std::size_t /*tokens*/) {}
  // A pooled sequence's embedding (GenerationRequest::pooling), once, before on_finish(Length).
  virtual void on_pooled(std::vector<float> /*embedding*/) {}
};

// vllm:iteration_tokens_total's buckets: engine steps by the tokens they produced output for, counted as vLLM
// counts them (a sequence's whole prompt in the step of its first token, and one per sampled token).
inline constexpr std::array<double, 13> kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                                  512, 1024, 2048, 4096, 8192, 16384};

// What /metrics reports about the engine; read on every scrape. Counts are cumulative since start.
struct GeneratorStats {
  std::size_t running = 0;                 // sequences in the running batch
  std::size_t waiting = 0;                 // sequences queued for admission
  double kv_cache_usage = 0.0;             // share of KV blocks in use, 0..1
  std::uint64_t prefix_cache_queries = 0;  // in prompt tokens looked up
  std::uint64_t prefix_cache_hits = 0;     // in prompt tokens found cached
  std::uint64_t preemptions = 0;           // sequences that gave their KV blocks up, to be recomputed
  // Steps per kIterationTokenBuckets bucket (not cumulative; the last counts the steps above 16384), and
  // the tokens of every step added up.
  std::array<std::uint64_t, kIterationTokenBuckets.size() + 1> steps_by_tokens{};
  std::uint64_t step_tokens = 0;
};

// Thrown by submit() when the engine cannot take more work now; the client gets 503 with Retry-After.
class GeneratorOverloaded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Generator {
 public:
  virtual ~Generator() = default;
  // Queues a sequence; `sink` receives its tokens until on_finish. Returns a handle for cancel().
  virtual std::uint64_t submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) = 0;
  // The client went away or a stop string was hit: stop the sequence and free its KV blocks.
  virtual void cancel(std::uint64_t handle) = 0;
  virtual GeneratorStats stats() const = 0;
};

// Sampling defaults from the model's generation_config.json; a request's own values win, then these, then
// OpenAI's defaults (vLLM's order).
struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<std::size_t> max_tokens;  // max_new_tokens: caps every request's max_tokens
};

// The KV cache as configured, for vllm:cache_config_info.
struct KvCacheConfig {
  std::size_t block_size = 16;
  std::size_t num_blocks = 0;  // vLLM's num_gpu_blocks, whatever the device
  bool prefix_caching = true;
  double gpu_memory_utilization = 0.9;
};

// The loaded model as the API layer sees it. The pointed-to objects must outlive the server.
struct ModelInfo {
  std::string served_name;           // what clients put in "model", and what responses report
  std::vector<std::string> aliases;  // further names clients may put in "model" (--served-model-name a b)
  std::string root;                  // the model as given on the command line (/v1/models "root")
  const engine::tokenizer::Tokenizer* tokenizer = nullptr;
  const engine::template_::ChatTemplate* chat_template = nullptr;  // null: chat completions are refused
  std::string chat_template_error;  // why chat_template is null, when the model has an unusable one
  std::size_t max_model_len = 0;
  std::size_t vocab_size =
      0;  // logits per step (logit_bias and token prompts are checked against it); 0: the tokenizer's
  std::vector<std::int32_t> eos_token_ids;  // the tokenizer's EOS and generation_config's eos_token_id
  SamplingDefaults defaults;
  KvCacheConfig kv_cache;
  // Structured outputs (response_format, structured_outputs, guided_*): null refuses them with a 400.
  ConstraintCompiler* constraints = nullptr;
  // Set when the model serves embeddings (vLLM's pooling runner): how they are pooled. The Generator then
  // takes pooling requests only, and the generating endpoints are refused; unset, /v1/embeddings is.
  std::optional<engine::model::PoolingConfig> pooling;
  engine::model::Matryoshka matryoshka;  // which `dimensions` an embeddings request may ask for
};

}  // namespace serverd::api
