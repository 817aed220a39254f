// --tool-call-parser pythonic on what Llama 3.2 and ToolACE write, whole and streamed.
#include "serverd/parsers/pythonic_parser.h"

#include <gtest/gtest.h>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::calls_only;
using testing::expected_ids;
using testing::seeded_options;
using testing::whole_tool_calls;

const std::vector<std::string> kIds = expected_ids(CallIdStyle::kVllm, 3);

ToolParserResult pythonic(std::string_view text, ToolCallOptions options = seeded_options()) {
  return whole_tool_calls("pythonic", text, std::move(options));
}

// Llama-3.2-3B-Instruct with vLLM's tool_chat_template_llama3.2_pythonic.jinja.
TEST(PythonicToolParser, ReadsTheListOfCalls) {
  EXPECT_EQ(pythonic("[get_weather(city='San Francisco', metric='celsius'), get_weather(city='Seattle', "
                     "metric='celsius')]"),
            calls_only({{kIds[0], "get_weather", R"({"city": "San Francisco", "metric": "celsius"})"},
                        {kIds[1], "get_weather", R"({"city": "Seattle", "metric": "celsius"})"}}));
  EXPECT_EQ(pythonic("[get_time()]"), calls_only({{kIds[0], "get_time", "{}"}}));
  EXPECT_EQ(pythonic("[register_user(name=\"John Doe\", age=37, address={'city': 'San Francisco', 'state': 'CA'}, "
                     "role=None, passed_test=True, aliases=['John', 'Johnny'], score=-1.5e3)]"),
            calls_only({{kIds[0], "register_user",
                         R"({"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, )"
                         R"("role": null, "passed_test": true, "aliases": ["John", "Johnny"], "score": -1500.0})"}}));
}

// Brackets and quotes inside strings, triple-quoted ones too, do not end a call.
TEST(PythonicToolParser, StringsHideBracketsAndQuotes) {
  EXPECT_EQ(pythonic(R"x([f(a='''it's ) ] ok''', b="(\")"), g(c='')])x"),
            calls_only({{kIds[0], "f", R"x({"a": "it's ) ] ok", "b": "(\")"})x"}, {kIds[1], "g", R"({"c": ""})"}}));
}

// Line breaks and spaces between the parts, and a trailing comma, are Python too.
TEST(PythonicToolParser, TakesPythonLayout) {
  EXPECT_EQ(pythonic(" [\n  search(\n    query=\"a (b) [c] 'd'\",\n    limit=3,\n  ),\n  ping ()\n,]\n"),
            calls_only({{kIds[0], "search", R"({"query": "a (b) [c] 'd'", "limit": 3})"}, {kIds[1], "ping", "{}"}}));
}

// Anything else is content as it is (vLLM: "Tool output must be a list of function calls").
TEST(PythonicToolParser, WhatIsNotACallListIsContent) {
  for (const std::string text : {"The answer is 42.", "[1, 2, 3]", "[]", "[Note] see below", "[f(1)]", "[f(x=y)]",
                                 "[f(x=1, x=2)]", "[f(a=(1, 2))]", "[f(a=b'x')]", "[f(a=1)", "[f(a='unterminated)]",
                                 "[os.system(cmd='ls')]", "[f(a=1)))]", "  no list", "[f(a=1) g(b=2)]"}) {
    const ToolParserResult result = pythonic(text);
    if (text == "[f(a=1)") {
      EXPECT_EQ(result, calls_only({{kIds[0], "f", R"({"a": 1})"}})) << "the call closed; the list did not";
    } else if (text == "[f(a=1) g(b=2)]") {
      EXPECT_EQ(result, (ToolParserResult{"g(b=2)]", {{kIds[0], "f", R"({"a": 1})"}}})) << text;
    } else if (text == "[f(a=1)))]") {
      EXPECT_EQ(result, (ToolParserResult{"))]", {{kIds[0], "f", R"({"a": 1})"}}})) << text;
    } else {
      EXPECT_EQ(result, (ToolParserResult{text, {}})) << text;
    }
  }
}

TEST(PythonicToolParser, TextAfterTheListIsContent) {
  EXPECT_EQ(pythonic("[f(a=1)]\n\nI will report back."),
            (ToolParserResult{"I will report back.", {{kIds[0], "f", R"({"a": 1})"}}}));
}

TEST(PythonicToolParser, ParallelToolCallsFalseKeepsTheFirstCall) {
  EXPECT_EQ(pythonic("[f(a=1), g(b=2)]", seeded_options(7, false)), calls_only({{kIds[0], "f", R"({"a": 1})"}}));
}

TEST(PythonicToolParser, StreamsEachCallAtItsClosingParenthesis) {
  PythonicToolParser parser(seeded_options());
  EXPECT_EQ(parser.feed("[get_weather(city=\"Par"), ToolParserDelta{});
  EXPECT_EQ(parser.feed("is (FR)\"), get_"),
            (ToolParserDelta{"", {{0, kIds[0], "get_weather", ""}, {0, "", "", R"x({"city": "Paris (FR)"})x"}}}));
  EXPECT_EQ(parser.feed("time()]"), (ToolParserDelta{"", {{1, kIds[1], "get_time", ""}, {1, "", "", "{}"}}}));
  EXPECT_EQ(parser.finish(), ToolParserDelta{});

  PythonicToolParser prose(seeded_options());
  EXPECT_EQ(prose.feed("[Note"), ToolParserDelta{});
  EXPECT_EQ(prose.feed("] text"), (ToolParserDelta{"[Note] text", {}}));
}

TEST(PythonicToolParser, HasNoMarkers) {
  PythonicToolParser parser({});
  EXPECT_EQ(parser.name(), "pythonic");
  EXPECT_TRUE(parser.markers().empty());
  EXPECT_FALSE(parser.needs_special_tokens());
}

}  // namespace
}  // namespace serverd::parsers
