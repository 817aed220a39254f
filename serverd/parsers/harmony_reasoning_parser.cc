#include "serverd/parsers/harmony_reasoning_parser.h"

#include <stdexcept>

namespace serverd::parsers {
namespace {

// What the model writes once it has finished thinking; structured outputs start after it.
constexpr std::string_view kFinalHeader = "<|channel|>final<|message|>";
constexpr std::string_view kFunctions = "functions.";

}  // namespace

std::string_view HarmonyReasoningParser::end_marker() const {
  return kFinalHeader;
}

bool HarmonyReasoningParser::passes_whole(const HarmonyHeader& header) const {
  return keep_function_calls_ && header.recipient.starts_with(kFunctions);
}

void HarmonyReasoningParser::on_text(std::string_view text, const HarmonyHeader* header) {
  const bool reasoning = header != nullptr && header->channel == "analysis" && !passes_whole(*header);
  (reasoning ? out_->reasoning : out_->content).append(text);
}

void HarmonyReasoningParser::on_begin(const HarmonyHeader& header) {
  final_started_ = final_started_ || header.channel == "final";
  if (!passes_whole(header)) return;
  std::string& content = out_->content;
  content.append("<|channel|>").append(header.channel).append(" to=").append(header.recipient);
  if (!header.content_type.empty()) content.append(" <|constrain|>").append(header.content_type);
  content.append("<|message|>");
}

void HarmonyReasoningParser::on_end(const HarmonyHeader& header, std::string_view marker) {
  if (passes_whole(header)) out_->content.append(marker);
}

ReasoningDelta HarmonyReasoningParser::feed(std::string_view text) {
  if (finished_) throw std::logic_error("reasoning parser 'openai_gptoss' fed text after finish()");
  ReasoningDelta out;
  out_ = &out;
  reader_.feed(text, *this);
  out_ = nullptr;
  const HarmonyHeader* message = reader_.message();
  last_feed_was_reasoning_ = !out.reasoning.empty() || (message != nullptr && message->channel == "analysis" &&
                                                        !passes_whole(*message) && reader_.holding());
  return out;
}

ReasoningDelta HarmonyReasoningParser::finish() {
  if (finished_) throw std::logic_error("reasoning parser 'openai_gptoss' finished twice");
  finished_ = true;
  ReasoningDelta out;
  out_ = &out;
  reader_.finish(*this);
  out_ = nullptr;
  return out;
}

}  // namespace serverd::parsers
