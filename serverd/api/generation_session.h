#pragma once

// One completions, chat completions or Responses API request in flight: its sequences submitted to the Generator, what
// the sinks receive queued and handled on the server's I/O threads (never on the engine thread), choices built as
// tokens arrive, and the response sent whole or as server-sent events. A client that goes away cancels every sequence
// of the request; a stop string cancels its sequence.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serverd/api/chat_parsing.h"
#include "serverd/api/choice_output.h"
#include "serverd/api/generator.h"
#include "serverd/api/json_io.h"
#include "serverd/api/metrics.h"
#include "serverd/api/output_formatter.h"
#include "serverd/http/http_server.h"

namespace serverd::api {

// State the service shares with its sessions, which may outlive a request's HTTP exchange.
struct ServiceCounters {
  std::atomic<std::size_t> active_sequences{0};
  std::atomic<std::size_t> active_requests{0};  // sessions whose response is not over yet (/load)
};

enum class ApiKind { kCompletion, kChat, kResponses };

struct SessionSettings {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  std::int64_t created = 0;
  std::string model_name;
  bool stream = false;
  bool include_usage = false;              // a stream ends with a usage chunk
  bool continuous_usage = false;           // and every chunk carries the usage so far (vLLM's continuous_usage_stats)
  bool prompt_tokens_details = false;      // usage carries prompt_tokens_details.cached_tokens
  std::string role = "assistant";          // chat: the role of the reply
  std::optional<std::size_t> logprobs;     // top log-probabilities per token; nullopt: no logprobs
  std::vector<std::size_t> prompt_tokens;  // per prompt
  std::vector<std::string> echo;           // per prompt: text the choices start with (echo); may be empty
  std::vector<http::Header> headers;       // sent with the response (X-Request-Id)
  bool tokens_as_ids = false;              // log-probability records write "token_id:ID" tokens
  // Prompt log-probabilities, scored by the first sequence of each prompt (SequenceSpec::request's
  // prompt_logprobs) and shared by its choices: in the "prompt_logprobs" list (each completions choice's, or
  // the chat response's), and/or (completions with echo and logprobs) leading each choice's logprobs.
  bool prompt_logprobs_field = false;
  bool echo_prompt_logprobs = false;
  std::vector<std::int32_t> first_prompt_tokens;  // per prompt: its first token, which nothing predicts
  ChatParsing parsing;                            // chat: reasoning and tool calls; completions: none
  // kResponses: writes the body or the events of its one choice (the chat kinds write their own).
  std::shared_ptr<OutputFormatter> formatter;
};

// One sequence to submit: choice `index` of prompt `prompt`.
struct SequenceSpec {
  GenerationRequest request;
  std::size_t prompt = 0;
  std::shared_ptr<const StopStrings> stops;
  std::shared_ptr<const ChoiceConfig> config;
};

class GenerationSession : public std::enable_shared_from_this<GenerationSession> {
 public:
  GenerationSession(SessionSettings settings, std::shared_ptr<ServiceCounters> counters,
                    std::shared_ptr<Metrics> metrics, std::shared_ptr<http::Exchange> exchange,
                    const engine::tokenizer::Tokenizer& tokenizer, Generator& generator);
  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

  // Submits every sequence (choice i is sequences[i]) and starts the response. Throws ApiException (503)
  // when the generator is overloaded, having cancelled what it had submitted.
  void start(std::vector<SequenceSpec> sequences);

  // From the sinks (any thread).
  struct Event {
    std::size_t choice = 0;
    bool finish = false;
    std::optional<std::size_t> cached_prompt_tokens;  // on_prompt_cached
    std::vector<GeneratedToken> tokens;
    std::vector<PromptLogprob> prompt_logprobs;
    FinishReason reason = FinishReason::Stop;
    std::optional<std::int32_t> stop_token;
    SequenceTimings timings;  // finish only
    std::chrono::steady_clock::time_point at;
  };
  void push(Event event);
  ServiceCounters& counters() { return *counters_; }

