#include "serverd/api/generation_session.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "base/printable.h"
#include "serverd/api/api_error.h"
#include "serverd/api/response_json.h"

namespace serverd::api {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Hands what the engine produces to the session; cheap, as the engine thread calls it.
class ChoiceSink final : public GenerationSink {
 public:
  ChoiceSink(std::shared_ptr<GenerationSession> session, std::size_t choice)
      : session_(std::move(session)), choice_(choice) {}

  void on_prompt_logprobs(std::span<const PromptLogprob> entries) override {
    if (entries.empty()) return;
    GenerationSession::Event event;
    event.choice = choice_;
    event.prompt_logprobs.assign(entries.begin(), entries.end());
    event.at = Clock::now();
    session_->push(std::move(event));
  }

  void on_tokens(std::span<const GeneratedToken> tokens) override {
    GenerationSession::Event event;
    event.choice = choice_;
    event.tokens.assign(tokens.begin(), tokens.end());
    event.at = Clock::now();
    session_->push(std::move(event));
  }

  void on_prompt_cached(std::size_t tokens) override {
    GenerationSession::Event event;
    event.choice = choice_;
    event.cached_prompt_tokens = tokens;
    event.at = Clock::now();
    session_->push(std::move(event));
  }

  void on_finish(FinishReason reason, std::optional<std::int32_t> stop_token, const SequenceTimings& timings) override {
    if (finished_.exchange(true)) return;
    --session_->counters().active_sequences;
    GenerationSession::Event event;
    event.choice = choice_;
    event.finish = true;
    event.reason = reason;
    event.stop_token = stop_token;
    event.timings = timings;
    event.at = Clock::now();
    session_->push(std::move(event));
  }

 private:
  std::shared_ptr<GenerationSession> session_;
  std::size_t choice_;
  std::atomic<bool> finished_{false};
};

}  // namespace

GenerationSession::GenerationSession(SessionSettings settings, std::shared_ptr<ServiceCounters> counters,
                                     std::shared_ptr<Metrics> metrics, std::shared_ptr<http::Exchange> exchange,
                                     const engine::tokenizer::Tokenizer& tokenizer, Generator& generator)
    : settings_(std::move(settings)),
      counters_(std::move(counters)),
      metrics_(std::move(metrics)),
      exchange_(std::move(exchange)),
      tokenizer_(tokenizer),
      generator_(generator) {
  ++counters_->active_requests;
}

GenerationSession::~GenerationSession() {
  end_load();
}

void GenerationSession::end_load() {
  // vLLM's server load ends with the response, before its last bytes go out.
  if (!std::exchange(counted_in_load_, false)) return;
  --counters_->active_requests;
}

void GenerationSession::start(std::vector<SequenceSpec> sequences) {
  // Registered before the lock: when the client is already gone, the callback runs right here.
  exchange_->on_abort([weak = weak_from_this()] {
    if (const auto self = weak.lock()) self->abort();
  });

  std::lock_guard lock(mutex_);
  if (aborted_) return;
  choices_.reserve(sequences.size());
  const std::size_t prompts = settings_.prompt_tokens.size();
  unrecorded_.assign(prompts, 0);
  max_generated_.assign(prompts, 0);
  prompts_.resize(prompts);
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const SequenceSpec& spec = sequences[i];
    choices_.emplace_back(ChoiceOutput(tokenizer_, spec.stops, spec.config));
    choices_.back().prompt = spec.prompt;
    choices_.back().max_tokens = spec.request.max_tokens;
    if (settings_.parsing.make_parser) choices_.back().parser = settings_.parsing.make_parser();
    // Submitted (and so recorded in /metrics): what generates, or scores its prompt.
    if (spec.request.max_tokens > 0 || spec.request.prompt_logprobs) ++unrecorded_.at(spec.prompt);
    if (spec.request.prompt_logprobs) prompts_.at(spec.prompt).scorer = i;
  }
  submitted_ = unrecorded_;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    Choice& choice = choices_[i];
    choice.submitted = Clock::now();
    if (sequences[i].request.max_tokens == 0 && !sequences[i].request.prompt_logprobs) {
      // Completions with echo and max_tokens 0: the prompt is the whole answer; nothing to generate.
      choice.out.finish(FinishReason::Length, std::nullopt);
      choice.dirty = true;
      ++finished_;
      continue;
    }
    ++counters_->active_sequences;
    try {
      choice.handle =
          generator_.submit(std::move(sequences[i].request), std::make_shared<ChoiceSink>(shared_from_this(), i));
    } catch (const GeneratorOverloaded& e) {
      --counters_->active_sequences;
      abort_locked();  // what was submitted is cancelled; its events are ignored
      throw ApiException(
          ApiError{503, "The server is overloaded; retry later. (" + std::string(e.what()) + ")", std::nullopt, 1});
    } catch (...) {
      --counters_->active_sequences;
      abort_locked();
      throw;
    }
  }

  if (settings_.stream) {
    http::Response head;
    head.headers = settings_.headers;
    head.headers.push_back({"Content-Type", "text/event-stream; charset=utf-8"});
    head.headers.push_back({"Cache-Control", "no-cache"});
    exchange_->start_stream(std::move(head));
    if (settings_.formatter) {
      exchange_->write(settings_.formatter->begin());
    } else if (settings_.kind == ApiKind::kChat) {
      // vLLM opens every chat choice with a chunk carrying the role.
      std::string first;
      for (std::size_t i = 0; i < choices_.size(); ++i) first += sse_event(role_chunk(i));
      exchange_->write(std::move(first));
    }
  }
  send_chunks();
  if (finished_ == choices_.size()) complete();
}

