#include "serverd/parsers/pythonic_parser.h"

#include <utility>

#include "serverd/parsers/python_call.h"

namespace serverd::parsers {
PythonicToolParser::PythonicToolParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)) {}

void PythonicToolParser::consume(std::string_view text, ToolParserDelta& out) {
  switch (state_) {
    case State::kAfterList: outside(text, out); return;
    case State::kContent: unparsed(text, out); return;
    default: break;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool taken = step(text[i], out);
    if (state_ == State::kAfterList || state_ == State::kContent) {
      consume(text.substr(taken ? i + 1 : i), out);  // these states pass the rest through at once
      return;
    }
  }
}

bool PythonicToolParser::step(char c, ToolParserDelta& out) {
  switch (state_) {
    case State::kLeading:
      // The list is the whole answer (vLLM reads only an answer that starts with "["; spaces before it
      // are let through here).
      if (is_space(c) || c == '[') {
        uncommitted_ += c;
        if (c == '[') {
          state_ = State::kItem;
          trailing_comma_ = false;
        }
        return true;
      }
      give_up(out);
      return false;
    case State::kItem:
      if (is_space(c)) {
        if (!made_calls()) uncommitted_ += c;
        return true;
      }
      if (is_python_name_start(c)) {
        call_ = c;
        state_ = State::kName;
        return true;
      }
      if (c == ']' && trailing_comma_) {  // [f(a=1),] is a list of one call
        state_ = State::kAfterList;
        return true;
      }
      give_up(out);  // "[]" and "[1, 2]" are not calls
      return false;
    case State::kName:
    case State::kAfterName:
      if (state_ == State::kName && is_python_name_char(c)) {
        call_ += c;
        return true;
      }
      if (is_space(c)) {
        call_ += c;
        state_ = State::kAfterName;
        return true;
      }
      if (c == '(') {
        call_ += c;
        scanner_ = NestingScanner(NestingScanner::Syntax::kPython);
        scanner_.advance(c);
        state_ = State::kArguments;
        return true;
      }
      give_up(out);  // "[Note] ..." and the like: a list that holds no call
      return false;
    case State::kArguments: {
      call_ += c;
      scanner_.advance(c);
      if (scanner_.mismatched()) {
        give_up(out);
        return true;
      }
      if (scanner_.depth() > 0) return true;
      auto call = python_call(call_);
      if (!call) {
        give_up(out);
        return true;
      }
      emit_call(std::move(*call), out);
      uncommitted_.clear();
      call_.clear();
      state_ = State::kAfterCall;
      return true;
    }
    case State::kAfterCall:
      if (is_space(c)) return true;
      if (c == ',') {
        state_ = State::kItem;
        trailing_comma_ = true;
        return true;
      }
      if (c == ']') {
        state_ = State::kAfterList;
        return true;
      }
      state_ = State::kContent;  // what follows the calls is not one: content from here on
      return false;
    case State::kAfterList:
    case State::kContent: break;
  }
  return false;
}

void PythonicToolParser::give_up(ToolParserDelta& out) {
  unparsed(uncommitted_, out);
  unparsed(call_, out);
  uncommitted_.clear();
  call_.clear();
  state_ = State::kContent;
}

void PythonicToolParser::end(ToolParserDelta& out) {
  if (state_ != State::kAfterCall && state_ != State::kAfterList && state_ != State::kContent) give_up(out);
}

}  // namespace serverd::parsers
