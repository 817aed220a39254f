#include "serverd/parsers/forced_tool_calls.h"

#include <utility>

namespace serverd::parsers {

NamedToolCallParser::NamedToolCallParser(std::string function, ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)), function_(std::move(function)) {}

void NamedToolCallParser::begin(ToolParserDelta& out) {
  if (begun_) return;
  begun_ = true;
  begin_call(function_, out);
}

void NamedToolCallParser::consume(std::string_view text, ToolParserDelta& out) {
  if (text.empty()) return;
  begin(out);
  call_arguments(0, text, out);
}

void NamedToolCallParser::end(ToolParserDelta& out) {
  begin(out);
}

RequiredToolCallsParser::RequiredToolCallsParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)) {}

void RequiredToolCallsParser::consume(std::string_view text, ToolParserDelta& out) {
  for (const char c : text) {
    if (!element_) {
      // Between elements only the array's brackets, commas and whitespace come: they carry nothing.
      if (c == '{') element_.emplace();
      continue;
    }
    const JsonObjectText::Step step = element_->add(c);
    if (step == JsonObjectText::Step::kMore) continue;
    std::optional<RecognisedCall> call;
    if (step == JsonObjectText::Step::kComplete) call = json_call(element_->text(), {"parameters"});
    if (call) {
      emit_call(std::move(*call), out);
    } else {
      unparsed(element_->text(), out);
    }
    element_.reset();
  }
}

void RequiredToolCallsParser::end(ToolParserDelta& out) {
  if (element_) unparsed(element_->text(), out);
  element_.reset();
}

}  // namespace serverd::parsers
