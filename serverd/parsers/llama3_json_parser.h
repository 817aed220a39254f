#pragma once

// --tool-call-parser llama3_json (Llama 3.1, 3.2, 3.3 with JSON tool calling): the answer is the call,
// optionally led by the <|python_tag|> special token, one or more JSON objects separated by ";":
//   {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}
// The key may also be "arguments" (taken first when both are there).

#include <optional>

#include "serverd/parsers/json_call.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class Llama3JsonToolParser final : public ToolCallParserBase {
 public:
  explicit Llama3JsonToolParser(ToolCallOptions options);

  std::string_view name() const override { return "llama3_json"; }
  std::span<const std::string_view> markers() const override;
  bool needs_special_tokens() const override { return false; }

 private:
  enum class State {
    kLeading,  // before the first object: whitespace and <|python_tag|> so far
    kObject,   // inside an object
    kBetween,  // after a call: whitespace and ";" until the next "{"
    kContent,  // the rest is content
  };

  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;
  // Reads from input_[pos]; false when it needs more text to decide.
  bool step(std::size_t& pos, ToolParserDelta& out);
  // What was held back becomes content, and so does the rest of the text.
  void give_up(ToolParserDelta& out);

  State state_ = State::kLeading;
  bool tag_seen_ = false;
  std::string input_;        // text not read yet
  std::string uncommitted_;  // before the first call: what leads the object, content if it is not a call
  std::optional<JsonObjectText> object_;
};

}  // namespace serverd::parsers
