#pragma once

// The <think>...</think> split both qwen3 and deepseek_r1 make (vLLM's BaseThinkingReasoningParser and
// its current Qwen3 subclass):
// - the text starts inside the reasoning: recent templates (Qwen3 2507 thinking models, DeepSeek-R1 since
//   its template change) write <think> into the prompt, so the model only generates </think>;
// - a <think> generated before </think> is dropped (older templates let the model write it);
// - the first </think> ends the reasoning; everything after it is content, tags included;
// - without </think> everything is reasoning (the answer was cut short while thinking).
// The parser passes everything through as content instead when the prompt closed the reasoning or, for
// qwen3, the request turned thinking off.

#include <string>

#include "serverd/parsers/reasoning_parser.h"

namespace serverd::parsers {

class ThinkReasoningParser final : public ReasoningParser {
 public:
  ThinkReasoningParser(std::string_view name, bool passes_through);

  ReasoningDelta feed(std::string_view text) override;
  ReasoningDelta finish() override;
  std::string_view name() const override { return name_; }
  bool in_reasoning() const override { return !passes_through_ && !reasoning_done_; }
  bool last_feed_was_reasoning() const override { return last_feed_was_reasoning_; }
  bool passes_through() const override { return passes_through_; }
  bool needs_special_tokens() const override { return false; }
  std::string_view end_marker() const override;

 private:
  std::string_view name_;
  bool passes_through_;
  bool reasoning_done_ = false;
  bool start_tag_dropped_ = false;
  bool last_feed_was_reasoning_ = false;
  bool finished_ = false;
  std::string held_;  // the end of the reasoning so far that may begin a tag
};

}  // namespace serverd::parsers
