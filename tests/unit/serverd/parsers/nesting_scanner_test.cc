// Brackets and strings followed byte by byte, in JSON and in Python.
#include "serverd/parsers/nesting_scanner.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace serverd::parsers {
namespace {

using Syntax = NestingScanner::Syntax;

// The depth after each byte of `text`.
std::vector<std::size_t> depths(Syntax syntax, std::string_view text) {
  NestingScanner scanner(syntax);
  std::vector<std::size_t> out;
  for (const char c : text) {
    scanner.advance(c);
    out.push_back(scanner.depth());
  }
  return out;
}

std::size_t depth_after(Syntax syntax, std::string_view text) {
  return depths(syntax, text).back();
}

TEST(NestingScanner, JsonBracketsOutsideStringsNest) {
  EXPECT_EQ(depths(Syntax::kJson, R"({"a": [1, {}]})"),
            (std::vector<std::size_t>{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 2, 1, 0}));
  EXPECT_EQ(depth_after(Syntax::kJson, R"({"a": "}]\"}"})"), 0u);
  EXPECT_EQ(depth_after(Syntax::kJson, R"({"a": "\\"})"), 0u);  // an escaped backslash does not escape the quote
  EXPECT_EQ(depth_after(Syntax::kJson, "{'}'"), 0u);            // single quotes are no strings in JSON
  EXPECT_EQ(depth_after(Syntax::kJson, "{(("), 1u);             // nor are parentheses brackets
}

TEST(NestingScanner, TellsWhenInsideAString) {
  NestingScanner scanner(Syntax::kJson);
  for (const char c : std::string_view(R"({"a)")) scanner.advance(c);
  EXPECT_TRUE(scanner.in_string());
  for (const char c : std::string_view(R"(\")")) scanner.advance(c);
  EXPECT_TRUE(scanner.in_string());
  scanner.advance('"');
  EXPECT_FALSE(scanner.in_string());
}

// Nothing inside a string closes the call: the depth stays 1 up to the last ")".
void expect_one_call(std::string_view text) {
  const std::vector<std::size_t> after = depths(Syntax::kPython, text);
  for (std::size_t i = 1; i + 1 < after.size(); ++i) EXPECT_EQ(after[i], 1u) << text << " at byte " << i;
  EXPECT_EQ(after.back(), 0u) << text;
}

TEST(NestingScanner, PythonStringsHideBrackets) {
  expect_one_call("f(a='''it's ) ''')");
  expect_one_call(R"x(f(a="""say "hi" ) """))x");
  expect_one_call(R"x(f(a='('')', b=")"))x");
  expect_one_call(R"x(f(a='\')'))x");
}

TEST(NestingScanner, PythonQuotesTriplesAndParentheses) {
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a='(', b=\")]\")"), 0u);
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a='''it's ) \"\"\" ''')"), 0u);
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a=\"\"\"x\"\" ) \"\"\")"), 0u);
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a='', b=\"\")"), 0u);   // empty strings, not triple quotes
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a='''''', b=1)"), 0u);  // an empty triple-quoted string
  EXPECT_EQ(depth_after(Syntax::kPython, R"(f(a=r'\'', b=1))"), 0u);
  EXPECT_EQ(depth_after(Syntax::kPython, "f(a='x)"), 1u);
}

TEST(NestingScanner, NoticesMismatchedBrackets) {
  for (const auto& [syntax, text] : std::vector<std::pair<Syntax, std::string_view>>{
           {Syntax::kJson, "{]"}, {Syntax::kJson, "}"}, {Syntax::kPython, "f(]"}, {Syntax::kPython, "[)"}}) {
    NestingScanner scanner(syntax);
    for (const char c : text) scanner.advance(c);
    EXPECT_TRUE(scanner.mismatched()) << text;
  }
  NestingScanner fine(Syntax::kJson);
  for (const char c : std::string_view("[{}]")) fine.advance(c);
  EXPECT_FALSE(fine.mismatched());
}

}  // namespace
}  // namespace serverd::parsers
