#include "engine/grammar/regex_to_gbnf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& pattern) {
  try {
    regex_to_gbnf(pattern);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(RegexToGbnf, LiteralsMergeAndQuantifiersBindToOneAtom) {
  EXPECT_EQ(regex_to_gbnf("abc"), "root ::= \"abc\"\n");
  EXPECT_EQ(regex_to_gbnf("ab+c"), "root ::= \"a\" \"b\"+ \"c\"\n");
  EXPECT_EQ(regex_to_gbnf("a{2,3}b{4}c{1,}"), "root ::= \"a\"{2,3} \"b\"{4} \"c\"{1,}\n");
  EXPECT_EQ(regex_to_gbnf("(ab)*"), "root ::= (\"ab\")*\n");
}

TEST(RegexToGbnf, LazyQuantifiersMatchTheSameLanguage) {
  EXPECT_EQ(regex_to_gbnf_expression("a*?b+?c??d{1,2}?"), regex_to_gbnf_expression("a*b+c?d{1,2}"));
}

TEST(RegexToGbnf, AlternationAndGroups) {
  EXPECT_EQ(regex_to_gbnf_expression("cat|dog"), "\"cat\" | \"dog\"");
  EXPECT_EQ(regex_to_gbnf_expression("(?:x|y)z"), "(\"x\" | \"y\") \"z\"");
  EXPECT_EQ(regex_to_gbnf_expression("(?P<name>a)(?<other>b)"), "(\"a\") (\"b\")");
  EXPECT_EQ(regex_to_gbnf_expression("a|"), "\"a\" | \"\"");
}

TEST(RegexToGbnf, AnchorsAtTheEndsHaveNoEffect) {
  EXPECT_EQ(regex_to_gbnf_expression("^abc$"), "\"abc\"");
  EXPECT_EQ(regex_to_gbnf_expression("^a$|^b$"), "\"a\" | \"b\"");
}

TEST(RegexToGbnf, ClassEscapesAreAsciiExceptWhitespaceWhichIsJavaScripts) {
  EXPECT_EQ(regex_to_gbnf_expression("\\d"), "[0-9]");
  EXPECT_EQ(regex_to_gbnf_expression("\\w"), "[0-9A-Z\\x5Fa-z]");
  // \S excludes every character JavaScript's \s takes (U+00A0, U+2028 ...), so a validator agrees.
  const std::string not_space = regex_to_gbnf_expression("\\S");
  EXPECT_EQ(not_space.rfind("[^", 0), 0u) << not_space;
  EXPECT_THAT(not_space, HasSubstr("\\u00A0"));
  EXPECT_THAT(not_space, HasSubstr("\\u2028"));
  EXPECT_THAT(regex_to_gbnf_expression("\\s"), HasSubstr("\\u3000"));
}

TEST(RegexToGbnf, ClassesWithRangesNegationAndEscapes) {
  EXPECT_EQ(regex_to_gbnf_expression("[a-cx]"), "[a-cx]");
  EXPECT_EQ(regex_to_gbnf_expression("[^a-c]"), "[^a-c]");
  EXPECT_EQ(regex_to_gbnf_expression("[\\d_-]"), "[\\x2D0-9\\x5F]");
  EXPECT_EQ(regex_to_gbnf_expression("[\\]\\\\]"), "[\\x5C\\x5D]");
  EXPECT_EQ(regex_to_gbnf_expression("[\\b]"), "[\\x08]");
  // `.` is anything but a newline; a negated class takes the newline.
  EXPECT_EQ(regex_to_gbnf_expression("."), "[^\\n]");
  EXPECT_EQ(regex_to_gbnf_expression("[^a]"), "[^a]");
}

TEST(RegexToGbnf, CharacterEscapes) {
  EXPECT_EQ(regex_to_gbnf_expression("\\.\\\\\\n\\t\\*\\{"), "\".\\\\\\n\\t*{\"");
  EXPECT_EQ(regex_to_gbnf_expression("\\x41\\u00e9"), "\"A\\u00E9\"");
  // A surrogate pair of \u escapes is one character (U+1F600), written as UTF-8.
  EXPECT_EQ(regex_to_gbnf_expression("\\ud83d\\ude00"), "\"\xF0\x9F\x98\x80\"");
  EXPECT_EQ(regex_to_gbnf_expression("é+"), "\"\\u00E9\"+");
}

TEST(RegexToGbnf, JsonStringTargetWritesCharactersAsJsonEscapesThem) {
  EXPECT_EQ(regex_to_gbnf_expression("a\"b\\\\c", RegexTarget::JsonString), "\"a\\\\\\\"b\\\\\\\\c\"");
  EXPECT_EQ(regex_to_gbnf_expression("\\n", RegexTarget::JsonString), "\"\\\\n\"");
  // A quoted character under a quantifier keeps its two characters together.
  EXPECT_EQ(regex_to_gbnf_expression("\"*", RegexTarget::JsonString), "(\"\\\\\\\"\")*");
  // A class splits into the characters JSON writes as themselves and the escaped ones.
  EXPECT_EQ(regex_to_gbnf_expression("[a\"]", RegexTarget::JsonString), "([a] | \"\\\\\\\"\")");
  EXPECT_EQ(regex_to_gbnf_expression("[\\x00-\\x02]", RegexTarget::JsonString), "\"\\\\u000\" [0-2]");
}

TEST(RegexToGbnf, RefusesWhatItDoesNotSupportByNameWithTheOffset) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  const Case cases[] = {
      {"(a)\\1", "a backreference \\1 is not supported at offset 3"},
      {"(?P<n>a)(?P=n)", "a backreference (?P=name) is not supported at offset 8"},
      {"\\k<n>", "a backreference \\k is not supported at offset 0"},
      {"a(?=b)", "lookahead is not supported at offset 1"},
      {"a(?!b)", "lookahead is not supported at offset 1"},
      {"(?<=a)b", "lookbehind is not supported at offset 0"},
      {"(?<!a)b", "lookbehind is not supported at offset 0"},
      {"(?>a)", "an atomic group is not supported at offset 0"},
      {"a*+", "a possessive quantifier is not supported at offset 2"},
      {"(?i)a", "an inline flag group (?i...) is not supported at offset 0"},
      {"(?#note)a", "a comment group is not supported at offset 0"},
      {"\\bword", "a word boundary \\b is not supported at offset 0"},
      {"\\Bx", "a word boundary \\B is not supported at offset 0"},
      {"\\Aabc", "the anchor \\A is not supported at offset 0"},
      {"abc\\Z", "the anchor \\Z is not supported at offset 3"},
      {"\\p{L}", "a Unicode property class \\p is not supported at offset 0"},
      {"a^b", "anchor ^ away from the start of the pattern at offset 1"},
      {"a$b", "anchor $ away from the end of the pattern at offset 1"},
      {"(^a)", "anchor ^ away from the start of the pattern at offset 1"},
      {"a{,3}", "{,n} (Python's {0,n}); write {0,n} at offset 1"},
      {"a{x}", "'{' opens no quantifier (write \\{ for a literal brace) at offset 1"},
      {"{", "'{' opens no quantifier"},
      {"a{3,1}", "quantifier {3,1} has its maximum below its minimum at offset 1"},
      {"a{10001}", "repetition count over 10000"},
      {"*a", "nothing to repeat at offset 0"},
      {"a**", "multiple repeat at offset 2"},
      {"(a", "missing ')' for the group opened at offset 0"},
      {"a)", "unbalanced ')' at offset 1"},
      {"[a", "missing ']' for the class opened at offset 0"},
      {"[]a]", "']' first in a class"},
      {"[z-a]", "range out of order in a class at offset 1"},
      {"[a-\\d]", "a class escape as a range end at offset 1"},
      {"[^\\s\\S]", "character class that matches no character at offset 0"},
      {"\\q", "unknown escape \\q at offset 0"},
      {"\\x4", "\\x needs 2 hex digits at offset 0"},
      {"\\ud800", "a high surrogate \\u escape without its low half at offset 0"},
      {"\\udc00", "a lone low surrogate \\u escape at offset 0"},
      {"\\012", "an octal escape is not supported at offset 0"},
      {"[[:alpha:]]", "a POSIX class [:name:] is not supported at offset 1"},
      {"abc\\", "pattern ends in a backslash"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(error_of(c.pattern), HasSubstr(c.message)) << c.pattern;
    EXPECT_THAT(error_of(c.pattern), HasSubstr("regex: ")) << c.pattern;
  }
}

TEST(RegexToGbnf, OffsetsCountCharactersNotBytes) {
  EXPECT_THAT(error_of("éé(?=x)"), HasSubstr("at offset 2"));
}

TEST(RegexToGbnf, InvalidUtf8IsRefusedWithItsByte) {
  EXPECT_THAT(error_of("ab\xFF"), HasSubstr("invalid UTF-8 at byte 2"));
}

}  // namespace
}  // namespace engine::grammar
