#pragma once

// Stop strings, matched on the detokenized text as vLLM matches them: the text ends where the first stop
// string begins (or, with include_stop_str_in_output, where it ends), and a stream never sends text that
// may be the start of a stop string until the next tokens tell.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace serverd::api {

class StopStrings {
 public:
  StopStrings() = default;
  explicit StopStrings(std::vector<std::string> strings);

  struct Match {
    std::size_t position = 0;  // where the stop string starts in the text
    std::size_t index = 0;     // which stop string
  };

  // The earliest stop string in `text` that ends after `new_from` (text before it was looked at already);
  // among stop strings starting at the same place, the first listed.
  std::optional<Match> find(std::string_view text, std::size_t new_from) const;

  // The length of the longest end of `text` that is a proper prefix of a stop string: bytes that cannot be
  // sent yet.
  std::size_t held_back(std::string_view text) const;

  bool empty() const { return strings_.empty(); }
  const std::string& operator[](std::size_t i) const { return strings_[i]; }

 private:
  std::vector<std::string> strings_;
};

}  // namespace serverd::api
