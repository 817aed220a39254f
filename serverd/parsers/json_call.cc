#include "serverd/parsers/json_call.h"

#include <stdexcept>

#include "engine/template/value.h"

namespace serverd::parsers {

std::optional<RecognisedCall> json_call(std::string_view text, std::initializer_list<std::string_view> argument_keys) {
  using engine::template_::Value;
  try {
    // Value keeps Python's view of JSON (key order, last of repeated keys, ints against floats), and its
    // to_json is json.dumps, so the arguments come out as vLLM's re-serialization of them.
    const Value object = Value::parse_json(text, "tool call");
    if (!object.is_dict()) return std::nullopt;
    const Value* name = object.as_dict().find("name");
    if (name == nullptr || !name->is_string() || name->as_string().empty()) return std::nullopt;
    for (const std::string_view key : argument_keys) {
      if (const Value* arguments = object.as_dict().find(key)) {
        return RecognisedCall{name->as_string(), arguments->to_json()};
      }
    }
    return std::nullopt;
  } catch (const std::invalid_argument&) {  // not JSON, nested too deeply, or too large to write
    return std::nullopt;
  }
}

JsonObjectText::Step JsonObjectText::add(char c) {
  text_ += c;
  scanner_.advance(c);
  if (text_.size() == 1) return Step::kMore;  // the "{" itself
  if (first_byte_ && !is_space(c)) {
    first_byte_ = false;
    if (c != '"' && c != '}') return Step::kBroken;
  }
  if (scanner_.mismatched()) return Step::kBroken;
  return scanner_.depth() == 0 ? Step::kComplete : Step::kMore;
}

}  // namespace serverd::parsers