void GenerationSession::push(Event event) {
  bool schedule = false;
  {
    std::lock_guard lock(inbox_mutex_);
    inbox_.push_back(std::move(event));
    schedule = !drain_scheduled_;
    drain_scheduled_ = true;
  }
  if (schedule) exchange_->post([self = shared_from_this()] { self->drain(); });
}

void GenerationSession::drain() {
  for (;;) {
    std::vector<Event> batch;
    {
      std::lock_guard lock(inbox_mutex_);
      if (inbox_.empty()) {
        drain_scheduled_ = false;
        return;
      }
      batch.swap(inbox_);
    }
    std::lock_guard lock(mutex_);
    try {
      for (Event& event : batch) process(event);
      if (!aborted_) {
        send_chunks();
        if (finished_ == choices_.size()) complete();
      }
    } catch (const std::exception& e) {
      // Nothing the client sent can get here; an internal failure ends this request only.
      std::cerr << "serverd: request " << settings_.id << " failed: " << base::printable(e.what()) << '\n';
      abort_locked();
      if (!completed_) {
        completed_ = true;
        if (settings_.stream) {
          exchange_->finish();
        } else {
          exchange_->respond(error_response(ApiError{500, "Internal server error", std::nullopt, std::nullopt}));
        }
      }
    }
  }
}

void GenerationSession::abort() {
  std::lock_guard lock(mutex_);
  abort_locked();
}

void GenerationSession::abort_locked() {
  aborted_ = true;
  end_load();
  for (const Choice& choice : choices_) {
    if (choice.handle && !choice.generator_done) generator_.cancel(*choice.handle);
  }
}

void GenerationSession::process(Event& event) {
  Choice& choice = choices_.at(event.choice);
  if (event.cached_prompt_tokens) {
    choice.cached_prompt_tokens = *event.cached_prompt_tokens;
    return;
  }
  const auto touch_prompt = [&] {
    // The choices of the prompt may be waiting for its log-probabilities.
    for (Choice& other : choices_) {
      if (other.prompt == choice.prompt) other.dirty = true;
    }
  };
  if (!event.prompt_logprobs.empty()) {
    auto& entries = prompts_.at(choice.prompt).entries;
    entries.insert(entries.end(), std::make_move_iterator(event.prompt_logprobs.begin()),
                   std::make_move_iterator(event.prompt_logprobs.end()));
    if (prompt_scored(choice.prompt)) touch_prompt();
    return;
  }
  if (event.finish) {
    choice.generator_done = true;
    if (prompts_.at(choice.prompt).scorer == event.choice) touch_prompt();
    if (!choice.out.finished()) {  // else a stop string ended it already
      choice.out.finish(event.reason, event.stop_token);
      parse_new_text(choice);
      finished(choice, event.at);
    }
    record(choice, event.timings);
    return;
  }
  if (choice.out.finished()) return;
  metrics_->generation_tokens(event.tokens.size());
  if (choice.last_token) {
    metrics_->inter_token(seconds(event.at - *choice.last_token));
  } else {
    metrics_->first_token(settings_.prompt_tokens.at(choice.prompt), seconds(event.at - choice.submitted));
  }
  choice.last_token = event.at;
  choice.dirty = true;
  if (add_tokens(choice, event.tokens)) {
    if (choice.handle) generator_.cancel(*choice.handle);  // a stop string: the sequence is no longer needed
    finished(choice, event.at);
  }
}

