#include "serverd/parsers/think_reasoning_parser.h"

#include <algorithm>
#include <stdexcept>

#include "serverd/parsers/marker_search.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

}  // namespace

std::string_view ThinkReasoningParser::end_marker() const {
  return kThinkEnd;
}

ThinkReasoningParser::ThinkReasoningParser(std::string_view name, bool passes_through)
    : name_(name), passes_through_(passes_through) {}

ReasoningDelta ThinkReasoningParser::feed(std::string_view text) {
  if (finished_) throw std::logic_error("reasoning parser '" + std::string(name_) + "' fed text after finish()");
  ReasoningDelta out;
  last_feed_was_reasoning_ = false;
  if (!in_reasoning()) {
    out.content = text;
    return out;
  }
  const std::size_t held_before = held_.size();
  std::string text_so_far = std::move(held_);
  held_.clear();
  text_so_far.append(text);
  std::string_view rest = text_so_far;
  while (true) {
    const std::size_t end = rest.find(kThinkEnd);
    const std::size_t start = start_tag_dropped_ ? std::string_view::npos : rest.find(kThinkStart);
    if (start != std::string_view::npos && (end == std::string_view::npos || start < end)) {
      out.reasoning.append(rest.substr(0, start));
      rest.remove_prefix(start + kThinkStart.size());
      start_tag_dropped_ = true;
      continue;
    }
    if (end != std::string_view::npos) {
      out.reasoning.append(rest.substr(0, end));
      out.content.append(rest.substr(end + kThinkEnd.size()));
      reasoning_done_ = true;
      break;
    }
    std::size_t hold = partial_marker_length(rest, kThinkEnd);
    if (!start_tag_dropped_) hold = std::max(hold, partial_marker_length(rest, kThinkStart));
    out.reasoning.append(rest.substr(0, rest.size() - hold));
    held_ = rest.substr(rest.size() - hold);
    break;
  }
  last_feed_was_reasoning_ = !out.reasoning.empty() || held_.size() > held_before;
  return out;
}

ReasoningDelta ThinkReasoningParser::finish() {
  if (finished_) throw std::logic_error("reasoning parser '" + std::string(name_) + "' finished twice");
  finished_ = true;
  ReasoningDelta out;
  out.reasoning = std::move(held_);  // a tag begun and never completed is reasoning text
  held_.clear();
  return out;
}

}  // namespace serverd::parsers
