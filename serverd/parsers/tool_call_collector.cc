// Streamed tool-call deltas gathered into the whole response they add up to.
#include <stdexcept>
#include <string>

#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {

void ToolCallCollector::add(const ToolParserDelta& delta) {
  content_ += delta.content;
  for (const ToolCallDelta& piece : delta.tool_calls) {
    if (piece.starts_call()) {
      if (piece.index != static_cast<int>(calls_.size())) {
        throw std::logic_error("tool call " + std::to_string(piece.index) + " started after " +
                               std::to_string(calls_.size()) + " calls");
      }
      calls_.push_back(ToolCall{piece.id, piece.name, piece.arguments});
      continue;
    }
    if (calls_.empty() || piece.index != static_cast<int>(calls_.size()) - 1) {
      throw std::logic_error("arguments for tool call " + std::to_string(piece.index) + " while " +
                             std::to_string(calls_.size()) + " calls were started");
    }
    calls_.back().arguments += piece.arguments;
  }
}

ToolParserResult ToolCallCollector::result() const {
  ToolParserResult result;
  // vLLM: a response that made calls and wrote nothing else has a null content; one without calls keeps
  // its text, even empty.
  if (!content_.empty() || calls_.empty()) result.content = content_;
  result.calls = calls_;
  return result;
}

ToolParserResult parse_tool_calls(ToolCallParser& parser, std::string_view text) {
  ToolCallCollector collector;
  collector.add(parser.feed(text));
  collector.add(parser.finish());
  return collector.result();
}

}  // namespace serverd::parsers
