#pragma once

// A parsed grammar: rules as expression trees over Unicode code points, references resolved to rule
// indices. The GBNF parser produces it, the automaton builder turns it into byte-level graphs.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace engine::grammar {

// An inclusive range of code points; never contains surrogates (U+D800..U+DFFF have no UTF-8 form).
struct CodePointRange {
  char32_t lo = 0;
  char32_t hi = 0;
};

struct GrammarExpr {
  enum class Kind {
    Literal,      // `literal`: UTF-8 bytes (may be empty)
    Class,        // `ranges`: sorted, disjoint, non-adjacent (negation already applied)
    RuleRef,      // `rule`
    Sequence,     // `children` one after another (none: the empty string)
    Alternation,  // one of `children`
    Repeat,       // children[0] between `min` and `max` times (kUnbounded: no upper bound)
  };
  static constexpr std::uint32_t kUnbounded = UINT32_MAX;

  Kind kind = Kind::Sequence;
  std::string literal;
  std::vector<CodePointRange> ranges;
  std::size_t rule = 0;
  std::vector<GrammarExpr> children;
  std::uint32_t min = 0;
  std::uint32_t max = 0;
};

struct GrammarAst {
  std::vector<std::string> names;   // per rule
  std::vector<GrammarExpr> bodies;  // per rule
  std::size_t root = 0;
};

}  // namespace engine::grammar
