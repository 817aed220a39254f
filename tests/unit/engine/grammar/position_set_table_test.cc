// PositionSetTable: memoized steps over an unknown context agree with the walker's own steps, equal sets
// are one id, and what a step found (a rule left into the unknown context) comes back with it.
#include "engine/grammar/position_set_table.h"

#include <gtest/gtest.h>

#include "engine/grammar/gbnf_parser.h"

namespace {

using engine::grammar::AutomatonWalker;
using engine::grammar::ByteAutomaton;
using engine::grammar::PositionSetTable;
using engine::grammar::StackElement;
using engine::grammar::StackPool;
using engine::grammar::StepEnds;

ByteAutomaton automaton_of(const char* text) {
  return engine::grammar::build_automaton(engine::grammar::parse_gbnf(text), 1 << 16);
}

// The first node inside `rule` with byte edges: where a mask-cache walk would start.
std::uint32_t first_position(const ByteAutomaton& a, const char* rule) {
  for (std::uint32_t n = 0; n < a.nodes.size(); ++n) {
    if (a.rule_names[a.nodes[n].rule] == rule && a.has_bytes(n)) return n;
  }
  ADD_FAILURE() << "no position in rule " << rule;
  return 0;
}

TEST(PositionSetTable, StepsAgreeWithTheWalkerAndEqualSetsShareAnId) {
  const ByteAutomaton a = automaton_of("root ::= \"<\" item (\",\" item)* \">\"\nitem ::= [a-c]+ | \"x\" \"y\"\n");
  const AutomatonWalker walker(a);
  PositionSetTable table(walker);
  const std::uint32_t node = first_position(a, "item");
  const std::uint32_t start = table.start(node);
  EXPECT_EQ(table.start(node), start);
  StackPool pool;
  for (const std::string text : {"ab", "xy", "x,", "a,", "a>", "q", "ba,c"}) {
    std::uint32_t set = start;
    std::vector<StackElement> reference{{node, StackPool::kUnknown}};
    for (const char c : text) {
      const auto byte = static_cast<std::uint8_t>(c);
      const PositionSetTable::Step step = table.step(set, byte);
      EXPECT_EQ(table.step(set, byte).next, step.next) << text;  // memoized: the same answer again
      std::vector<StackElement> next;
      StepEnds ends;
      walker.step(reference, byte, next, pool, ends);
      EXPECT_EQ(table.empty(step.next), next.empty()) << text << " at " << c;
      EXPECT_EQ(table.ends(step.ends).left_frame, ends.left_frame) << text << " at " << c;
      EXPECT_EQ(table.ends(step.ends).exit_follow.words, ends.exit_follow.words) << text << " at " << c;
      reference = next;
      set = step.next;
    }
  }
  // "ab" and "ba" end in the same positions (inside [a-c]+), so they reach one set.
  EXPECT_EQ(table.step(table.step(start, 'a').next, 'b').next, table.step(table.step(start, 'b').next, 'a').next);
  // Leaving `item` (referenced from two places) into the unknown context: the bytes that may follow it.
  const StepEnds& left = table.ends(table.step(start, 'a').ends);
  EXPECT_TRUE(left.left_frame);
  EXPECT_TRUE(left.exit_follow.test(','));
  EXPECT_TRUE(left.exit_follow.test('>'));
  EXPECT_FALSE(left.exit_follow.test('a'));
  table.clear();
  EXPECT_EQ(table.sets(), 0u);
}

}  // namespace
