#include "serverd/parsers/mistral_parser.h"

#include <array>
#include <utility>

#include "serverd/parsers/marker_search.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::array<std::string_view, 1> kMarkers = {kToolCalls};

}  // namespace

MistralToolParser::MistralToolParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kMistral, std::move(options)) {}

std::span<const std::string_view> MistralToolParser::markers() const {
  return kMarkers;
}

void MistralToolParser::consume(std::string_view text, ToolParserDelta& out) {
  input_.append(text);
  std::size_t pos = 0;
  while (pos < input_.size() && step(pos, out)) {
  }
  input_.erase(0, pos);
}

bool MistralToolParser::step(std::size_t& pos, ToolParserDelta& out) {
  switch (state_) {
    case State::kText: {
      const std::string_view rest = std::string_view(input_).substr(pos);
      const MarkerSearch found = search_marker(rest, kToolCalls);
      outside(rest.substr(0, found.end), out);
      pos += found.end;
      if (!found.found) return false;
      pos += kToolCalls.size();
      uncommitted_ = kToolCalls;
      state_ = State::kAfterMarker;
      return true;
    }
    case State::kAfterMarker: {
      const char c = input_[pos];
      if (is_space(c) || c == '[') {
        uncommitted_ += c;
        ++pos;
        if (c == '[') {
          state_ = State::kArray;
          expect_element_ = true;
          elements_ = 0;
        }
      } else {
        give_up(out);  // not an array (the [TOOL_CALLS]name{...} form of newer tokenizers is not read)
      }
      return true;
    }
    case State::kArray: {
      const char c = input_[pos];
      if (is_space(c)) {
        if (elements_ == 0) uncommitted_ += c;
        ++pos;
      } else if (c == '{' && expect_element_) {
        element_.emplace();
        state_ = State::kElement;
        ++pos;
      } else if (c == ',' && !expect_element_) {
        expect_element_ = true;
        ++pos;
      } else if (c == ']' && (!expect_element_ || elements_ == 0)) {
        // The array is done; vLLM returns no call and no text for an empty one.
        uncommitted_.clear();
        state_ = State::kText;
        ++pos;
      } else {
        give_up(out);
      }
      return true;
    }
    case State::kElement: {
      const char c = input_[pos++];
      const JsonObjectText::Step next = element_->add(c);
      if (next == JsonObjectText::Step::kMore) return true;
      std::optional<RecognisedCall> call;
      if (next == JsonObjectText::Step::kComplete) call = json_call(element_->text(), {"arguments"});
      if (!call) {
        give_up(out);
        return true;
      }
      emit_call(std::move(*call), out);
      uncommitted_.clear();
      element_.reset();
      ++elements_;
      expect_element_ = false;
      state_ = State::kArray;
      return true;
    }
  }
  return false;
}

void MistralToolParser::give_up(ToolParserDelta& out) {
  unparsed(uncommitted_, out);
  uncommitted_.clear();
  if (element_) unparsed(element_->text(), out);
  element_.reset();
  state_ = State::kText;
}

void MistralToolParser::end(ToolParserDelta& out) {
  if (state_ == State::kText) {
    outside(input_, out);
  } else {
    give_up(out);
  }
  input_.clear();
}

}  // namespace serverd::parsers
