// inline_small_rules: small leaf rules are copied into their references (transitively), rules whose copies
// would multiply the automaton stay rules; compiled, an inlined `ws` leaves no token uncertain.
#include "engine/grammar/rule_inliner.h"

#include <gtest/gtest.h>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/gbnf_parser.h"
#include "grammar_test_support.h"

namespace {

using engine::grammar::GrammarAst;
using engine::grammar::GrammarExpr;

bool refers_to(const GrammarExpr& expr, std::size_t rule) {
  if (expr.kind == GrammarExpr::Kind::RuleRef) return expr.rule == rule;
  for (const auto& child : expr.children) {
    if (refers_to(child, rule)) return true;
  }
  return false;
}

std::size_t rule_index(const GrammarAst& ast, const std::string& name) {
  for (std::size_t r = 0; r < ast.names.size(); ++r) {
    if (ast.names[r] == name) return r;
  }
  ADD_FAILURE() << "no rule " << name;
  return 0;
}

TEST(RuleInliner, CopiesSmallLeafRulesTransitively) {
  GrammarAst ast = engine::grammar::parse_gbnf(
      "root ::= pair ws pair\npair ::= \"(\" ws digit ws \")\"\nws ::= \" \"?\ndigit ::= [0-9]\n");
  engine::grammar::inline_small_rules(ast);
  for (const char* name : {"pair", "ws", "digit"}) {
    EXPECT_FALSE(refers_to(ast.bodies[ast.root], rule_index(ast, name))) << name;
  }
}

TEST(RuleInliner, KeepsALeafRuleABoundedRepetitionWouldCopyTooOften) {
  GrammarAst ast =
      engine::grammar::parse_gbnf("root ::= \"\\\"\" char{0,200} \"\\\"\"\nchar ::= [a-z] | \"\\\\\" [nt\"]\n");
  engine::grammar::inline_small_rules(ast);
  EXPECT_TRUE(refers_to(ast.bodies[ast.root], rule_index(ast, "char")));
}

TEST(RuleInliner, CompiledWhitespaceReferencedTwiceLeavesNoTokenUncertain) {
  // Without inlining `ws` could not be followed out of an unknown context (two return nodes), so " b", " c"
  // and "  " would be checked against the real stack at every mask.
  engine::grammar::GrammarCompiler compiler(grammar_test::vocabulary({"a", " ", "b", " b", "c", " c", "  ", "a b"}));
  const auto compiled = compiler.compile(grammar_test::gbnf("root ::= \"a\" ws \"b\" ws \"c\"\nws ::= \" \"?\n"));
  EXPECT_EQ(compiled->masks().stats().uncertain_tokens, 0u);
}

}  // namespace
