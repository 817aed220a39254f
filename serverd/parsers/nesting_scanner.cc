#include "serverd/parsers/nesting_scanner.h"

namespace serverd::parsers {

bool NestingScanner::in_string() const {
  return state_ == State::kString || (state_ == State::kQuotes && quote_run_ == 1);
}

void NestingScanner::advance(char c) {
  switch (state_) {
    case State::kCode: code(c); return;
    case State::kString: string(c); return;
    case State::kQuotes:
      if (c == quote_) {
        if (++quote_run_ == 3) {  // ''' or """: a triple-quoted string begins
          state_ = State::kString;
          triple_ = true;
          quote_run_ = 0;
        }
        return;
      }
      if (quote_run_ == 1) {  // one quote, then something else: a string with that first byte
        state_ = State::kString;
        triple_ = false;
        string(c);
      } else {  // two quotes: an empty string, already closed
        state_ = State::kCode;
        code(c);
      }
      return;
  }
}

void NestingScanner::code(char c) {
  const bool python = syntax_ == Syntax::kPython;
  switch (c) {
    case '"':
    case '\'':
      if (c == '\'' && !python) return;
      quote_ = c;
      escaped_ = false;
      if (python) {
        state_ = State::kQuotes;
        quote_run_ = 1;
      } else {
        state_ = State::kString;
        triple_ = false;
      }
      return;
    case '[': open_.push_back(']'); return;
    case '{': open_.push_back('}'); return;
    case '(':
      if (python) open_.push_back(')');
      return;
    case ']':
    case '}':
    case ')':
      if (c == ')' && !python) return;
      if (open_.empty() || open_.back() != c) {
        mismatched_ = true;
        return;
      }
      open_.pop_back();
      return;
    default: return;
  }
}

void NestingScanner::string(char c) {
  if (escaped_) {  // a backslash escapes the next byte, raw strings included (r'\'' is one quote)
    escaped_ = false;
    quote_run_ = 0;
    return;
  }
  if (c == '\\') {
    escaped_ = true;
    quote_run_ = 0;
    return;
  }
  if (c != quote_) {
    quote_run_ = 0;
    return;
  }
  if (!triple_ || ++quote_run_ == 3) {
    state_ = State::kCode;
    quote_run_ = 0;
  }
}

}  // namespace serverd::parsers
