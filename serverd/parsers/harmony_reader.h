#pragma once

// OpenAI's harmony format (gpt-oss), read from text that arrives in pieces: which message each byte of the
// text belongs to. The prompt ends with `<|start|>assistant`, so a completion reads
//   <|channel|>analysis<|message|>THINKING<|end|><|start|>assistant<|channel|>commentary to=functions.f
//   <|constrain|>json<|message|>{"x": 1}<|call|>
// A header runs from `<|start|>` (then the role, which may name the recipient: `assistant to=functions.f`)
// or `<|channel|>` up to `<|message|>`; a message's text from there to `<|end|>`, `<|return|>` or `<|call|>`.
// `<|return|>` and `<|call|>` end the sequence (they are end-of-sequence tokens), so a message the model
// finished with them ends at finish(). Text outside any message (a model that ignored the format) is text of
// no message. A marker split across deltas is held back until the next delta tells.

#include <string>
#include <string_view>

namespace serverd::parsers {

// What a message's header says.
struct HarmonyHeader {
  std::string channel;       // "analysis", "commentary", "final"; empty when the header names none
  std::string recipient;     // "functions.get_weather" from `to=`, in the role or after the channel; or empty
  std::string content_type;  // "json" from `<|constrain|>json` or a word after the channel; or empty

  bool operator==(const HarmonyHeader&) const = default;
};

// A header's text: what lies between `<|start|>` and `<|message|>`, `<|channel|>` included.
HarmonyHeader parse_harmony_header(std::string_view text);

class HarmonyReader {
 public:
  // What the reader found, in the order of the text.
  class Handler {
   public:
    virtual ~Handler() = default;
    // Text of the message `header` says, or of no message (`header` null).
    virtual void on_text(std::string_view text, const HarmonyHeader* header) = 0;
    virtual void on_begin(const HarmonyHeader& header) = 0;
    // The message ended at `marker`, or at the end of the sequence (`marker` empty).
    virtual void on_end(const HarmonyHeader& header, std::string_view marker) = 0;
  };

  void feed(std::string_view text, Handler& handler);
  // The end of the sequence: a marker begun and never completed is text where it was cut, a header cut
  // short is dropped, and a message still open ends.
  void finish(Handler& handler);

  // The message whose text is being read: null inside a header or outside any message.
  const HarmonyHeader* message() const { return state_ == State::kBody ? &header_ : nullptr; }
  // Bytes are held back as the possible start of a marker.
  bool holding() const { return !pending_.empty(); }

 private:
  enum class State { kOutside, kHeader, kBody };

  State state_ = State::kOutside;
  HarmonyHeader header_;     // the message being read (kBody)
  std::string header_text_;  // the header read so far (kHeader)
  std::string pending_;      // text not passed on yet
};

}  // namespace serverd::parsers
