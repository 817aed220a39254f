#pragma once

// The tool calls of a request whose tool_choice forces them (vLLM reads these without any
// --tool-call-parser, since structured outputs make the model write exactly this):
//   - a named function: the whole text is that function's arguments object, one call, streamed as it is
//     generated (the call's header with the first text, then each piece of text);
//   - "required": the text is a JSON array of {"name": ..., "parameters": {...}} objects, each sent as one
//     call once its object closes, its arguments written again as vLLM writes them (json.dumps).
// Text that is not a call (an element cut short by max_tokens) is content.

#include <optional>
#include <string>

#include "serverd/parsers/json_call.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class NamedToolCallParser final : public ToolCallParserBase {
 public:
  NamedToolCallParser(std::string function, ToolCallOptions options);

  std::string_view name() const override { return "tool_choice_function"; }
  std::span<const std::string_view> markers() const override { return {}; }
  bool needs_special_tokens() const override { return false; }

 private:
  void consume(std::string_view text, ToolParserDelta& out) override;
  // A call is made even when nothing was generated (vLLM's whole response always holds one).
  void end(ToolParserDelta& out) override;
  void begin(ToolParserDelta& out);

  std::string function_;
  bool begun_ = false;
};

class RequiredToolCallsParser final : public ToolCallParserBase {
 public:
  explicit RequiredToolCallsParser(ToolCallOptions options);

  std::string_view name() const override { return "tool_choice_required"; }
  std::span<const std::string_view> markers() const override { return {}; }
  bool needs_special_tokens() const override { return false; }

 private:
  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;

  std::optional<JsonObjectText> element_;  // the array element being read
};

}  // namespace serverd::parsers