 private:
  struct Choice {
    explicit Choice(ChoiceOutput output) : out(std::move(output)) {}
    ChoiceOutput out;
    std::size_t prompt = 0;
    std::optional<std::uint64_t> handle;
    std::size_t cached_prompt_tokens = 0;
    bool generator_done = false;  // on_finish seen
    bool final_sent = false;      // the chunk with finish_reason went out
    bool echo_sent = false;
    bool dirty = false;
    std::size_t text_offset = 0;
    std::size_t max_tokens = 0;
    std::chrono::steady_clock::time_point submitted;
    std::optional<std::chrono::steady_clock::time_point> last_token;
    std::chrono::steady_clock::time_point finished_at;  // when the response's choice ended
    // With a reasoning or tool-call parser: what it made of the text so far and has not been streamed yet.
    std::unique_ptr<parsers::ChoiceParser> parser;
    parsers::ChoiceDelta parsed;
    std::size_t unparsed_tokens = 0;  // tokens whose text the stop strings still hold back
  };

  // A prompt's log-probabilities as they arrive from the sequence that scores it.
  struct PromptScores {
    std::vector<PromptLogprob> entries;  // prompt tokens 1, 2, ...
    std::optional<std::size_t> scorer;   // the choice whose sequence scores them
  };

  void drain();
  void abort();
  void abort_locked();
  void end_load();  // the response is over: the session no longer counts in /load
  void process(Event& event);
  // The tokens into the choice's text (and through its parser). True when a stop string ended it.
  bool add_tokens(Choice& choice, std::span<const GeneratedToken> tokens);
  // The text taken from the choice's output since the last call, through its parser (finished with it).
  void parse_new_text(Choice& choice);
  std::string_view finish_reason(const Choice& choice) const;
  // usage.completion_tokens_details.reasoning_tokens; nullopt without a reasoning parser.
  std::optional<std::size_t> reasoning_usage() const;
  void finished(Choice& choice, std::chrono::steady_clock::time_point at);
  // The generator is done with the choice: /metrics records it, and its prompt once all of its choices are.
  void record(const Choice& choice, const SequenceTimings& timings);
  void send_chunks();
  void send_formatted();  // kResponses: the choices' new text through the formatter
  // kResponses: the choice's new text to the formatter, what it writes kept in formatted_.
  void feed_formatter(Choice& choice);
  void complete();
  std::string chunk(std::size_t index, Choice& choice, parsers::ChoiceDelta delta, std::vector<LogprobRecord> logprobs,
                    bool finish);
  // Whether a prompt's log-probabilities are all in (or will never all come: its scorer has finished).
  bool prompt_scored(std::size_t prompt) const;
  // The records a choice's logprobs start with: the prompt's (echo with logprobs), else none.
  std::vector<LogprobRecord> echoed_records(const Choice& choice) const;
  std::string role_chunk(std::size_t index);
  std::string usage_chunk() const;
  // A chunk's "usage": null, or (continuous usage) the choice's counts so far.
  void write_chunk_usage(JsonWriter& w, std::size_t prompt, std::size_t completion_tokens) const;
  std::string full_response() const;
  void write_prompt_logprobs_field(JsonWriter& w, std::size_t prompt) const;
  void begin_json(JsonWriter& w, std::string_view object) const;
  std::size_t prompt_total() const;
  std::size_t completion_total() const;
  std::optional<std::size_t> cached_tokens() const;

  const SessionSettings settings_;
  const std::shared_ptr<ServiceCounters> counters_;
  const std::shared_ptr<Metrics> metrics_;
  const std::shared_ptr<http::Exchange> exchange_;
  const engine::tokenizer::Tokenizer& tokenizer_;
  Generator& generator_;

  std::mutex inbox_mutex_;
  std::vector<Event> inbox_;
  bool drain_scheduled_ = false;

  std::mutex mutex_;  // guards what follows
  std::vector<Choice> choices_;
  std::vector<std::size_t> unrecorded_;     // per prompt: its submitted choices /metrics has not recorded
  std::vector<std::size_t> max_generated_;  // per prompt: the most tokens one of its recorded choices has
  std::vector<std::size_t> submitted_;      // per prompt: its submitted choices (vLLM's n)
  std::vector<PromptScores> prompts_;       // per prompt
  std::size_t finished_ = 0;
  bool aborted_ = false;
  bool completed_ = false;
  std::string formatted_;  // kResponses: what the formatter wrote and the stream has not sent
  bool counted_in_load_ = true;
};

}  // namespace serverd::api
