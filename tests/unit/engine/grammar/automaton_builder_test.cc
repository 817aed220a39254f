// build_automaton's counted repetitions: copies of one node are grouped with the bytes up to which they agree,
// the fewest bytes of a body counted through the rules it refers to, so that the mask cache shares their walks.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/gbnf_parser.h"
#include "grammar_test_support.h"

namespace {

// The largest agreement depth among the nodes of `rule`.
std::uint32_t deepest_agreement(const engine::grammar::ByteAutomaton& automaton, const std::string& rule) {
  std::uint32_t deepest = 0;
  for (const auto& node : automaton.nodes) {
    if (automaton.rule_names[node.rule] == rule) deepest = std::max(deepest, node.agree_depth);
  }
  return deepest;
}

TEST(AutomatonBuilder, CopiesAgreeThroughTheRulesTheirBodyRefersTo) {
  // Each copy is a letter or an escape (a rule of two bytes): at least one byte, so a copy with 30 optional
  // copies after it agrees with the first on strings of up to 30 bytes. (Counting the rule as 0 bytes, as a
  // rule that may match nothing would be, leaves every copy ungrouped.)
  const auto ast =
      engine::grammar::parse_gbnf("root ::= \"\\\"\" ([a-z] | esc){0,40} \"\\\"\"\nesc ::= \"\\\\\" [nt]\n");
  const auto automaton = engine::grammar::build_automaton(ast, 1 << 20);
  EXPECT_GE(deepest_agreement(automaton, "root"), 30u);
  // With a rule that matches at least 3 bytes, the agreement is three times deeper.
  const auto wide = engine::grammar::parse_gbnf("root ::= (\"a\" | abc){0,40}\nabc ::= \"abc\" | \"a\" abc\n");
  EXPECT_GE(deepest_agreement(engine::grammar::build_automaton(wide, 1 << 20), "root"), 30u);
}

TEST(AutomatonBuilder, GroupedCopiesShareTheirMaskWalks) {
  engine::grammar::GrammarCompiler compiler(grammar_test::vocabulary({"a", "b", "ab", "\\", "\\n", "\"", "a\""}));
  // `esc` refers to itself, so it is not inlined: the copies' bodies go through a rule.
  const auto compiled = compiler.compile(grammar_test::gbnf(
      "root ::= \"\\\"\" ([a-z] | esc){0,40} \"\\\"\"\nesc ::= \"\\\\\" [nt] | \"\\\\(\" esc \")\"\n"));
  const auto stats = compiled->masks().stats();
  // Tokens are at most 2 bytes: every copy agreeing on 2 or more takes the first copy's masks outright.
  EXPECT_GT(stats.positions, 40u);
  EXPECT_LT(stats.walks, 12u);
}

}  // namespace

namespace {

// ByteSet::set_range fills whole words at once: every range, across and within words, sets exactly its bytes.
TEST(ByteSet, SetRangeSetsExactlyTheRangesBytes) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{
           {0, 255}, {0, 0}, {63, 64}, {60, 70}, {64, 127}, {100, 200}, {200, 200}, {255, 255}, {1, 254}}) {
    engine::grammar::ByteSet set;
    set.set_range(static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi));
    for (int b = 0; b < 256; ++b) {
      EXPECT_EQ(set.test(static_cast<std::uint8_t>(b)), b >= lo && b <= hi) << lo << "-" << hi << " at " << b;
    }
  }
}

}  // namespace
