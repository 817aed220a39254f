#pragma once

// The seam through which a GenerationSession serves an API whose output is not a list of choices (the
// Responses API): the session still submits, detokenizes, applies stop strings, records metrics and
// handles aborts; the formatter turns the one choice's text into that API's body or stream events.

#include <cstddef>
#include <string>
#include <string_view>

#include "serverd/api/choice_output.h"

namespace serverd::api {

class OutputFormatter {
 public:
  virtual ~OutputFormatter() = default;

  // Streaming: what goes out before any text (the response's opening events).
  virtual std::string begin() = 0;
  // The choice's next text (what ChoiceOutput::take_text gave) and how many generated tokens it decodes.
  // Called in both modes, so a whole response is built from the same pieces a stream sends; returns the
  // stream's events for them (a whole response drops them).
  virtual std::string feed(std::string_view text, std::size_t tokens) = 0;
  // The choice ended (`out` is finished): the stream's closing events.
  virtual std::string finish(const ChoiceOutput& out, std::size_t prompt_tokens) = 0;
  // After finish(): the whole (non-stream) response body.
  virtual std::string whole(const ChoiceOutput& out, std::size_t prompt_tokens) const = 0;
  // The stream's terminator after finish()'s events (chat's "data: [DONE]"; empty for the Responses API).
  virtual std::string_view stream_end() const = 0;
};

}  // namespace serverd::api
