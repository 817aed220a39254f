#pragma once

// vLLM's --root-path: the path prefix a proxy serves this server under. Starlette routes a request whose
// path begins with it as if the prefix were not there, and any other path as it is, so the server answers
// both behind the proxy and directly.

#include <string>
#include <string_view>

namespace serverd::http {

// Throws std::invalid_argument naming root_path unless it is empty, or begins with '/' and does not end
// with one (a prefix ending in '/' would never match a path segment).
void check_root_path(std::string_view root_path);

// `target` (origin-form: path and query) as the handler sees it: without `root_path` when its path is the
// root path itself ("/" then) or continues it with '/'; any other target as it is.
std::string strip_root_path(std::string target, std::string_view root_path);

}  // namespace serverd::http
