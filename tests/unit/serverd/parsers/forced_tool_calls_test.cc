// The calls of a forced tool_choice: a named function's arguments object and "required"'s array of
// {"name", "parameters"} objects, whole and streamed at every split, parallel_tool_calls false, and text
// cut short by max_tokens.
#include "serverd/parsers/forced_tool_calls.h"

#include <gtest/gtest.h>

#include <functional>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::calls_only;
using testing::expected_ids;
using testing::seeded_options;
using testing::splits_of;

using MakeParser = std::function<std::unique_ptr<ToolCallParser>(ToolCallOptions)>;

const std::vector<std::string> kIds = expected_ids(CallIdStyle::kVllm, 3);

MakeParser named(std::string function) {
  return [function](ToolCallOptions options) {
    return std::make_unique<NamedToolCallParser>(function, std::move(options));
  };
}

std::unique_ptr<ToolCallParser> required(ToolCallOptions options) {
  return std::make_unique<RequiredToolCallsParser>(std::move(options));
}

ToolParserResult whole(const MakeParser& make, std::string_view text, ToolCallOptions options = seeded_options()) {
  const auto parser = make(std::move(options));
  return parse_tool_calls(*parser, text);
}

// Every split of `text` streams what the whole response holds; returns the whole response.
ToolParserResult split_invariant(const MakeParser& make, std::string_view text) {
  const ToolParserResult all = whole(make, text);
  for (const auto& ends : splits_of(text)) {
    const auto parser = make(seeded_options());
    ToolCallCollector collector;
    std::size_t from = 0;
    for (const std::size_t end : ends) {
      collector.add(parser->feed(text.substr(from, end - from)));
      from = end;
    }
    collector.add(parser->feed(text.substr(from)));
    collector.add(parser->finish());
    EXPECT_EQ(collector.result(), all) << "cut into " << ends.size() + 1 << " pieces: " << text;
  }
  return all;
}

TEST(NamedToolCallParser, TheWholeTextIsTheFunctionsArguments) {
  const std::string_view text = R"({"city": "Paris", "days": [1, 2]})";
  EXPECT_EQ(split_invariant(named("get_weather"), text), calls_only({{kIds[0], "get_weather", std::string(text)}}));
}

TEST(NamedToolCallParser, StreamsTheHeaderWithTheFirstTextThenEachPiece) {
  const auto parser = named("f")(seeded_options());
  const ToolParserDelta first = parser->feed("{\"a\"");
  ASSERT_EQ(first.tool_calls.size(), 2u);
  EXPECT_TRUE(first.tool_calls[0].starts_call());
  EXPECT_EQ(first.tool_calls[0].name, "f");
  EXPECT_EQ(first.tool_calls[1].arguments, "{\"a\"");
  const ToolParserDelta next = parser->feed(": 1}");
  ASSERT_EQ(next.tool_calls.size(), 1u);
  EXPECT_FALSE(next.tool_calls[0].starts_call());
  EXPECT_EQ(next.tool_calls[0].index, 0);
  EXPECT_EQ(next.tool_calls[0].arguments, ": 1}");
  EXPECT_TRUE(parser->finish().empty());
}

// vLLM's whole response holds the call even when nothing was generated.
TEST(NamedToolCallParser, NothingGeneratedIsStillOneCall) {
  EXPECT_EQ(whole(named("f"), ""), calls_only({{kIds[0], "f", ""}}));
}

TEST(RequiredToolCallsParser, EachElementIsACallWithItsParametersAsJsonDumpsWritesThem) {
  const std::string_view text =
      R"( [{"name": "get_weather", "parameters": {"city":"Paris"}}, {"name":"get_time","parameters":{}}] )";
  EXPECT_EQ(split_invariant(required, text),
            calls_only({{kIds[0], "get_weather", R"({"city": "Paris"})"}, {kIds[1], "get_time", "{}"}}));
}

TEST(RequiredToolCallsParser, BracesInsideStringsDoNotEndTheElement) {
  const std::string_view text = R"([{"name": "echo", "parameters": {"text": "} { ]"}}])";
  EXPECT_EQ(split_invariant(required, text), calls_only({{kIds[0], "echo", R"({"text": "} { ]"})"}}));
}

TEST(RequiredToolCallsParser, ParallelToolCallsFalseKeepsTheFirstCall) {
  const std::string_view text = R"([{"name": "a", "parameters": {}}, {"name": "b", "parameters": {}}])";
  EXPECT_EQ(whole(required, text, seeded_options(7, false)), calls_only({{kIds[0], "a", "{}"}}));
}

// max_tokens can end the array inside an element: what was cut short is content, the calls before it stay.
TEST(RequiredToolCallsParser, AnElementCutShortIsContent) {
  const std::string_view text = R"([{"name": "a", "parameters": {}}, {"name": "b", "param)";
  const ToolParserResult result = split_invariant(required, text);
  EXPECT_EQ(result.content, R"({"name": "b", "param)");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "a");
}

}  // namespace
}  // namespace serverd::parsers
