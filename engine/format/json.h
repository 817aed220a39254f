#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace engine::format {

// Parses UTF-8 JSON with bounded stack use (iterative parser, so deep nesting cannot overflow the stack)
// and validated encoding. Parsing stops after the first complete value; `consumed` receives the number of
// bytes read, so callers decide what may follow. Returns the error text in `error` (empty on success).
// What an object that names one key twice becomes.
enum class DuplicateKeys {
  // The key stays where it first appears, with the value it was given last: Python's json module (and so
  // every Python peer) reads it that way, and a reader that kept the first value would see another document
  // than the peer or proxy in front of it.
  kKeepLast,
  // Every member as written, for readers that refuse repeated keys (with repeated_key below).
  kKeepAll,
};

rapidjson::Document parse_json_prefix(std::string_view text, std::size_t& consumed, std::string& error,
                                      DuplicateKeys duplicates = DuplicateKeys::kKeepLast);

// A key that some object under `root` names twice (the first found), for readers that refuse them.
std::optional<std::string> repeated_key(const rapidjson::Value& root);

// DuplicateKeys::kKeepLast, applied in place to every object under `root` (for documents parsed
// elsewhere). Iterative: any nesting depth is safe.
void keep_last_duplicate_members(rapidjson::Value& root);

// "null", "a boolean", "a number", "a string", "an array" or "an object": the kind of a value, for messages.
std::string_view json_type_name(const rapidjson::Value& value);

}  // namespace engine::format
