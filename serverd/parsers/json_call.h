#pragma once

// A tool call written as a JSON object, {"name": ..., "arguments": {...}}, as hermes, llama3_json and
// mistral models write them.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "serverd/parsers/nesting_scanner.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

// `text` (surrounding whitespace allowed) as one JSON object with a non-empty string "name" and the first
// of `argument_keys` it has. The arguments value, whatever its type, is written again as vLLM writes it,
// with Python's json.dumps(ensure_ascii=False): ", " and ": " between items, non-ASCII text as it is,
// repeated keys keeping their last value. nullopt when the text is not such an object (bad JSON, another
// type, no name, no arguments): the caller passes it on as content.
std::optional<RecognisedCall> json_call(std::string_view text, std::initializer_list<std::string_view> argument_keys);

// The text of one JSON object read byte by byte from its "{": complete when its braces close, broken as
// soon as it cannot be a call object (the first byte after "{" opens no key, a bracket closes the wrong
// one), so that prose starting with "{" is not held back to the end.
class JsonObjectText {
 public:
  enum class Step { kMore, kComplete, kBroken };

  JsonObjectText() { add('{'); }
  Step add(char c);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  NestingScanner scanner_{NestingScanner::Syntax::kJson};
  bool first_byte_ = true;  // the next byte that is not whitespace is the object's first
};

}  // namespace serverd::parsers
