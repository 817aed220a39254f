#include "serverd/parsers/llama3_json_parser.h"

#include <array>
#include <utility>

namespace serverd::parsers {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::array<std::string_view, 1> kMarkers = {kPythonTag};

}  // namespace

Llama3JsonToolParser::Llama3JsonToolParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)) {}

std::span<const std::string_view> Llama3JsonToolParser::markers() const {
  return kMarkers;
}

void Llama3JsonToolParser::consume(std::string_view text, ToolParserDelta& out) {
  input_.append(text);
  std::size_t pos = 0;
  while (pos < input_.size() && step(pos, out)) {
  }
  input_.erase(0, pos);
}

bool Llama3JsonToolParser::step(std::size_t& pos, ToolParserDelta& out) {
  const char c = input_[pos];
  switch (state_) {
    case State::kLeading: {
      // Calls are the whole answer: only an answer that starts with an object (after spaces and the tag)
      // is read as calls, as vLLM streams it.
      if (is_space(c)) {
        uncommitted_ += c;
        ++pos;
        return true;
      }
      if (c == '{') {
        object_.emplace();
        state_ = State::kObject;
        ++pos;
        return true;
      }
      const std::string_view rest = std::string_view(input_).substr(pos);
      if (!tag_seen_ && rest.starts_with(kPythonTag)) {
        uncommitted_ += kPythonTag;
        tag_seen_ = true;
        pos += kPythonTag.size();
        return true;
      }
      if (!tag_seen_ && kPythonTag.starts_with(rest)) return false;  // may be the tag: wait
      give_up(out);
      return true;
    }
    case State::kObject: {
      ++pos;
      const JsonObjectText::Step next = object_->add(c);
      if (next == JsonObjectText::Step::kMore) return true;
      std::optional<RecognisedCall> call;
      if (next == JsonObjectText::Step::kComplete) call = json_call(object_->text(), {"arguments", "parameters"});
      if (!call) {
        give_up(out);
        return true;
      }
      emit_call(std::move(*call), out);
      uncommitted_.clear();
      object_.reset();
      state_ = State::kBetween;
      return true;
    }
    case State::kBetween:
      if (is_space(c) || c == ';') {
        ++pos;
      } else if (c == '{') {
        object_.emplace();
        state_ = State::kObject;
        ++pos;
      } else {
        state_ = State::kContent;
      }
      return true;
    case State::kContent:
      unparsed(std::string_view(input_).substr(pos), out);
      pos = input_.size();
      return true;
  }
  return false;
}

void Llama3JsonToolParser::give_up(ToolParserDelta& out) {
  unparsed(uncommitted_, out);
  uncommitted_.clear();
  if (object_) unparsed(object_->text(), out);
  object_.reset();
  state_ = State::kContent;
}

void Llama3JsonToolParser::end(ToolParserDelta& out) {
  if (state_ == State::kLeading || state_ == State::kObject) {
    give_up(out);
    unparsed(input_, out);
  }
  input_.clear();
}

}  // namespace serverd::parsers
