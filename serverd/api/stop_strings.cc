#include "serverd/api/stop_strings.h"

#include <algorithm>

namespace serverd::api {

StopStrings::StopStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {}

std::optional<StopStrings::Match> StopStrings::find(std::string_view text, std::size_t new_from) const {
  std::optional<Match> best;
  for (std::size_t i = 0; i < strings_.size(); ++i) {
    const std::string& stop = strings_[i];
    if (stop.empty() || stop.size() > text.size()) continue;
    // A match must end past new_from, so it starts at new_from - size + 1 or later.
    const std::size_t from = new_from + 1 > stop.size() ? new_from + 1 - stop.size() : 0;
    const std::size_t at = text.find(stop, from);
    if (at == std::string_view::npos) continue;
    if (!best || at < best->position) best = Match{at, i};
  }
  return best;
}

std::size_t StopStrings::held_back(std::string_view text) const {
  std::size_t longest = 0;
  for (const std::string& stop : strings_) {
    if (stop.empty()) continue;
    // Only prefixes longer than the best so far can matter.
    for (std::size_t k = std::min(stop.size() - 1, text.size()); k > longest; --k) {
      if (text.substr(text.size() - k) == std::string_view(stop).substr(0, k)) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}

}  // namespace serverd::api
