#pragma once

// The JSON Schema string formats this server generates, each as a regular expression (converted by
// regex_to_gbnf) whose every match is valid for ajv-formats' full-mode check, so each is a subset of its
// format: date (the real calendar, leap years included), time and date-time (RFC 3339, the offset
// required), uuid, email (dot-atom local part, letters-digits-hyphen labels), ipv4 (dotted quad).

#include <optional>
#include <string_view>
#include <vector>

namespace engine::grammar {

// The regex for `format`, nullopt when it is not one of supported_string_formats().
std::optional<std::string_view> string_format_regex(std::string_view format);
const std::vector<std::string_view>& supported_string_formats();

}  // namespace engine::grammar
