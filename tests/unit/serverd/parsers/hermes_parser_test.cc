// --tool-call-parser hermes on what Qwen2.5, Qwen3 and Hermes 2 Pro write, whole and streamed.
#include "serverd/parsers/hermes_parser.h"

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

ToolParserResult hermes(std::string_view text, ToolCallOptions options = seeded_options()) {
  return whole_tool_calls("hermes", text, std::move(options));
}

// Qwen2.5-7B-Instruct's answer to "What's the temperature in San Francisco now and tomorrow?" with its
// template's tools block: one tagged JSON object per call, each on its own lines.
TEST(HermesToolParser, QwenCallsAreReadInOrder) {
  const std::string text =
      "<tool_call>\n"
      "{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n"
      "</tool_call>\n"
      "<tool_call>\n"
      "{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": "
      "\"2024-10-01\"}}\n"
      "</tool_call>";
  EXPECT_EQ(hermes(text), calls_only({{kIds[0], "get_current_temperature", R"({"location": "San Francisco, CA, USA"})"},
                                      {kIds[1], "get_temperature_date",
                                       R"({"location": "San Francisco, CA, USA", "date": "2024-10-01"})"}}));
}

// Text before the first call is content as it is, whitespace included: Qwen3 after its reasoning leaves
// "\n\n" there, which vLLM returns as content too.
TEST(HermesToolParser, TextBeforeACallIsContent) {
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  EXPECT_EQ(hermes("\n\n" + call), (ToolParserResult{"\n\n", {{kIds[0], "get_weather", R"({"city": "Paris"})"}}}));
  EXPECT_EQ(hermes("I'll look that up for you.\n" + call),
            (ToolParserResult{"I'll look that up for you.\n", {{kIds[0], "get_weather", R"({"city": "Paris"})"}}}));
}

