#pragma once

// A slow, independent recognizer for the matcher's tests: the parsed grammar as a context-free grammar
// over code points, run by an Earley parser, answering whether bytes are a viable prefix (a prefix of some
// string the grammar matches, possibly ending inside a UTF-8 character) or a complete match. It shares
// nothing with the automaton but the parser's output.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar_ast.h"

namespace grammar_test {

class ReferenceRecognizer {
 public:
  explicit ReferenceRecognizer(const engine::grammar::GrammarAst& ast);

  bool viable(std::string_view bytes) const;
  bool complete(std::string_view bytes) const;

 private:
  struct Symbol {
    bool terminal = false;
    std::uint32_t index = 0;  // terminal: into classes_; else a nonterminal
  };
  struct Production {
    std::uint32_t lhs = 0;
    std::vector<Symbol> rhs;
  };
  struct Item {
    std::uint32_t production = 0;
    std::uint32_t dot = 0;
    std::uint32_t origin = 0;
    bool operator==(const Item&) const = default;
  };
  using Chart = std::vector<Item>;

  std::uint32_t add_nonterminal();
  std::uint32_t convert(const engine::grammar::GrammarExpr& expr);
  Symbol terminal(std::vector<engine::grammar::CodePointRange> ranges);
  void drop_unproductive();
  // Charts after each code point, or null when some code point cannot be read. Reuses the charts of the
  // previous call's common prefix (the tests ask about one text followed by many different tokens).
  const std::vector<Chart>* parse(const std::u32string& text) const;
  void close(std::vector<Chart>& charts, std::size_t k) const;
  // Splits bytes into complete code points and an unfinished tail; false for invalid UTF-8.
  static bool decode(std::string_view bytes, std::u32string& code_points, std::string& tail);
  bool tail_possible(const std::vector<engine::grammar::CodePointRange>& ranges, const std::string& tail) const;

  std::vector<std::vector<engine::grammar::CodePointRange>> classes_;
  std::vector<Production> productions_;
  std::vector<std::vector<std::uint32_t>> by_lhs_;
  std::vector<bool> nullable_;
  std::uint32_t rules_ = 0;
  std::uint32_t start_ = 0;            // S' -> root
  mutable std::u32string parsed_;      // the text cached_ covers
  mutable std::vector<Chart> cached_;  // parsed_.size() + 1 charts
};

}  // namespace grammar_test
