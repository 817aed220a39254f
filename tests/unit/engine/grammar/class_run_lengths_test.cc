// ClassRunLengths: how many bytes of text a position is sure to read, per kind of text and UTF-8 state —
// the counted copies of a bounded string, a string body's endless loop, multi-byte characters, bytes that
// end a string; and SortedVocabulary's side of the same question: from which UTF-8 states a trie subtree's
// bytes are valid text.
#include "engine/grammar/class_run_lengths.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/sorted_vocabulary.h"
#include "engine/grammar/utf8_states.h"

namespace {

using engine::grammar::byte_class_bit;
using engine::grammar::ByteAutomaton;
using engine::grammar::ClassRunLengths;

ByteAutomaton automaton_of(const std::string& text) {
  return engine::grammar::build_automaton(engine::grammar::parse_gbnf(text), 1 << 16);
}

// The node reached from the automaton's first position by reading `text` along single byte edges.
std::uint32_t node_after(const ByteAutomaton& a, const std::string& text) {
  std::uint32_t node = a.closure[a.nodes[a.rule_start[a.root_rule]].closure_begin].top;
  for (const char ch : text) {
    const auto byte = static_cast<std::uint8_t>(ch);
    bool moved = false;
    for (auto e = a.nodes[node].byte_begin; e < a.nodes[node].byte_end && !moved; ++e) {
      const auto& edge = a.byte_edges[e];
      if (byte < edge.lo || byte > edge.hi) continue;
      node = a.closure[a.nodes[edge.target].closure_begin].top;  // the first position the target leads to
      moved = true;
    }
    EXPECT_TRUE(moved) << "no edge on byte " << int{byte};
  }
  return node;
}

constexpr std::uint8_t kLetters = byte_class_bit('a');
constexpr std::uint8_t kText = byte_class_bit('a') | byte_class_bit(' ') | byte_class_bit('!');
constexpr std::uint8_t kAnyText = kText | byte_class_bit(0x80) | byte_class_bit(0xE4);
constexpr std::uint8_t kBoundary = 1u << engine::grammar::kUtf8Boundary;

TEST(ClassRunLengths, ABoundedStringsCopiesReadAsManyBytesAsCopiesAreLeft) {
  const ByteAutomaton a = automaton_of("root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,3} \"\\\"\" \"!\"\n");
  const ClassRunLengths runs(a, 128);
  const std::uint32_t first = node_after(a, "\"");
  EXPECT_EQ(runs.at(first, kLetters, kBoundary), 3);
  EXPECT_EQ(runs.at(first, kText, kBoundary), 3);
  EXPECT_EQ(runs.at(first, kAnyText, kBoundary), 3);  // a multi-byte character is one copy: at least as far
  EXPECT_EQ(runs.at(node_after(a, "\"a"), kText, kBoundary), 2);
  EXPECT_EQ(runs.at(node_after(a, "\"ab"), kText, kBoundary), 1);
  EXPECT_EQ(runs.at(node_after(a, "\"abc"), kText, kBoundary), 0);  // only the closing quote is left
  // Inside a character (after E4, two continuation bytes to go): two bytes finish it, then two copies.
  const std::uint32_t inside = node_after(a, "\"\xE4");
  EXPECT_EQ(runs.at(inside, kAnyText, 1u << engine::grammar::kUtf8Need2), 4);
  EXPECT_EQ(runs.at(inside, kAnyText, kBoundary), 0);  // from a boundary it reads no continuation byte
  // A quote, a backslash or a control character may end the string: never part of a run.
  EXPECT_EQ(runs.at(first, kText | byte_class_bit('"'), kBoundary), 0);
  EXPECT_EQ(runs.at(first, kText | byte_class_bit('\\'), kBoundary), 0);
  EXPECT_EQ(runs.at(first, kText | byte_class_bit('\n'), kBoundary), 0);
  // The cap: the vocabulary's longest token.
  const ClassRunLengths capped(a, 2);
  EXPECT_EQ(capped.at(first, kText, kBoundary), 2);
}

TEST(ClassRunLengths, AStringBodyReadsEndlesslyAndALettersLoopOnlyLetters) {
  const ByteAutomaton a = automaton_of("root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"\\\"\" | \"<\" [a-zA-Z0-9]* \">\"\n");
  const ClassRunLengths runs(a, 128);
  const std::uint32_t body = node_after(a, "\"");
  EXPECT_EQ(runs.at(body, kText, kBoundary), ClassRunLengths::kEndless);
  EXPECT_EQ(runs.at(body, kAnyText, kBoundary), ClassRunLengths::kEndless);
  EXPECT_EQ(runs.at(node_after(a, "\"\xF0"), kAnyText, 1u << engine::grammar::kUtf8Need3AfterF0),
            ClassRunLengths::kEndless);
  // Not a quote, a backslash or a control character (they end the body or start an escape), nor a
  // continuation byte where a character starts.
  for (const unsigned b : {0x22u, 0x5Cu, 0x0Au}) {
    EXPECT_EQ(runs.at(body, kText | byte_class_bit(static_cast<std::uint8_t>(b)), kBoundary), 0) << b;
  }
  EXPECT_EQ(runs.at(body, kAnyText, 1u << engine::grammar::kUtf8Need1), 0);
  const std::uint32_t word = node_after(a, "<");
  EXPECT_EQ(runs.at(word, kLetters, kBoundary), ClassRunLengths::kEndless);
  EXPECT_EQ(runs.at(word, kLetters | byte_class_bit(' '), kBoundary), 0);  // a space ends the word
  EXPECT_EQ(runs.at(word, kAnyText, kBoundary), 0);
}

TEST(ClassRunLengths, BytesThatTellDifferentThingsApartStopARun) {
  // 'y' both continues the letters and ends them: a letter does not surely stay inside.
  const ByteAutomaton a = automaton_of("root ::= \"<\" [a-z0-9A-Z]{0,5} \"y\"\n");
  const ClassRunLengths runs(a, 128);
  EXPECT_EQ(runs.at(node_after(a, "<"), kLetters, kBoundary), 0);
  // A set of positions is as sure as the surest of them.
  const ByteAutomaton b = automaton_of("root ::= \"<\" [a-zA-Z0-9]{0,2} \">\" | \"[\" [a-zA-Z0-9]{0,4} \"]\"\n");
  const ClassRunLengths both(b, 128);
  const std::uint32_t two = node_after(b, "<");
  const std::uint32_t four = node_after(b, "[");
  ASSERT_EQ(both.at(two, kLetters, kBoundary), 2);
  ASSERT_EQ(both.at(four, kLetters, kBoundary), 4);
  const engine::grammar::StackElement positions[] = {{two, 0}, {four, 0}};
  EXPECT_EQ(both.at(positions, kLetters, kBoundary), 4);
}

TEST(SortedVocabulary, Utf8StatesBelowSayWhereASubtreesBytesAreValidText) {
  engine::grammar::TokenVocabulary v;
  // "ab"; "é" (C3 A9) and a lone C3; "\xA9" alone (a continuation byte).
  v.token_bytes = {"ab", "a", "\xC3\xA9", "\xC3", "\xA9"};
  v.special.assign(v.token_bytes.size(), false);
  const engine::grammar::SortedVocabulary sorted(v);
  const auto node_of = [&](const std::string& prefix) {
    const auto& trie = sorted.trie();
    for (std::uint32_t i = 0; i + 1 < trie.size(); ++i) {
      if (trie[i].depth == prefix.size() && sorted.bytes(trie[i].token_begin).substr(0, prefix.size()) == prefix)
        return i;
    }
    ADD_FAILURE() << "no trie node for " << prefix;
    return 0u;
  };
  using namespace engine::grammar;
  EXPECT_EQ(sorted.utf8_states_below(node_of("a")), 1u << kUtf8Boundary);          // "b" below: ASCII
  const std::uint8_t continuation_ok = sorted.utf8_states_below(node_of("\xC3"));  // "\xA9" below
  EXPECT_EQ(continuation_ok & (1u << kUtf8Boundary), 0);
  EXPECT_NE(continuation_ok & (1u << kUtf8Need1), 0);
  EXPECT_EQ(continuation_ok & (1u << kUtf8Need2AfterED), 0);   // after ED only 80-9F may come
  EXPECT_EQ(sorted.utf8_states_below(node_of("\xA9")), 0xFF);  // nothing below
}

TEST(Utf8States, TheDecoderFollowsRfc3629) {
  using namespace engine::grammar;
  EXPECT_EQ(utf8_next(kUtf8Boundary, 'a'), kUtf8Boundary);
  EXPECT_EQ(utf8_next(kUtf8Boundary, 0xC2), kUtf8Need1);
  EXPECT_EQ(utf8_next(kUtf8Boundary, 0xC1), kUtf8Invalid);  // overlong
  EXPECT_EQ(utf8_next(kUtf8Boundary, 0xF5), kUtf8Invalid);  // above U+10FFFF
  EXPECT_EQ(utf8_next(kUtf8Boundary, 0x80), kUtf8Invalid);
  EXPECT_EQ(utf8_next(utf8_next(kUtf8Boundary, 0xE0), 0x9F), kUtf8Invalid);  // overlong
  EXPECT_EQ(utf8_next(utf8_next(kUtf8Boundary, 0xED), 0xA0), kUtf8Invalid);  // a surrogate
  EXPECT_EQ(utf8_next(utf8_next(kUtf8Boundary, 0xF4), 0x90), kUtf8Invalid);  // above U+10FFFF
  std::uint8_t state = kUtf8Boundary;
  for (const unsigned char byte : std::string("\xF0\x9F\x98\x80")) state = utf8_next(state, byte);  // U+1F600
  EXPECT_EQ(state, kUtf8Boundary);
}

}  // namespace
