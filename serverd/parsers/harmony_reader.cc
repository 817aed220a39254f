#include "serverd/parsers/harmony_reader.h"

#include <algorithm>
#include <array>
#include <span>

#include "serverd/parsers/marker_search.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::array<std::string_view, 2> kHeaderStarts = {kStart, kChannel};
constexpr std::array<std::string_view, 3> kMessageEnds = {"<|end|>", "<|return|>", "<|call|>"};
constexpr std::string_view kRecipientKey = "to=";
constexpr std::string_view kSpaces = " \t\r\n";

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

// Calls f(word) for each whitespace-separated word of `text`.
template <class F>
void for_each_word(std::string_view text, F&& f) {
  for (std::size_t at = text.find_first_not_of(kSpaces); at != std::string_view::npos;
       at = text.find_first_not_of(kSpaces, at)) {
    const std::size_t end = std::min(text.find_first_of(kSpaces, at), text.size());
    f(text.substr(at, end - at));
    at = end;
  }
}

}  // namespace

HarmonyHeader parse_harmony_header(std::string_view text) {
  HarmonyHeader header;
  const std::size_t channel_at = text.rfind(kChannel);
  const std::string_view role = channel_at == std::string_view::npos ? text : text.substr(0, channel_at);
  std::string_view rest =
      channel_at == std::string_view::npos ? std::string_view() : text.substr(channel_at + kChannel.size());
  const std::size_t constrain = rest.find(kConstrain);
  if (constrain != std::string_view::npos) {
    for_each_word(rest.substr(constrain + kConstrain.size()), [&](std::string_view word) {
      if (header.content_type.empty()) header.content_type = word;
    });
    rest = rest.substr(0, constrain);
  }
  for_each_word(role, [&](std::string_view word) {
    if (word.starts_with(kRecipientKey)) header.recipient = word.substr(kRecipientKey.size());
  });
  bool first = true;
  for_each_word(rest, [&](std::string_view word) {
    if (word.starts_with(kRecipientKey)) {
      header.recipient = word.substr(kRecipientKey.size());
    } else if (first) {
      header.channel = word;
    } else if (header.content_type.empty()) {
      header.content_type = word;
    }
    first = false;
  });
  return header;
}

void HarmonyReader::feed(std::string_view text, Handler& handler) {
  pending_.append(text);
  while (!pending_.empty()) {
    if (state_ == State::kHeader) {
      // A header means something only whole, so it is kept until its end is known.
      header_text_ += pending_;
      pending_.clear();
      const std::size_t end = header_text_.find(kMessage);
      if (end == std::string::npos) return;
      pending_ = header_text_.substr(end + kMessage.size());
      header_ = parse_harmony_header(std::string_view(header_text_).substr(0, end));
      header_text_.clear();
      state_ = State::kBody;
      handler.on_begin(header_);
      continue;
    }
    const std::string_view rest = pending_;
    const std::span<const std::string_view> markers = state_ == State::kOutside
                                                          ? std::span<const std::string_view>(kHeaderStarts)
                                                          : std::span<const std::string_view>(kMessageEnds);
    const Found marker = find_first(rest, markers);
    const std::size_t text_end =
        marker.at == std::string_view::npos ? rest.size() - partial_length(rest, markers) : marker.at;
    if (text_end > 0) handler.on_text(rest.substr(0, text_end), message());
    if (marker.at == std::string_view::npos) {
      pending_.erase(0, text_end);
      return;
    }
    if (state_ == State::kOutside) {
      // The role after <|start|> belongs to the header; <|channel|> is kept to name the channel.
      const bool names_channel = rest.compare(marker.at, kChannel.size(), kChannel) == 0;
      pending_.erase(0, names_channel ? marker.at : marker.at + marker.length);
      state_ = State::kHeader;
    } else {
      const std::string end_marker(rest.substr(marker.at, marker.length));
      pending_.erase(0, marker.at + marker.length);
      state_ = State::kOutside;
      handler.on_end(header_, end_marker);
    }
  }
}

void HarmonyReader::finish(Handler& handler) {
  if (state_ != State::kHeader && !pending_.empty()) handler.on_text(pending_, message());
  if (state_ == State::kBody) handler.on_end(header_, {});
  state_ = State::kOutside;
  pending_.clear();
  header_text_.clear();
}

}  // namespace serverd::parsers