bool GenerationSession::add_tokens(Choice& choice, std::span<const GeneratedToken> tokens) {
  if (!choice.parser && !settings_.formatter) return choice.out.add_tokens(tokens);
  // One token at a time, so the reasoning parser knows which tokens decoded reasoning, however the engine's
  // tokens happen to be batched into events.
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const bool stopped = choice.out.add_tokens(tokens.subspan(i, 1));
    ++choice.unparsed_tokens;
    if (settings_.formatter) {
      feed_formatter(choice);
    } else {
      parse_new_text(choice);
    }
    if (stopped) return true;
  }
  return false;
}

void GenerationSession::feed_formatter(Choice& choice) {
  const std::string text = choice.out.take_text();
  if (!text.empty()) formatted_ += settings_.formatter->feed(text, std::exchange(choice.unparsed_tokens, 0));
}

void GenerationSession::parse_new_text(Choice& choice) {
  if (!choice.parser) return;
  const auto append = [&choice](parsers::ChoiceDelta delta) {
    choice.parsed.reasoning += delta.reasoning;
    choice.parsed.content += delta.content;
    choice.parsed.tool_calls.insert(choice.parsed.tool_calls.end(), delta.tool_calls.begin(), delta.tool_calls.end());
  };
  const std::string text = choice.out.take_text();
  if (!text.empty()) {
    append(choice.parser->feed(text, std::exchange(choice.unparsed_tokens, 0)));
  }
  if (choice.out.finished()) append(choice.parser->finish());
}

std::string_view GenerationSession::finish_reason(const Choice& choice) const {
  const std::string_view reason = choice.out.finish_reason();
  // vLLM: with tool_choice "auto", a whole response that made calls says "tool_calls" whatever ended it, a
  // stream only when the sequence stopped (not on length); "required" says it when the calls ended the
  // sequence; a named function keeps "stop", as OpenAI does.
  const bool called = choice.parser && choice.parser->made_tool_calls();
  if (called && settings_.parsing.auto_tools && (!settings_.stream || reason == "stop")) return "tool_calls";
  if (called && settings_.parsing.forced_tools == ToolChoice::kRequired && reason == "stop") return "tool_calls";
  return reason;
}

std::optional<std::size_t> GenerationSession::reasoning_usage() const {
  if (!settings_.parsing.reasoning) return std::nullopt;
  std::size_t total = 0;
  for (const Choice& choice : choices_) total += choice.parser ? choice.parser->reasoning_tokens() : 0;
  return total;
}

void GenerationSession::finished(Choice& choice, Clock::time_point at) {
  ++finished_;
  choice.dirty = true;
  choice.finished_at = at;
}

void GenerationSession::record(const Choice& choice, const SequenceTimings& timings) {
  FinishedSequence sequence;
  sequence.finish_reason = choice.out.finish_reason();
  sequence.e2e_seconds = seconds(choice.finished_at - choice.submitted);
  sequence.prompt_tokens = settings_.prompt_tokens.at(choice.prompt);
  sequence.generation_tokens = choice.out.token_count();
  sequence.max_tokens = choice.max_tokens;
  sequence.timings = timings;
  metrics_->finished(sequence);
  // vLLM records n and the longest choice once the last of a prompt's choices is done.
  std::size_t& longest = max_generated_.at(choice.prompt);
  longest = std::max(longest, sequence.generation_tokens);
  if (--unrecorded_.at(choice.prompt) == 0) metrics_->prompt_finished(submitted_.at(choice.prompt), longest);
}

void GenerationSession::begin_json(JsonWriter& w, std::string_view object) const {
  w.begin_object();
  w.key("id").value(settings_.id);
  w.key("object").value(object);
  w.key("created").value(settings_.created);
  w.key("model").value(settings_.model_name);
}

std::string GenerationSession::role_chunk(std::size_t index) {
  JsonWriter w;
  begin_json(w, "chat.completion.chunk");
  w.key("choices").begin_array().begin_object();
  w.key("index").value(static_cast<std::uint64_t>(index));
  w.key("delta").begin_object().key("role").value(settings_.role).key("content").value("").end_object();
  w.key("logprobs").null();
  w.key("finish_reason").null();
  w.end_object().end_array();
  write_chunk_usage(w, choices_.at(index).prompt, 0);
  w.end_object();
  return w.take();
}

