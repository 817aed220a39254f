#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "tests/unit/engine/grammar/grammar_test_support.h"

namespace {

using engine::grammar::GrammarCompiler;
using engine::grammar::GrammarError;
using engine::grammar::GrammarMatcher;
using grammar_test::allowed;
using grammar_test::gbnf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Ids:                                 0    1    2     3     4      5    6      7          8
const std::vector<std::string> kTokens{"a", "b", "c", "ab", "ac", "abc", "ca", "<|end|>", "<|x|>"};
constexpr std::int32_t kEnd = 7;
constexpr std::int32_t kSpecial = 8;

std::shared_ptr<const engine::grammar::TokenVocabulary> abc_vocabulary() {
  return grammar_test::vocabulary(kTokens, {kEnd, kSpecial}, {kEnd}, 3);
}

TEST(GrammarMatcher, AllowsExactlyTheTokensThatKeepAViablePrefix) {
  const auto vocab = abc_vocabulary();
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf(R"(root ::= "ab" | "a" "c"+)")));
  const std::size_t n = vocab->token_bytes.size();
  EXPECT_THAT(allowed(matcher, n), ElementsAre(0, 3, 4));  // a, ab, ac; not abc (nothing after ab)
  EXPECT_FALSE(matcher.can_terminate());
  ASSERT_TRUE(matcher.accept(0));                       // "a"
  EXPECT_THAT(allowed(matcher, n), ElementsAre(1, 2));  // b or c
  ASSERT_TRUE(matcher.accept(2));                       // "ac"
  EXPECT_TRUE(matcher.can_terminate());
  EXPECT_FALSE(matcher.is_terminated());                   // more c may follow
  EXPECT_THAT(allowed(matcher, n), ElementsAre(2, kEnd));  // c, or stop
  ASSERT_TRUE(matcher.accept(kEnd));
  EXPECT_TRUE(matcher.is_terminated());
  EXPECT_FALSE(matcher.accept(2));  // nothing after a stop
}

TEST(GrammarMatcher, RefusedTokenLeavesThePositionAsItWas) {
  const auto vocab = abc_vocabulary();
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf(R"(root ::= "abc" "a"*)")));
  ASSERT_TRUE(matcher.accept(3));   // "ab"
  EXPECT_FALSE(matcher.accept(1));  // "b": refused
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(2, 6));
}

TEST(GrammarMatcher, StopIdsOnlyWhenTheGrammarCanEndAndTerminatesWhenItCanOnlyEnd) {
  const auto vocab = abc_vocabulary();
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf(R"(root ::= "a" "b"?)")));
  EXPECT_FALSE(matcher.accept(kEnd));  // nothing matched yet
  ASSERT_TRUE(matcher.accept(0));
  EXPECT_TRUE(matcher.can_terminate());
  EXPECT_FALSE(matcher.is_terminated());
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(1, kEnd));
  ASSERT_TRUE(matcher.accept(1));
  EXPECT_TRUE(matcher.is_terminated());  // "ab": nothing else can follow
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(kEnd));
}

TEST(GrammarMatcher, SpecialAndPaddingTokensAreNeverAllowed) {
  const auto vocab = abc_vocabulary();
  GrammarCompiler compiler(vocab);
  // The special token's text matches, but a special token is not text.
  GrammarMatcher matcher(compiler.compile(gbnf(R"(root ::= "<|x|>" | [a-c<|>x]*)")));
  const auto ids = allowed(matcher, vocab->token_bytes.size());
  EXPECT_THAT(ids, ElementsAre(0, 1, 2, 3, 4, 5, 6, kEnd));
  EXPECT_FALSE(matcher.accept(kSpecial));
  EXPECT_FALSE(matcher.accept(9));   // padding (no bytes)
  EXPECT_FALSE(matcher.accept(-1));  // outside the vocabulary
  EXPECT_FALSE(matcher.accept(100));
}

TEST(GrammarMatcher, Utf8CharactersSplitAcrossTokens) {
  // Byte tokens as byte-level BPE has them: a character's bytes may come one token at a time.
  const auto vocab = grammar_test::vocabulary({"\xC3", "\xA9", "\xAA", "\xC3\xA9", "\xA9\xC3", "e", "\xC3\xA9\xC3"});
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf(R"(root ::= [é-ê]+)")));
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(0, 3, 6));
  ASSERT_TRUE(matcher.accept(0));  // the lead byte
  EXPECT_FALSE(matcher.can_terminate());
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(1, 2, 4));
  ASSERT_TRUE(matcher.accept(4));  // é's last byte, then the next character's lead
  EXPECT_FALSE(matcher.can_terminate());
  ASSERT_TRUE(matcher.accept(2));  // ê
  EXPECT_TRUE(matcher.can_terminate());
}

