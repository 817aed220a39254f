#pragma once

// Markers (`<tool_call>`, `</think>`, `[TOOL_CALLS]`) found in text that arrives in pieces: a marker may be
// split across deltas, so the end of a delta that could be its beginning waits for the next one.

#include <cstddef>
#include <string_view>

namespace serverd::parsers {

// The length of the longest end of `text` that is a proper prefix of `marker`: the bytes that may not be
// passed on before more text tells whether the marker follows.
std::size_t partial_marker_length(std::string_view text, std::string_view marker);

// Where `text` may be passed on up to: the start of the first `marker` (found = true), else the start of
// a partial marker at its end.
struct MarkerSearch {
  std::size_t end = 0;  // text before this is not part of the marker
  bool found = false;   // the whole marker starts at `end`
};
MarkerSearch search_marker(std::string_view text, std::string_view marker);

}  // namespace serverd::parsers
