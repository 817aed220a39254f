#pragma once

// One choice's generated text through the parsers a request asked for: the reasoning parser first (it
// splits `<think>…</think>` off), then the tool-call parser on the content that remains. Either may be
// absent; with neither, text passes through as content. What the API layer streams (feed/finish) and what
// a whole response holds (result) come from the same calls, so they always agree.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {

// What one feed() or finish() produced, in the order a stream sends it.
struct ChoiceDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  bool operator==(const ChoiceDelta&) const = default;
};

// A whole response's message: null fields where vLLM gives null.
struct ChoiceResult {
  std::optional<std::string> reasoning;  // null without a reasoning parser, or when it passed everything through
  std::optional<std::string> content;    // null when the choice made calls and wrote nothing else
  std::vector<ToolCall> calls;

  bool operator==(const ChoiceResult&) const = default;
};

class ChoiceParser {
 public:
  ChoiceParser(std::unique_ptr<ReasoningParser> reasoning, std::unique_ptr<ToolCallParser> tools);

  // The next decoded text delta (ending on a UTF-8 boundary). `tokens` is how many generated tokens it
  // decodes; they count as reasoning tokens when the reasoning parser read reasoning in it.
  ChoiceDelta feed(std::string_view text, std::size_t tokens = 0);
  // The end of the choice: text held back as a possible tag or call is decided.
  ChoiceDelta finish();

  // Everything fed and finished so far, as a whole response's message.
  ChoiceResult result() const;
  // usage.completion_tokens_details.reasoning_tokens, as vLLM counts them.
  std::size_t reasoning_tokens() const { return reasoning_tokens_; }
  bool made_tool_calls() const { return calls_started_ > 0; }

 private:
  ChoiceDelta through_tools(ReasoningDelta delta, bool final);
  void collect(const ChoiceDelta& delta);

  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolCallParser> tools_;
  std::string reasoning_text_;
  ToolCallCollector calls_;
  std::size_t calls_started_ = 0;
  std::size_t reasoning_tokens_ = 0;
};

}  // namespace serverd::parsers
