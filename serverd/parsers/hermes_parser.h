#pragma once

// --tool-call-parser hermes (Hermes 2 Pro, Qwen2.5, Qwen3): each call is a JSON object between tags,
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// several in a turn, one after another.

#include "serverd/parsers/nesting_scanner.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class HermesToolParser final : public ToolCallParserBase {
 public:
  explicit HermesToolParser(ToolCallOptions options);

  std::string_view name() const override { return "hermes"; }
  std::span<const std::string_view> markers() const override;
  bool needs_special_tokens() const override { return true; }

 private:
  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;
  // The text of one <tool_call> is complete: a call, or content (tags included) when it is not one.
  void close_call(bool end_tag_seen, ToolParserDelta& out);

  bool in_call_ = false;
  std::string input_;  // outside calls: text not passed on yet (the start of a possible "<tool_call>")
  std::string body_;   // inside a call: the text after "<tool_call>"
  NestingScanner scanner_{NestingScanner::Syntax::kJson};
};

}  // namespace serverd::parsers
