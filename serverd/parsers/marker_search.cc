#include "serverd/parsers/marker_search.h"

#include <algorithm>

namespace serverd::parsers {

std::size_t partial_marker_length(std::string_view text, std::string_view marker) {
  for (std::size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length) {
    if (text.ends_with(marker.substr(0, length))) return length;
  }
  return 0;
}

MarkerSearch search_marker(std::string_view text, std::string_view marker) {
  if (const std::size_t at = text.find(marker); at != std::string_view::npos) return {at, true};
  return {text.size() - partial_marker_length(text, marker), false};
}

}  // namespace serverd::parsers