TEST(GrammarMatcher, AmbiguousGrammarsKeepEveryReading) {
  const auto vocab = grammar_test::vocabulary({"a", "aa", "b"});
  GrammarCompiler compiler(vocab);
  // "aaa" splits as a|aa or aa|a; either reading may continue.
  GrammarMatcher matcher(compiler.compile(gbnf("root ::= x x \"b\"?\nx ::= \"a\" | \"aa\"\n")));
  ASSERT_TRUE(matcher.accept(1));
  ASSERT_TRUE(matcher.accept(0));  // "aaa"
  EXPECT_TRUE(matcher.can_terminate());
  EXPECT_THAT(allowed(matcher, 3), ElementsAre(0, 2));  // a ("aaaa" = aa aa) or b
  ASSERT_TRUE(matcher.accept(0));
  EXPECT_THAT(allowed(matcher, 3), ElementsAre(2));
}

TEST(GrammarMatcher, RecursionNullableRulesAndRulesReferencedOnce) {
  const auto vocab = grammar_test::vocabulary({"(", ")", "x", "()", "))", "x)", ",", "(x"});
  GrammarCompiler compiler(vocab);
  const std::string lists = R"g(root ::= list
list ::= "(" items ")"
items ::= opt ( "," opt )*
opt ::= | "x" | list)g";
  GrammarMatcher matcher(compiler.compile(gbnf(lists)));
  const std::vector<std::int32_t> text{7, 6, 0, 5, 1};  // (x,(x)) as "(x" "," "(" "x)" ")"
  for (const auto token : text) ASSERT_TRUE(matcher.accept(token)) << token;
  EXPECT_TRUE(matcher.is_terminated());
  GrammarMatcher fresh(compiler.compile(gbnf(lists)));
  ASSERT_TRUE(fresh.accept(0));
  ASSERT_TRUE(fresh.accept(0));
  EXPECT_THAT(allowed(fresh, 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));  // "))" closes both
}

TEST(GrammarMatcher, RefusesLeftRecursionAndGrammarsThatMatchNothing) {
  GrammarCompiler compiler(abc_vocabulary());
  try {
    compiler.compile(gbnf("root ::= expr\nexpr ::= term | expr \"+\" term\nterm ::= \"a\""));
    FAIL() << "left recursion was accepted";
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rule \"expr\" is left-recursive (\"expr\" -> \"expr\""));
  }
  try {
    compiler.compile(gbnf("root ::= a\na ::= opt b\nopt ::= \"x\"?\nb ::= a \"y\" | \"z\""));
    FAIL() << "indirect left recursion through a nullable rule was accepted";
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("left-recursive (\"a\" -> \"b\" -> \"a\""));
  }
  EXPECT_THROW(
      {
        try {
          compiler.compile(gbnf("root ::= \"a\" loop\nloop ::= \"b\" loop"));
        } catch (const GrammarError& e) {
          EXPECT_THAT(e.what(), HasSubstr("rule \"root\" matches no string"));
          EXPECT_THAT(e.what(), HasSubstr("\"loop\""));
          throw;
        }
      },
      GrammarError);
  // A rule that never finishes is fine when nothing needs it.
  GrammarMatcher matcher(compiler.compile(gbnf("root ::= \"a\" | loop\nloop ::= \"b\" loop")));
  EXPECT_THAT(allowed(matcher, 12), ElementsAre(0));
}

TEST(GrammarMatcher, EmptyGrammarOnlyStops) {
  const auto vocab = abc_vocabulary();
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf("root ::= \"\"")));
  EXPECT_TRUE(matcher.is_terminated());
  EXPECT_THAT(allowed(matcher, vocab->token_bytes.size()), ElementsAre(kEnd));
}

TEST(GrammarMatcher, BitmaskTooSmallIsRefusedAndExtraWordsAreCleared) {
  const auto vocab = grammar_test::vocabulary(std::vector<std::string>(40, "a"));
  GrammarCompiler compiler(vocab);
  GrammarMatcher matcher(compiler.compile(gbnf("root ::= \"a\"")));
  std::vector<std::uint32_t> small(1);
  EXPECT_THROW(matcher.fill_bitmask(small), std::invalid_argument);
  std::vector<std::uint32_t> large(4, 0xFFFFFFFF);
  matcher.fill_bitmask(large);
  EXPECT_EQ(large[0], 0xFFFFFFFFu);
  EXPECT_EQ(large[1], 0xFFu);  // ids 32..39
  EXPECT_EQ(large[2], 0u);
  EXPECT_EQ(large[3], 0u);
}

}  // namespace
