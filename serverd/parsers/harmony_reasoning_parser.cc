#include "serverd/parsers/harmony_reasoning_parser.h"

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>

#include "serverd/parsers/marker_search.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::array<std::string_view, 2> kHeaderStarts = {kStart, kChannel};
constexpr std::array<std::string_view, 3> kMessageEnds = {"<|end|>", "<|return|>", "<|call|>"};
// What the model writes once it has finished thinking; structured outputs start after it.
constexpr std::string_view kFinalHeader = "<|channel|>final<|message|>";

// The first of `markers` in `text`: where it starts and its length (npos and 0 when none is there).
struct Found {
  std::size_t at = std::string_view::npos;
  std::size_t length = 0;
};
Found find_first(std::string_view text, std::span<const std::string_view> markers) {
  Found first;
  for (const std::string_view marker : markers) {
    const std::size_t at = text.find(marker);
    if (at < first.at) first = {at, marker.size()};
  }
  return first;
}

// The bytes at the end of `text` that may begin one of `markers`.
std::size_t partial_length(std::string_view text, std::span<const std::string_view> markers) {
  std::size_t longest = 0;
  for (const std::string_view marker : markers) longest = std::max(longest, partial_marker_length(text, marker));
  return longest;
}

// The channel a header names: the word after its last <|channel|> (`commentary to=functions.f <|constrain|>json`
// names commentary).
std::string_view channel_of(std::string_view header) {
  const std::size_t at = header.rfind(kChannel);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = header.substr(at + kChannel.size());
  return rest.substr(0, rest.find_first_of(" <"));
}

}  // namespace

std::string_view HarmonyReasoningParser::end_marker() const {
  return kFinalHeader;
}

void HarmonyReasoningParser::advance(ReasoningDelta& out) {
  while (!pending_.empty()) {
    const std::string_view text = pending_;
    if (state_ == State::kHeader) {
      // A header is dropped whole, so it is kept until its end is known rather than passed on.
      header_ += text;
      pending_.clear();
      const std::size_t end = header_.find(kMessage);
      if (end == std::string::npos) return;
      pending_ = header_.substr(end + kMessage.size());
      header_.resize(end);
      const std::string_view channel = channel_of(header_);
      analysis_ = channel == "analysis";
      final_started_ = final_started_ || channel == "final";
      header_.clear();
      state_ = State::kBody;
      continue;
    }
    const Found marker = state_ == State::kOutside ? find_first(text, kHeaderStarts) : find_first(text, kMessageEnds);
    if (marker.at == std::string_view::npos) {
      const std::size_t hold =
          state_ == State::kOutside ? partial_length(text, kHeaderStarts) : partial_length(text, kMessageEnds);
      field(out).append(text.substr(0, text.size() - hold));
      pending_.erase(0, text.size() - hold);
      return;
    }
    field(out).append(text.substr(0, marker.at));
    if (state_ == State::kOutside) {
      // The role after <|start|> belongs to the header too; <|channel|> is kept to name the channel.
      state_ = State::kHeader;
      const bool names_channel = text.compare(marker.at, kChannel.size(), kChannel) == 0;
      pending_.erase(0, names_channel ? marker.at : marker.at + marker.length);
    } else {
      state_ = State::kOutside;
      analysis_ = false;
      pending_.erase(0, marker.at + marker.length);
    }
  }
}

ReasoningDelta HarmonyReasoningParser::feed(std::string_view text) {
  if (finished_) throw std::logic_error("reasoning parser 'openai_gptoss' fed text after finish()");
  ReasoningDelta out;
  pending_.append(text);
  advance(out);
  last_feed_was_reasoning_ = !out.reasoning.empty() || (analysis_ && state_ == State::kBody && !pending_.empty());
  return out;
}

ReasoningDelta HarmonyReasoningParser::finish() {
  if (finished_) throw std::logic_error("reasoning parser 'openai_gptoss' finished twice");
  finished_ = true;
  ReasoningDelta out;
  // A marker begun and never completed is text of where it was cut; an unfinished header is dropped.
  if (state_ != State::kHeader) field(out) = std::move(pending_);
  pending_.clear();
  header_.clear();
  return out;
}

}  // namespace serverd::parsers