bool GenerationSession::prompt_scored(std::size_t prompt) const {
  const PromptScores& scores = prompts_.at(prompt);
  if (!scores.scorer || scores.entries.size() + 1 >= settings_.prompt_tokens.at(prompt)) return true;
  const Choice& scorer = choices_.at(*scores.scorer);
  return scorer.generator_done || scorer.out.finished();
}

std::vector<LogprobRecord> GenerationSession::echoed_records(const Choice& choice) const {
  if (!settings_.echo_prompt_logprobs) return {};
  return prompt_records(settings_.first_prompt_tokens.at(choice.prompt), prompts_.at(choice.prompt).entries);
}

std::string GenerationSession::chunk(std::size_t index, Choice& choice, parsers::ChoiceDelta delta,
                                     std::vector<LogprobRecord> logprobs, bool finish) {
  const bool chat = settings_.kind == ApiKind::kChat;
  JsonWriter w;
  begin_json(w, chat ? "chat.completion.chunk" : "text_completion");
  w.key("choices").begin_array().begin_object();
  w.key("index").value(static_cast<std::uint64_t>(index));
  if (chat) {
    w.key("delta");
    if (choice.parser) {
      if (!settings_.parsing.include_reasoning) delta.reasoning.clear();
      write_delta(w, delta);
    } else {
      w.begin_object();
      if (!delta.content.empty() || !finish) w.key("content").value(delta.content);
      w.end_object();
    }
  } else {
    w.key("text").value(delta.content);
  }
  w.key("logprobs");
  if (settings_.logprobs) {
    if (chat) {
      write_chat_logprobs(w, tokenizer_, logprobs, *settings_.logprobs, settings_.tokens_as_ids);
    } else {
      write_completion_logprobs(w, tokenizer_, logprobs, *settings_.logprobs, choice.text_offset,
                                settings_.tokens_as_ids);
    }
  } else {
    w.null();
  }
  w.key("finish_reason");
  if (finish) {
    w.value(finish_reason(choice));
  } else {
    w.null();
  }
  w.key("stop_reason");
  write_stop_reason(w, choice.out.stop_reason());
  w.end_object().end_array();
  write_chunk_usage(w, choice.prompt, choice.out.token_count());
  w.end_object();
  return w.take();
}

void GenerationSession::send_formatted() {
  for (Choice& choice : choices_) {
    if (!choice.dirty || choice.final_sent) continue;
    choice.dirty = false;
    feed_formatter(choice);  // text the stop strings held back until the choice finished
    if (choice.out.finished()) {
      choice.final_sent = true;
      formatted_ += settings_.formatter->finish(choice.out, prompt_total());
    }
  }
  std::string out = std::exchange(formatted_, {});
  if (settings_.stream && !out.empty()) exchange_->write(std::move(out));
}

void GenerationSession::send_chunks() {
  if (settings_.formatter) {
    send_formatted();  // a whole response is built from the same pieces, so it runs in both modes
    return;
  }
  if (!settings_.stream) return;
  std::string out;
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    if (!choice.dirty || choice.final_sent) continue;
    // The first chunk of an echo with logprobs carries the prompt's: it waits for them (dirty meanwhile).
    if (!choice.echo_sent && settings_.echo_prompt_logprobs && !prompt_scored(choice.prompt)) continue;
    choice.dirty = false;
    parsers::ChoiceDelta delta;
    if (choice.parser) {
      delta = std::exchange(choice.parsed, {});
    } else {
      delta.content = choice.out.take_text();
    }
    std::vector<LogprobRecord> logprobs;
    if (!choice.echo_sent) {
      choice.echo_sent = true;
      if (choice.prompt < settings_.echo.size()) delta.content = settings_.echo[choice.prompt] + delta.content;
      logprobs = echoed_records(choice);
    }
    if (settings_.logprobs) {
      auto generated = choice.out.take_logprobs();
      logprobs.insert(logprobs.end(), std::make_move_iterator(generated.begin()),
                      std::make_move_iterator(generated.end()));
    }
    const bool finish = choice.out.finished();
    if (delta.empty() && !finish && logprobs.empty()) continue;  // everything new is held back
    if (finish) choice.final_sent = true;
    out += sse_event(chunk(i, choice, std::move(delta), std::move(logprobs), finish));
  }
  if (!out.empty()) exchange_->write(std::move(out));
}

void GenerationSession::write_prompt_logprobs_field(JsonWriter& w, std::size_t prompt) const {
  w.key("prompt_logprobs");
  if (settings_.prompt_logprobs_field) {
    write_prompt_logprobs(w, tokenizer_, prompts_.at(prompt).entries);
  } else {
    w.null();
  }
}

