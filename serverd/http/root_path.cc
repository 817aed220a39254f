#include "serverd/http/root_path.h"

#include <stdexcept>

#include "base/printable.h"

namespace serverd::http {

void check_root_path(std::string_view root_path) {
  if (root_path.empty()) return;
  if (root_path.front() != '/' || root_path.back() == '/' || root_path.find_first_of("?#") != std::string_view::npos) {
    throw std::invalid_argument("root_path '" + base::printable(root_path) +
                                "' must begin with '/', not end with one and hold no '?' or '#' (e.g. '/api')");
  }
}

std::string strip_root_path(std::string target, std::string_view root_path) {
  if (root_path.empty() || !std::string_view(target).starts_with(root_path)) return target;
  const std::size_t end = root_path.size();
  if (end == target.size() || target[end] == '?') return "/" + target.substr(end);
  if (target[end] == '/') return target.substr(end);
  return target;  // "/apiary" is not under "/api"
}

}  // namespace serverd::http
