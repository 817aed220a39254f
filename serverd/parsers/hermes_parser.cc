#include "serverd/parsers/hermes_parser.h"

#include <array>
#include <utility>

#include "serverd/parsers/json_call.h"
#include "serverd/parsers/marker_search.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";
constexpr std::array<std::string_view, 2> kMarkers = {kStart, kEnd};

}  // namespace

HermesToolParser::HermesToolParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)) {}

std::span<const std::string_view> HermesToolParser::markers() const {
  return kMarkers;
}

void HermesToolParser::consume(std::string_view text, ToolParserDelta& out) {
  std::string after_start;  // the text after a "<tool_call>" found in input_
  while (!text.empty()) {
    if (in_call_) {
      // A call's text ends at the first </tool_call> outside its JSON strings (vLLM ends it at the first
      // </tool_call> anywhere, so a string that quotes the tag breaks the call there).
      std::size_t used = 0;
      while (used < text.size()) {
        const char c = text[used++];
        body_ += c;
        scanner_.advance(c);
        if (!scanner_.in_string() && body_.ends_with(kEnd)) {
          body_.resize(body_.size() - kEnd.size());
          close_call(true, out);
          break;
        }
      }
      text.remove_prefix(used);
      continue;
    }
    input_.append(text);
    const MarkerSearch found = search_marker(input_, kStart);
    outside(std::string_view(input_).substr(0, found.end), out);
    if (!found.found) {
      input_.erase(0, found.end);
      return;
    }
    after_start = input_.substr(found.end + kStart.size());
    input_.clear();
    in_call_ = true;
    text = after_start;
  }
}

void HermesToolParser::close_call(bool end_tag_seen, ToolParserDelta& out) {
  if (auto call = json_call(body_, {"arguments"})) {
    emit_call(std::move(*call), out);
  } else {
    unparsed(std::string(kStart) + body_ + (end_tag_seen ? std::string(kEnd) : std::string()), out);
  }
  in_call_ = false;
  body_.clear();
  scanner_ = NestingScanner(NestingScanner::Syntax::kJson);
}

void HermesToolParser::end(ToolParserDelta& out) {
  // A call the model did not close is still one when its text is a whole call (vLLM reads it so too).
  if (in_call_) {
    close_call(false, out);
  } else {
    outside(input_, out);
    input_.clear();
  }
}

}  // namespace serverd::parsers
