#pragma once

// vLLM's `--reasoning-parser openai_gptoss`: gpt-oss writes its answer in OpenAI's harmony format, one
// message per channel. The prompt ends with `<|start|>assistant`, so a completion reads
//   <|channel|>analysis<|message|>THINKING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER
// (`<|return|>`, the end of the turn, is an end-of-sequence token and never reaches the text).
// - an `analysis` message's text is reasoning; every other channel's text is content: `final`, and
//   `commentary` too, whose tool calls (`to=functions.NAME`) are not read here: their arguments reach
//   content as text and the recipient is dropped with the rest of the header;
// - headers (`<|start|>ROLE`, `<|channel|>NAME ...` up to `<|message|>`) and message ends (`<|end|>`,
//   `<|return|>`, `<|call|>`) are structure and reach neither field;
// - text outside any message (a model that ignored the format) is content;
// - cut short inside a header, the header is dropped; inside a message, its text so far counts.
// The markers are special tokens, so the text must be decoded with them kept (needs_special_tokens()).

#include <string>

#include "serverd/parsers/reasoning_parser.h"

namespace serverd::parsers {

class HarmonyReasoningParser final : public ReasoningParser {
 public:
  ReasoningDelta feed(std::string_view text) override;
  ReasoningDelta finish() override;
  std::string_view name() const override { return "openai_gptoss"; }
  bool in_reasoning() const override { return !final_started_; }
  bool last_feed_was_reasoning() const override { return last_feed_was_reasoning_; }
  bool passes_through() const override { return false; }
  bool needs_special_tokens() const override { return true; }
  std::string_view end_marker() const override;

 private:
  enum class State { kOutside, kHeader, kBody };

  // Moves through `pending_` as far as it can tell, appending message text to `out`.
  void advance(ReasoningDelta& out);
  std::string& field(ReasoningDelta& out) const { return analysis_ ? out.reasoning : out.content; }

  State state_ = State::kOutside;
  bool analysis_ = false;  // the message being read is on the analysis channel
  bool final_started_ = false;
  bool last_feed_was_reasoning_ = false;
  bool finished_ = false;
  std::string header_;   // the header read so far (kHeader)
  std::string pending_;  // text not passed on yet: the end of a delta that may begin a marker
};

}  // namespace serverd::parsers
