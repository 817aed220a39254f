#pragma once

// Strings that came from outside (hub listings, repository files, request fields, error texts quoting them)
// reach log lines and terminals. A control character there could forge a log line (CR, LF) or drive the
// terminal (ESC sequences, the C1 controls), so such text is checked or escaped before it is printed.

#include <string>
#include <string_view>

namespace base {

// True when `text` holds a C0 control (U+0000-U+001F), DEL, a C1 control (U+0080-U+009F), or bytes that
// are not UTF-8.
bool has_control_characters(std::string_view text);

// `text` with every such byte written as an escape: \n, \r and \t by name, others as \xNN; a backslash
// stays as it is. Valid printable UTF-8 passes through unchanged.
std::string printable(std::string_view text);

}  // namespace base
