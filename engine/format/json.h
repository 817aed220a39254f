#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace engine::format {

// Parses UTF-8 JSON with bounded stack use (iterative parser, so deep nesting cannot overflow the stack)
// and validated encoding. Parsing stops after the first complete value; `consumed` receives the number of
// bytes read, so callers decide what may follow. Returns the error text in `error` (empty on success).
rapidjson::Document parse_json_prefix(std::string_view text, std::size_t& consumed, std::string& error);

// "null", "a boolean", "a number", "a string", "an array" or "an object": the kind of a value, for messages.
std::string_view json_type_name(const rapidjson::Value& value);

}  // namespace engine::format
