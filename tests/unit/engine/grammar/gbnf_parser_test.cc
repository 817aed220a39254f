#include "engine/grammar/gbnf_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/structured_output.h"

namespace {

using engine::grammar::GrammarError;
using engine::grammar::GrammarExpr;
using engine::grammar::parse_gbnf;
using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_gbnf(text);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(GbnfParser, ReadsRulesSpanningLinesWithCommentsAndContinuations) {
  const auto ast = parse_gbnf(R"(# a comment line
root ::= greeting ws
  name   # the body goes on
greeting ::=
    "hi"
  | "hello"   # alternatives on their own lines
ws ::= [ \t]*
name-2_x ::= "unused"
name ::= [A-Z] [a-z]+
)");
  ASSERT_EQ(ast.names.size(), 5u);
  EXPECT_EQ(ast.names[ast.root], "root");
  const GrammarExpr& root = ast.bodies[ast.root];
  ASSERT_EQ(root.kind, GrammarExpr::Kind::Sequence);
  EXPECT_EQ(root.children.size(), 3u);  // greeting ws name
  std::size_t greeting = 0;
  while (ast.names[greeting] != "greeting") ++greeting;
  ASSERT_EQ(ast.bodies[greeting].kind, GrammarExpr::Kind::Alternation);
  EXPECT_EQ(ast.bodies[greeting].children[1].literal, "hello");
}

TEST(GbnfParser, ReadsEscapesClassesAndRepetitions) {
  const auto ast =
      parse_gbnf(R"(root ::= "\x41\u00e9\U0001F600\n\"\\" [^"\\] [a-c\]\-] . "x"{2} "y"{1,} "z"{0,3} "w"? "v"+)");
  const GrammarExpr& root = ast.bodies[ast.root];
  ASSERT_EQ(root.children.size(), 9u);
  EXPECT_EQ(root.children[0].literal, "A\xC3\xA9\xF0\x9F\x98\x80\n\"\\");
  // [^"\\]: everything but 0x22 and 0x5C, without surrogates.
  const auto& negated = root.children[1].ranges;
  ASSERT_EQ(negated.size(), 4u);
  EXPECT_EQ(negated[0].hi, 0x21u);
  EXPECT_EQ(negated[1].lo, 0x23u);
  EXPECT_EQ(negated[1].hi, 0x5Bu);
  EXPECT_EQ(negated[2].lo, 0x5Du);
  EXPECT_EQ(negated[2].hi, 0xD7FFu);
  EXPECT_EQ(negated[3].lo, 0xE000u);
  const auto& cls = root.children[2].ranges;  // a-c, ], -
  ASSERT_EQ(cls.size(), 3u);
  EXPECT_EQ(cls[0].lo, U'-');
  EXPECT_EQ(cls[1].lo, U']');
  EXPECT_EQ(cls[2].lo, U'a');
  EXPECT_EQ(cls[2].hi, U'c');
  EXPECT_EQ(root.children[3].ranges.back().hi, 0x10FFFFu);  // .
  EXPECT_EQ(root.children[4].min, 2u);
  EXPECT_EQ(root.children[4].max, 2u);
  EXPECT_EQ(root.children[5].max, GrammarExpr::kUnbounded);
  EXPECT_EQ(root.children[6].max, 3u);
  EXPECT_EQ(root.children[7].max, 1u);
  EXPECT_EQ(root.children[8].min, 1u);
}

TEST(GbnfParser, EmptyAlternativesAndGroups) {
  const auto ast = parse_gbnf("root ::= | \"a\" ( ) (\"b\" | )\n");
  const GrammarExpr& root = ast.bodies[ast.root];
  ASSERT_EQ(root.kind, GrammarExpr::Kind::Alternation);
  EXPECT_TRUE(root.children[0].children.empty());
}

struct Refusal {
  std::string grammar;
  std::string message;
};

class GbnfRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(GbnfRefusal, NamesLineColumnAndWhatWasExpected) {
  EXPECT_THAT(error_of(GetParam().grammar), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, GbnfRefusal,
    ::testing::Values(
        Refusal{"root ::= foo", "line 1, column 10: undefined rule \"foo\""},
        Refusal{"start ::= \"a\"", "no rule named \"root\""},
        Refusal{"root ::= \"abc", "line 1, column 10: this string literal is not closed"},
        Refusal{"root ::= \"a\nb\"", "line 1, column 10: this string literal is not closed"},
        Refusal{"root ::= [a-z", "line 1, column 10: this character class is not closed"},
        Refusal{"root ::= []", "line 1, column 10: empty character class"},
        Refusal{"root ::= [z-a]", "line 1, column 11: character range is reversed"},
        Refusal{"root ::=\n  ( \"a\" | \"b\"", "line 2, column 3: this '(' is not closed"},
        Refusal{"root ::= ( \"a\"\nx ::= \"b\"", "line 1, column 10: this '(' is not closed before the next rule"},
        Refusal{"root ::= \"a\" b ::= \"c\"", "line 1, column 14: a rule definition must start on a new line"},
        Refusal{"root \"a\"", "line 1, column 6: expected '::=' after the rule name \"root\""},
        Refusal{"::= \"a\"", "line 1, column 1: expected a rule name"},
        Refusal{"root ::= \"a\" )", "line 1, column 14: expected a rule name"},
        Refusal{"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
        Refusal{"root ::= \"\\x4\"", "expected 2 hex digits in the escape"},
        Refusal{"root ::= \"\\uD800\"", "line 1, column 11: escape names a surrogate"},
        Refusal{"root ::= \"\\U00110000\"", "escape names a code point above U+10FFFF"},
        Refusal{"root ::= \"a\"{3,2}", "line 1, column 13: repetition {3,2}: the minimum is over the maximum"},
        Refusal{"root ::= \"a\"{100000}", "repetition count over the limit of 10000"},
        Refusal{"root ::= \"a\"{}", "expected a repetition count after '{'"},
        Refusal{"root ::= \"a\"{2,x}", "expected a repetition count after ','"},
        Refusal{"root ::= <think>", "token references (<...>) are not supported"},
        Refusal{"root ::= *", "line 1, column 10: expected a string literal, a character class, a rule name"},
        Refusal{"root ::= \"a\"\nroot ::= \"b\"",
                "line 2, column 1: rule \"root\" is defined twice (first at line 1, column 1)"},
        // Columns count characters, not bytes.
        Refusal{"root ::= \"\xC3\xA9\" foo", "line 1, column 14: undefined rule \"foo\""},
        Refusal{"root ::= \"\xC3\"", "line 1, column 11: the grammar is not valid UTF-8"}));

// The converters' literals (engine/grammar/gbnf_text.h) read back as the text they quote.
TEST(GbnfLiteral, ReadsBackAsItsText) {
  const std::string text = std::string("a\"b\\c\nd\te\x01\x7F") + "\xC3\xA9\xF0\x9F\x98\x80";
  EXPECT_EQ(engine::grammar::gbnf_literal(text), "\"a\\\"b\\\\c\\nd\\te\\x01\\x7F\\u00E9\xF0\x9F\x98\x80\"");
  const auto ast = parse_gbnf("root ::= " + engine::grammar::gbnf_literal(text));
  EXPECT_EQ(ast.bodies[ast.root].literal, text);
}

}  // namespace
