#pragma once

// --tool-call-parser pythonic (Llama 3.2 and 4, ToolACE and others): the answer is a Python list of calls
// with literal keyword arguments,
//   [get_weather(city="Paris", days=3), get_time(zone='CET')]
// turned into JSON arguments as vLLM does (see python_call.h for the literals taken).

#include "serverd/parsers/nesting_scanner.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class PythonicToolParser final : public ToolCallParserBase {
 public:
  explicit PythonicToolParser(ToolCallOptions options);

  std::string_view name() const override { return "pythonic"; }
  std::span<const std::string_view> markers() const override { return {}; }
  bool needs_special_tokens() const override { return false; }

 private:
  enum class State {
    kLeading,    // whitespace before the "["
    kItem,       // after "[" or ",": a call's name next (or "]" after a trailing comma)
    kName,       // in the call's name
    kAfterName,  // whitespace between the name and "("
    kArguments,  // from "(" to the ")" that closes it
    kAfterCall,  // after a call: "," or "]"
    kAfterList,  // after the "]": outside calls
    kContent,    // the rest is content
  };

  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;
  // Reads input byte `c`; false when `c` is not taken here and must be read again in the new state.
  bool step(char c, ToolParserDelta& out);
  void give_up(ToolParserDelta& out);

  State state_ = State::kLeading;
  std::string uncommitted_;  // before the first call: the "[" and what led it, content if no call follows
  std::string call_;         // the call being read, from its name
  bool trailing_comma_ = false;
  NestingScanner scanner_{NestingScanner::Syntax::kPython};
};

}  // namespace serverd::parsers
