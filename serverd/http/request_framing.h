#pragma once

// How a request's body is framed must read the same to serverd and to any proxy in front of it (the
// deployment has nginx), or the bytes of one request could be served as another (request smuggling). These
// checks refuse what RFC 9112 calls ambiguous; the server answers the refusal and closes the connection.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "serverd/http/http_server.h"

namespace serverd::http {

// Header names and tokens (chunked, 100-continue) compare case-insensitively, in ASCII.
bool ascii_iequals(std::string_view a, std::string_view b);

struct FramingRefusal {
  int status;  // 400, or 501 for a transfer coding this server does not implement
  std::string message;
};

// True when the header block at the front of `data` (raw bytes as received) continues a field on the next
// line after a space or tab (obs-fold, RFC 9112 section 5.2). Parsers join such lines silently, so the raw
// bytes are checked before parsing.
bool has_obs_fold(std::string_view data);

// Checks the parsed header fields (names and values as sent) of a request: at most one Host and one
// Content-Length field, and Transfer-Encoding, if present, exactly `chunked` and only in HTTP/1.1.
std::optional<FramingRefusal> framing_refusal(std::span<const Header> fields, bool http10);

}  // namespace serverd::http
