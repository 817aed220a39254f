#pragma once

// One call of a pythonic tool-call list, `get_weather(city="Paris", days=3)`, read as Python reads it and
// turned into JSON arguments as vLLM's pythonic parser does (ast literals, then json.dumps).

#include <optional>
#include <string_view>

#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

// `text` as NAME(keyword=literal, ...): the arguments become one JSON object in keyword order. Literals are
// Python's: strings (quotes, triple quotes, prefixes r and u, escapes, adjacent strings joined), ints
// (underscores, 0x/0o/0b), floats, True/False/None, lists, dicts with literal keys (a non-string key is
// written as json.dumps writes it: 1 -> "1", True -> "true"), and a parenthesised literal. A minus or plus
// sign before a number is taken too, where vLLM's parser refuses it.
// nullopt for anything else, which the caller passes on as content: positional arguments (their names
// are unknown here; vLLM drops them silently), a keyword given twice, names and expressions, tuples, sets,
// bytes and f-strings, complex numbers, ints beyond 64 bits, floats that overflow, comments, text that is
// not UTF-8.
std::optional<RecognisedCall> python_call(std::string_view text);

// The ASCII letters, digits and underscore of Python names (no digit first); non-ASCII names are not taken.
bool is_python_name_start(char c);
bool is_python_name_char(char c);

}  // namespace serverd::parsers
