#pragma once

// vLLM's `--reasoning-parser openai_gptoss`: gpt-oss writes its answer in OpenAI's harmony format, one
// message per channel. The prompt ends with `<|start|>assistant`, so a completion reads
//   <|channel|>analysis<|message|>THINKING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER
// (`<|return|>`, the end of the turn, is an end-of-sequence token and never reaches the text).
// - an `analysis` message's text is reasoning; every other channel's text is content: `final`, and
//   `commentary` too, whose tool calls (`to=functions.NAME`) are not read here: their arguments reach
//   content as text and the recipient is dropped with the rest of the header, unless a tool-call parser
//   that reads harmony follows (`keep_function_calls`): then a message to `functions.*` passes on whole,
//   as `<|channel|>CHANNEL to=RECIPIENT <|constrain|>TYPE<|message|>TEXT` and its end marker, for it;
// - headers (`<|start|>ROLE`, `<|channel|>NAME ...` up to `<|message|>`) and message ends (`<|end|>`,
//   `<|return|>`, `<|call|>`) are structure and reach neither field;
// - text outside any message (a model that ignored the format) is content;
// - cut short inside a header, the header is dropped; inside a message, its text so far counts.
// The markers are special tokens, so the text must be decoded with them kept (needs_special_tokens()).

#include <string>

#include "serverd/parsers/harmony_reader.h"
#include "serverd/parsers/reasoning_parser.h"

namespace serverd::parsers {

class HarmonyReasoningParser final : public ReasoningParser, private HarmonyReader::Handler {
 public:
  explicit HarmonyReasoningParser(bool keep_function_calls = false) : keep_function_calls_(keep_function_calls) {}

  ReasoningDelta feed(std::string_view text) override;
  ReasoningDelta finish() override;
  std::string_view name() const override { return "openai_gptoss"; }
  bool in_reasoning() const override { return !final_started_; }
  bool last_feed_was_reasoning() const override { return last_feed_was_reasoning_; }
  bool passes_through() const override { return false; }
  bool needs_special_tokens() const override { return true; }
  std::string_view end_marker() const override;

 private:
  void on_text(std::string_view text, const HarmonyHeader* header) override;
  void on_begin(const HarmonyHeader& header) override;
  void on_end(const HarmonyHeader& header, std::string_view marker) override;
  // The message being read passes on whole, markers included, for the tool-call parser.
  bool passes_whole(const HarmonyHeader& header) const;

  const bool keep_function_calls_;
  HarmonyReader reader_;
  ReasoningDelta* out_ = nullptr;  // where the reader's findings go during feed() and finish()
  bool final_started_ = false;
  bool last_feed_was_reasoning_ = false;
  bool finished_ = false;
};

}  // namespace serverd::parsers
