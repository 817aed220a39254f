#pragma once

// Reasoning parsers: the model's generated text split into reasoning and content, as vLLM's
// `--reasoning-parser qwen3|deepseek_r1` (`<think>...</think>`) and `openai_gptoss` (harmony's channels)
// split it. vLLM's OpenAI server sends the reasoning as
// `message.reasoning` and, streaming, `delta.reasoning` (named `reasoning_content` until vLLM removed that
// name in January 2026).
//
// Streaming contract, as for tool-call parsers (tool_call_parser.h): feed() each decoded text delta,
// finish() at the end; the concatenated output is the same for every split of the text, and a tag split
// across deltas never reaches either field. Tool calls are parsed from the content this parser passes on.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace serverd::parsers {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;

  bool empty() const { return reasoning.empty() && content.empty(); }
  bool operator==(const ReasoningDelta&) const = default;
};

struct ReasoningOptions {
  // The request's chat_template_kwargs.enable_thinking, when it has one. qwen3 reads false as "this
  // answer has no reasoning" (the template closed the think block in the prompt), as vLLM's does.
  std::optional<bool> enable_thinking{};
  // The prompt already closed the think block (see prompt_closes_reasoning): everything generated is
  // content, for every parser (vLLM's prompt_is_reasoning_end).
  bool prompt_closes_reasoning = false;
  // A tool-call parser that reads the model's own call syntax follows (openai after openai_gptoss): calls
  // pass on to it whole, markers included, rather than as their arguments' text alone.
  bool keep_function_calls = false;
};

class ReasoningParser {
 public:
  virtual ~ReasoningParser() = default;

  // Throws std::logic_error after finish().
  virtual ReasoningDelta feed(std::string_view text) = 0;
  // Throws std::logic_error when called twice.
  virtual ReasoningDelta finish() = 0;

  virtual std::string_view name() const = 0;
  // Still inside the reasoning: its end has not been generated yet.
  virtual bool in_reasoning() const = 0;
  // The last feed() read reasoning text (the tags aside), so the token it decoded counts in
  // usage.completion_tokens_details.reasoning_tokens. A byte held back as a possible tag counts.
  virtual bool last_feed_was_reasoning() const = 0;
  // Everything is content (thinking off): the response has no reasoning at all (null, not "").
  virtual bool passes_through() const = 0;
  // Its markers are special tokens, so the text it reads must be decoded with them kept; it never passes
  // them on, so what the client reads holds none either way.
  virtual bool needs_special_tokens() const = 0;
  // The text whose generation ends the reasoning: structured outputs constrain only what follows it.
  virtual std::string_view end_marker() const = 0;
};

// The --reasoning-parser names this server knows.
std::span<const std::string_view> reasoning_parser_names();

// Throws std::invalid_argument naming `name` and the known names when `name` is not one of them.
std::unique_ptr<ReasoningParser> make_reasoning_parser(std::string_view name, ReasoningOptions options = {});

// True when the rendered prompt's last think tag is </think> (e.g. the `<think>\n\n</think>\n\n` Qwen3's
// template writes for enable_thinking=false), so the generated text starts after the reasoning.
bool prompt_closes_reasoning(std::string_view prompt);

// A whole response's `message.reasoning` and `message.content`, null where vLLM gives null: reasoning when
// the parser passes everything through; content when nothing follows the reasoning.
struct ReasoningResult {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;

  bool operator==(const ReasoningResult&) const = default;
};

// Gathers streamed deltas into the whole response they add up to.
class ReasoningCollector {
 public:
  explicit ReasoningCollector(const ReasoningParser& parser) : parser_(parser) {}
  void add(const ReasoningDelta& delta);
  ReasoningResult result() const;

 private:
  const ReasoningParser& parser_;
  std::string reasoning_;
  std::string content_;
};

// A whole (non-stream) response: `parser` fed all of `text`, then finished.
ReasoningResult parse_reasoning(ReasoningParser& parser, std::string_view text);

}  // namespace serverd::parsers
