// Streamed reasoning deltas gathered into the whole response they add up to.
#include "serverd/parsers/reasoning_parser.h"

namespace serverd::parsers {

void ReasoningCollector::add(const ReasoningDelta& delta) {
  reasoning_ += delta.reasoning;
  content_ += delta.content;
}

ReasoningResult ReasoningCollector::result() const {
  if (parser_.passes_through()) return ReasoningResult{std::nullopt, content_};
  ReasoningResult result;
  result.reasoning = reasoning_;
  if (!content_.empty()) result.content = content_;
  return result;
}

ReasoningResult parse_reasoning(ReasoningParser& parser, std::string_view text) {
  ReasoningCollector collector(parser);
  collector.add(parser.feed(text));
  collector.add(parser.finish());
  return collector.result();
}

}  // namespace serverd::parsers
