// --tool-call-parser llama3_json on what Llama 3.1-3.3 write with JSON tool calling, whole and streamed.
#include "serverd/parsers/llama3_json_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::calls_only;
using testing::expected_ids;
using testing::seeded_options;
using testing::whole_tool_calls;

const std::vector<std::string> kIds = expected_ids(CallIdStyle::kVllm, 3);

ToolParserResult llama(std::string_view text, ToolCallOptions options = seeded_options()) {
  return whole_tool_calls("llama3_json", text, std::move(options));
}

// Llama-3.1-8B-Instruct with vLLM's tool_chat_template_llama3.1_json.jinja: the answer is the object, with
// "parameters"; with built-in tools enabled it is led by <|python_tag|>.
TEST(Llama3JsonToolParser, ReadsTheCallThatIsTheAnswer) {
  const std::string call =
      "{\"name\": \"get_current_weather\", \"parameters\": {\"city\": \"San Francisco\", \"state\": \"CA\", "
      "\"unit\": \"fahrenheit\"}}";
  const ToolParserResult expected = calls_only(
      {{kIds[0], "get_current_weather", R"({"city": "San Francisco", "state": "CA", "unit": "fahrenheit"})"}});
  EXPECT_EQ(llama(call), expected);
  EXPECT_EQ(llama("<|python_tag|>" + call), expected);
  EXPECT_EQ(llama("\n\n<|python_tag|> " + call + "\n"), expected);
}

TEST(Llama3JsonToolParser, CallsSeparatedBySemicolonsAreAllRead) {
  EXPECT_EQ(
      llama("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
            "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}};{\"name\": \"noop\", \"parameters\": {}}"),
      calls_only({{kIds[0], "get_weather", R"({"city": "Paris"})"},
                  {kIds[1], "get_time", R"({"zone": "CET"})"},
                  {kIds[2], "noop", "{}"}}));
}

// "arguments" is read as well, and wins over "parameters" (vLLM's order); other keys are ignored.
TEST(Llama3JsonToolParser, ArgumentsKeyIsTakenFirst) {
  EXPECT_EQ(llama(R"({"type": "function", "name": "f", "parameters": {"a": 1}, "arguments": {"b": 2}})"),
            calls_only({{kIds[0], "f", R"({"b": 2})"}}));
  EXPECT_EQ(llama(R"({"name":"search","arguments":{"query":"héllo \"world\" }","tags":["a","b"]}})"),
            calls_only({{kIds[0], "search", R"({"query": "héllo \"world\" }", "tags": ["a", "b"]})"}}));
}

// Only an answer that starts with an object is read as calls (as vLLM streams it): anything else, and an
// object that is not a call, is content as it is.
TEST(Llama3JsonToolParser, WhatIsNotACallIsContent) {
  for (const std::string text :
       {"The weather is nice.", "Here it is: {\"name\": \"f\", \"parameters\": {}}", "{\"a\": 1}", "{\"name\": \"f\"}",
        "{\"name\": 3, \"parameters\": {}}", "{not json}", "{\"name\": \"f\", \"parameters\": {\"a\": 1}",
        "<|python_tag|>brave_search.call(query=\"weather\")", "<|python_tag|>", "<|python_ta", "{} ", "  {\"x\": [}"}) {
    EXPECT_EQ(llama(text), (ToolParserResult{text, {}})) << text;
  }
}

// After a call, ";" and whitespace are dropped and the first other text is content from there on: a later
// object that is not a call, or prose.
TEST(Llama3JsonToolParser, TextAfterCallsIsContent) {
  const std::string call = R"({"name": "f", "parameters": {}})";
  EXPECT_EQ(llama(call + "; {\"a\": 1}"), (ToolParserResult{"{\"a\": 1}", {{kIds[0], "f", "{}"}}}));
  EXPECT_EQ(llama(call + "\nI called f."), (ToolParserResult{"I called f.", {{kIds[0], "f", "{}"}}}));
  EXPECT_EQ(llama(call + " ;\n "), calls_only({{kIds[0], "f", "{}"}}));
}

TEST(Llama3JsonToolParser, ParallelToolCallsFalseKeepsTheFirstCall) {
  EXPECT_EQ(llama(R"({"name": "f", "parameters": {}}; {"name": "g", "parameters": {}})", seeded_options(7, false)),
            calls_only({{kIds[0], "f", "{}"}}));
}

// Streamed, prose is content at once: the first byte that cannot lead a call decides.
TEST(Llama3JsonToolParser, ProseStreamsAtOnceAndACallWhenItCloses) {
  Llama3JsonToolParser prose(seeded_options());
  EXPECT_EQ(prose.feed(" <|py"), ToolParserDelta{});
  EXPECT_EQ(prose.feed("thon tag"), (ToolParserDelta{" <|python tag", {}}));
  EXPECT_EQ(prose.feed(" more"), (ToolParserDelta{" more", {}}));

  Llama3JsonToolParser call(seeded_options());
  EXPECT_EQ(call.feed("{\"name\": \"f\", "), ToolParserDelta{});
  const ToolParserDelta closed = call.feed("\"parameters\": {\"x\": \"}\"}};");
  EXPECT_EQ(closed.tool_calls, (std::vector<ToolCallDelta>{{0, kIds[0], "f", ""}, {0, "", "", R"({"x": "}"})"}}));
  EXPECT_EQ(call.finish(), ToolParserDelta{});

  // "{" followed by anything but a key is prose, known at that byte.
  Llama3JsonToolParser braces(seeded_options());
  EXPECT_EQ(braces.feed("{ x"), (ToolParserDelta{"{ x", {}}));
}

TEST(Llama3JsonToolParser, NamesItsMarker) {
  Llama3JsonToolParser parser({});
  EXPECT_EQ(parser.name(), "llama3_json");
  EXPECT_THAT(parser.markers(), ::testing::ElementsAre("<|python_tag|>"));
  EXPECT_FALSE(parser.needs_special_tokens());
}

}  // namespace
}  // namespace serverd::parsers
