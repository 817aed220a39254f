#pragma once

// Brackets and string literals followed byte by byte through text that arrives in pieces, so a parser
// knows where a JSON value or a Python call ends without reading anything twice, and never takes a bracket
// or a marker inside a string for structure. It checks nesting only; the parser that reads the finished
// text checks the rest of the syntax.

#include <cstddef>
#include <vector>

namespace serverd::parsers {

class NestingScanner {
 public:
  enum class Syntax {
    kJson,    // strings in double quotes
    kPython,  // strings in single or double quotes, each also tripled ('''...''', """...""")
  };
  explicit NestingScanner(Syntax syntax) : syntax_(syntax) {}

  void advance(char c);

  // Brackets ([, {, and ( for Python) open now.
  std::size_t depth() const { return open_.size(); }
  // Inside a string literal (a Python quote just read counts as opening one).
  bool in_string() const;
  // A closing bracket did not match the one open (or closed nothing): not JSON, not Python.
  bool mismatched() const { return mismatched_; }

 private:
  enum class State {
    kCode,
    kQuotes,  // Python: a run of one quote character, not yet known to open a string or a triple
    kString,
  };
  void code(char c);
  void string(char c);

  Syntax syntax_;
  State state_ = State::kCode;
  char quote_ = 0;          // the quote character of the string (or run)
  bool triple_ = false;     // the string is a triple-quoted one
  bool escaped_ = false;    // the previous byte in the string was an unescaped backslash
  int quote_run_ = 0;       // kQuotes: quotes read in the run; kString (triple): closing quotes in a row
  std::vector<char> open_;  // the closing bracket each open one needs
  bool mismatched_ = false;
};

}  // namespace serverd::parsers
