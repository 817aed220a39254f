#pragma once

// --tool-call-parser mistral (Mistral 7B Instruct v0.3 and the models decoded with a Hugging Face
// tokenizer, which vLLM reads the pre-v11 way): the [TOOL_CALLS] special token, then a JSON array of calls,
//   [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": ...}]
// Call ids are Mistral's: 9 letters and digits.

#include <optional>

#include "serverd/parsers/json_call.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class MistralToolParser final : public ToolCallParserBase {
 public:
  explicit MistralToolParser(ToolCallOptions options);

  std::string_view name() const override { return "mistral"; }
  std::span<const std::string_view> markers() const override;
  bool needs_special_tokens() const override { return true; }

 private:
  enum class State {
    kText,         // outside calls: looking for [TOOL_CALLS]
    kAfterMarker,  // whitespace after [TOOL_CALLS], until the "["
    kArray,        // inside the array, between elements
    kElement,      // inside an element
  };

  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;
  bool step(std::size_t& pos, ToolParserDelta& out);
  // The calls so far are all there is: what is held back is content, and reading goes on outside calls.
  void give_up(ToolParserDelta& out);

  State state_ = State::kText;
  std::string input_;
  std::string uncommitted_;      // up to the first element's call: the marker and "[", content if no call follows
  bool expect_element_ = false;  // kArray: an element comes next (after "[" or ",")
  int elements_ = 0;             // kArray: calls read from this array
  std::optional<JsonObjectText> element_;
};

}  // namespace serverd::parsers