// Arguments are written again as vLLM writes them (Python's json.dumps, ensure_ascii=False): whatever the
// model's spacing and key order, escapes decoded, non-ASCII text as it is, repeated keys keeping the last.
TEST(HermesToolParser, ArgumentsAreWrittenAsJsonDumpsWritesThem) {
  // Hermes 2 Pro puts "arguments" first and may write compact JSON.
  EXPECT_EQ(
      hermes("<tool_call>\n{\"arguments\":{\"symbol\":\"TSLA\",\"n\":[1,2]},\"name\":\"get_stock_fundamentals\"}\n"
             "</tool_call>"),
      calls_only({{kIds[0], "get_stock_fundamentals", R"({"symbol": "TSLA", "n": [1, 2]})"}}));
  EXPECT_EQ(hermes("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1.0, \"b\": 1e2, \"c\": 10, \"d\": -0.5, "
                   "\"e\": true, \"f\": null, \"g\": {}, \"h\": []}}</tool_call>"),
            calls_only({{kIds[0], "f",
                         R"({"a": 1.0, "b": 100.0, "c": 10, "d": -0.5, "e": true, "f": null, "g": {}, "h": []})"}}));
  EXPECT_EQ(hermes("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": 2, \"x\": 3}}</tool_call>"),
            calls_only({{kIds[0], "f", R"({"x": 3, "y": 2})"}}));
  EXPECT_EQ(hermes("<tool_call>\n{\"name\": \"translate\", \"arguments\": {\"text\": \"Grüße, 世界 🌍\", \"to\": "
                   "\"\\u65e5\\u672c\\u8a9e\", \"tab\": \"a\\tb\\u0001\"}}\n</tool_call>"),
            calls_only({{kIds[0], "translate",
                         "{\"text\": \"Grüße, 世界 🌍\", \"to\": \"日本語\", \"tab\": \"a\\tb\\u0001\"}"}}));
  // Any arguments value is taken and written as JSON (vLLM json.dumps it too).
  EXPECT_EQ(hermes("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>"),
            calls_only({{kIds[0], "f", R"("{\"a\": 1}")"}}));
}

// Braces and the closing tag inside JSON strings are text: the call ends at the first </tool_call> outside
// its strings (vLLM cuts the call at the quoted tag and returns it all as content).
TEST(HermesToolParser, BracesAndTagsInsideStringsAreText) {
  const std::string text =
      "<tool_call>\n"
      "{\"name\": \"write_file\", \"arguments\": {\"path\": \"notes.xml\", \"content\": \"<tool_call>x</tool_call> } { "
      "\\\"quoted\\\" \\\\\"}}\n"
      "</tool_call>";
  EXPECT_EQ(hermes(text),
            calls_only({{kIds[0], "write_file",
                         R"({"path": "notes.xml", "content": "<tool_call>x</tool_call> } { \"quoted\" \\"})"}}));
}

// A call that is not one (bad JSON, another shape) is content, tags and all, as vLLM returns it; calls
// around it are still calls.
TEST(HermesToolParser, WhatIsNotACallIsContent) {
  for (const std::string body :
       {"{\"name\": \"f\", \"arguments\": {\"a\": }", "not json at all", "{\"function\": \"f\", \"args\": {}}",
        "{\"name\": 5, \"arguments\": {}}", "{\"name\": \"\", \"arguments\": {}}", "{\"name\": \"f\"}",
        "[{\"name\": \"f\", \"arguments\": {}}]", "{\"name\": \"f\", \"arguments\": {}} trailing"}) {
    const std::string text = "Checking.\n<tool_call>\n" + body + "\n</tool_call>";
    EXPECT_EQ(hermes(text), (ToolParserResult{text, {}})) << body;
  }
  const std::string bad = "<tool_call>\nnot json\n</tool_call>";
  const std::string good = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(hermes(bad + "\n" + good), (ToolParserResult{bad + "\n", {{kIds[0], "f", "{}"}}}));
  EXPECT_EQ(hermes(good + "\n" + bad), (ToolParserResult{bad, {{kIds[0], "f", "{}"}}}));
}

// A call the model did not close (it stopped, or ran out of tokens) is a call when its JSON is whole, and
// content when it is cut short.
TEST(HermesToolParser, AnUnclosedCallCountsWhenItsJsonIsWhole) {
  EXPECT_EQ(hermes("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"),
            calls_only({{kIds[0], "f", R"({"a": 1})"}}));
  const std::string cut = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1";
  EXPECT_EQ(hermes(cut), (ToolParserResult{cut, {}}));
  const std::string cut_tag = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_";
  EXPECT_EQ(hermes(cut_tag), (ToolParserResult{cut_tag, {}}));
}

// Whitespace after a call is dropped; other text after it is content (vLLM drops that too; nothing the
// model wrote is lost here).
TEST(HermesToolParser, TextAfterCallsIsContentWithoutTheWhitespace) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(hermes(call + "\n\n"), calls_only({{kIds[0], "f", "{}"}}));
  EXPECT_EQ(hermes(call + "\n\nDone, let me know.\n"),
            (ToolParserResult{"Done, let me know.\n", {{kIds[0], "f", "{}"}}}));
}

TEST(HermesToolParser, TextWithoutCallsIsContent) {
  for (const std::string text : {"", "Paris is sunny today.", "Use <tool_calls> or <tool_call without a close",
                                 "a stray </tool_call> tag", "ends with <tool_c"}) {
    EXPECT_EQ(hermes(text), (ToolParserResult{text, {}})) << text;
  }
}

TEST(HermesToolParser, ParallelToolCallsFalseKeepsTheFirstCall) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n</tool_call>\n";
  const std::string second = "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"n\": 2}}\n</tool_call>";
  EXPECT_EQ(hermes(call + second, seeded_options(7, false)), calls_only({{kIds[0], "f", R"({"n": 1})"}}));
}

// The stream: content goes out at once except a possible start of "<tool_call>"; a call goes out as a
// header and its arguments once it is closed.
TEST(HermesToolParser, StreamsContentAtOnceAndACallWhenItCloses) {
  HermesToolParser parser(seeded_options());
  EXPECT_EQ(parser.feed("Sure.<tool"), (ToolParserDelta{"Sure.", {}}));
  EXPECT_EQ(parser.feed("_call>\n{\"name\": \"get_weather\""), ToolParserDelta{});
  EXPECT_EQ(parser.feed(", \"arguments\": {\"city\": \"Paris\"}}\n</tool_"), ToolParserDelta{});
  const ToolParserDelta closed = parser.feed("call>\n<to");
  ASSERT_EQ(closed.tool_calls.size(), 2u);
  EXPECT_EQ(closed.content, "");
  EXPECT_EQ(closed.tool_calls[0], (ToolCallDelta{0, kIds[0], "get_weather", ""}));
  EXPECT_EQ(closed.tool_calls[1], (ToolCallDelta{0, "", "", R"({"city": "Paris"})"}));
  // Text after a call: the newline is dropped, "<to" waits, then turns out not to be a call.
  EXPECT_EQ(parser.feed("ol> done"), (ToolParserDelta{"<tool> done", {}}));
  EXPECT_EQ(parser.finish(), ToolParserDelta{});
  EXPECT_THROW(parser.feed("x"), std::logic_error);
  EXPECT_THROW(parser.finish(), std::logic_error);
}

TEST(HermesToolParser, NamesItsMarkers) {
  HermesToolParser parser({});
  EXPECT_EQ(parser.name(), "hermes");
  EXPECT_THAT(parser.markers(), ::testing::ElementsAre("<tool_call>", "</tool_call>"));
  EXPECT_TRUE(parser.needs_special_tokens());
}

}  // namespace
}  // namespace serverd::parsers
