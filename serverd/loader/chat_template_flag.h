#pragma once

// --chat-template as vLLM reads it: a file's contents when the value names a file, else the template itself
// when the value looks like one (it holds "{", "}" or a newline), with backslash escapes decoded as Python's
// unicode_escape does (so '\n' typed on a command line is a newline); anything else is a missing file.

#include <string>
#include <string_view>

namespace serverd {

// Throws base::UsageError for a path that does not exist or cannot be read.
std::string read_chat_template_flag(std::string_view value);

// Python's unicode_escape decoding of `text` (\n \t \\ \' \" \xhh \uXXXX \UXXXXXXXX octal ...); an unknown
// escape is kept as it is, as Python keeps it.
std::string decode_escapes(std::string_view text);

}  // namespace serverd