std::size_t GenerationSession::prompt_total() const {
  std::size_t total = 0;
  for (const std::size_t count : settings_.prompt_tokens) total += count;
  return total;
}

std::size_t GenerationSession::completion_total() const {
  std::size_t total = 0;
  for (const Choice& choice : choices_) total += choice.out.token_count();
  return total;
}

// As vLLM reports it: the cached tokens of the last prompt's request (its first choice), when asked for.
std::optional<std::size_t> GenerationSession::cached_tokens() const {
  if (!settings_.prompt_tokens_details || choices_.empty()) return std::nullopt;
  const std::size_t last_prompt = choices_.back().prompt;
  for (const Choice& choice : choices_) {
    if (choice.prompt == last_prompt) return choice.cached_prompt_tokens;
  }
  return std::nullopt;
}

void GenerationSession::write_chunk_usage(JsonWriter& w, std::size_t prompt, std::size_t completion_tokens) const {
  if (!settings_.include_usage) return;
  w.key("usage");
  if (settings_.continuous_usage) {
    write_usage(w, settings_.prompt_tokens.at(prompt), completion_tokens);
  } else {
    w.null();
  }
}

std::string GenerationSession::usage_chunk() const {
  JsonWriter w;
  begin_json(w, settings_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
  w.key("choices").begin_array().end_array();
  w.key("usage");
  write_usage(w, prompt_total(), completion_total(), cached_tokens(), reasoning_usage());
  w.end_object();
  return w.take();
}

std::string GenerationSession::full_response() const {
  const bool chat = settings_.kind == ApiKind::kChat;
  JsonWriter w;
  begin_json(w, chat ? "chat.completion" : "text_completion");
  w.key("choices").begin_array();
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    const Choice& choice = choices_[i];
    const std::string echo = choice.prompt < settings_.echo.size() ? settings_.echo[choice.prompt] : std::string();
    w.begin_object();
    w.key("index").value(static_cast<std::uint64_t>(i));
    if (chat) {
      parsers::ChoiceResult message;
      if (choice.parser) {
        message = choice.parser->result();
        if (!settings_.parsing.include_reasoning) message.reasoning.reset();
        if (!echo.empty()) message.content = echo + message.content.value_or("");
        // vLLM answers forced calls with content "" beside them.
        if (settings_.parsing.forced_tools != ToolChoice::kNone && !message.content) message.content = "";
      } else {
        message.content = echo + choice.out.text();
      }
      w.key("message");
      write_message(w, settings_.role, message);
    } else {
      w.key("text").value(echo + choice.out.text());
    }
    w.key("logprobs");
    if (settings_.logprobs) {
      if (chat) {
        write_chat_logprobs(w, tokenizer_, choice.out.logprobs(), *settings_.logprobs, settings_.tokens_as_ids);
      } else {
        std::vector<LogprobRecord> records = echoed_records(choice);
        records.insert(records.end(), choice.out.logprobs().begin(), choice.out.logprobs().end());
        std::size_t offset = 0;
        write_completion_logprobs(w, tokenizer_, records, *settings_.logprobs, offset, settings_.tokens_as_ids);
      }
    } else {
      w.null();
    }
    w.key("finish_reason").value(finish_reason(choice));
    w.key("stop_reason");
    write_stop_reason(w, choice.out.stop_reason());
    if (!chat) write_prompt_logprobs_field(w, choice.prompt);
    w.end_object();
  }
  w.end_array();
  w.key("usage");
  write_usage(w, prompt_total(), completion_total(), cached_tokens(), reasoning_usage());
  if (chat) write_prompt_logprobs_field(w, 0);  // vLLM puts the chat prompt's on the response
  w.end_object();
  return w.take();
}

void GenerationSession::complete() {
  if (completed_) return;
  completed_ = true;
  end_load();
  if (settings_.stream && settings_.formatter) {
    if (const std::string_view end = settings_.formatter->stream_end(); !end.empty())
      exchange_->write(std::string(end));
    exchange_->finish();
    return;
  }
  if (settings_.stream) {
    std::string tail;
    if (settings_.include_usage) tail += sse_event(usage_chunk());
    tail += kSseDone;
    exchange_->write(std::move(tail));
    exchange_->finish();
    return;
  }
  exchange_->respond(json_response(
      settings_.formatter ? settings_.formatter->whole(choices_.front().out, prompt_total()) : full_response(),
      settings_.headers));
}

}  // namespace serverd::api
