#include "serverd/parsers/choice_parser.h"

#include <utility>

namespace serverd::parsers {

ChoiceParser::ChoiceParser(std::unique_ptr<ReasoningParser> reasoning, std::unique_ptr<ToolCallParser> tools)
    : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

ChoiceDelta ChoiceParser::through_tools(ReasoningDelta delta, bool final) {
  ChoiceDelta out;
  out.reasoning = std::move(delta.reasoning);
  if (tools_ == nullptr) {
    out.content = std::move(delta.content);
    return out;
  }
  ToolParserDelta parsed;
  if (!delta.content.empty()) parsed = tools_->feed(delta.content);
  if (final) {
    ToolParserDelta rest = tools_->finish();
    parsed.content += rest.content;
    parsed.tool_calls.insert(parsed.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
  }
  out.content = std::move(parsed.content);
  out.tool_calls = std::move(parsed.tool_calls);
  return out;
}

void ChoiceParser::collect(const ChoiceDelta& delta) {
  reasoning_text_ += delta.reasoning;
  calls_.add(ToolParserDelta{delta.content, delta.tool_calls});
  for (const ToolCallDelta& piece : delta.tool_calls) calls_started_ += piece.starts_call() ? 1 : 0;
}

ChoiceDelta ChoiceParser::feed(std::string_view text, std::size_t tokens) {
  ReasoningDelta split;
  if (reasoning_ != nullptr) {
    split = reasoning_->feed(text);
    if (reasoning_->last_feed_was_reasoning()) reasoning_tokens_ += tokens;
  } else {
    split.content = std::string(text);
  }
  ChoiceDelta out = through_tools(std::move(split), false);
  collect(out);
  return out;
}

ChoiceDelta ChoiceParser::finish() {
  ReasoningDelta split;
  if (reasoning_ != nullptr) split = reasoning_->finish();
  ChoiceDelta out = through_tools(std::move(split), true);
  collect(out);
  return out;
}

ChoiceResult ChoiceParser::result() const {
  ChoiceResult result;
  const ToolParserResult calls = calls_.result();
  result.content = calls.content;
  result.calls = calls.calls;
  if (reasoning_ != nullptr && !reasoning_->passes_through()) {
    result.reasoning = reasoning_text_;
    // vLLM: content is null when nothing follows the reasoning.
    if (result.content && result.content->empty()) result.content.reset();
  }
  return result;
}

}  // namespace serverd::parsers
