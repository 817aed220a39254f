#pragma once

// UTF-8 text helpers with Python's str semantics: code-point indexing, Unicode whitespace, case mapping.
// Strings handed to these functions are valid UTF-8 (template sources and JSON inputs are validated).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace engine::template_::text {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view code_points);
using base::append_utf8;  // one UTF-8 encoder (base/utf8.h)
bool valid_utf8(std::string_view bytes);
std::size_t length(std::string_view utf8);  // in code points, as Python's len()
bool is_ascii(std::string_view bytes);

// str.isspace() for one code point (Unicode whitespace, including \x1c-\x1f and \x85).
bool is_space(char32_t cp);
// Characters of Python's \w (letters, digits, underscore).
bool is_word(char32_t cp);
bool is_cased_upper(char32_t cp);
bool is_cased_lower(char32_t cp);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);        // str.title()
std::string capitalize(std::string_view s);   // str.capitalize()
std::string jinja_title(std::string_view s);  // Jinja's title filter (words split at spaces, -([{<)

// str.strip / lstrip / rstrip; chars = nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit); sep = nullopt splits on whitespace runs. Throws std::invalid_argument on an
// empty separator.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text, std::int64_t count);
// str.find / str.count over code points; -1 when not found.
std::int64_t find(std::string_view s, std::string_view sub);
std::int64_t rfind(std::string_view s, std::string_view sub);
std::int64_t count(std::string_view s, std::string_view sub);

// Python's repr() of a str.
std::string repr(std::string_view s);
// A JSON string literal as Python's json.dumps writes it.
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace engine::template_::text
