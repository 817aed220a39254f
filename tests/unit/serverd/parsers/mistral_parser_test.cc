// --tool-call-parser mistral on what Mistral-7B-Instruct-v0.3 writes (decoded with its Hugging Face
// tokenizer, special tokens kept), whole and streamed.
#include "serverd/parsers/mistral_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::calls_only;
using testing::expected_ids;
using testing::seeded_options;
using testing::whole_tool_calls;

const std::vector<std::string> kIds = expected_ids(CallIdStyle::kMistral, 3);

ToolParserResult mistral(std::string_view text, ToolCallOptions options = seeded_options()) {
  return whole_tool_calls("mistral", text, std::move(options));
}

TEST(MistralToolParser, ReadsTheArrayAfterTheMarker) {
  EXPECT_EQ(
      mistral("[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", "
              "\"format\": \"celsius\"}}]"),
      calls_only({{kIds[0], "get_current_weather", R"({"location": "Paris, France", "format": "celsius"})"}}));
  EXPECT_EQ(mistral("[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}},{\"name\":\"get_time\","
                    "\"arguments\":{\"zone\":\"Europe/Paris\"}}]"),
            calls_only({{kIds[0], "get_weather", R"({"city": "Paris"})"},
                        {kIds[1], "get_time", R"({"zone": "Europe/Paris"})"}}));
}

// Mistral's ids: 9 letters and digits (mistral-common refuses other ids in the next request).
TEST(MistralToolParser, CallIdsAreNineAlphanumerics) {
  const auto parser = make_tool_call_parser("mistral");
  const ToolParserResult result =
      parse_tool_calls(*parser, R"([TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}])");
  ASSERT_EQ(result.calls.size(), 2u);
  for (const ToolCall& call : result.calls)
    EXPECT_TRUE(std::regex_match(call.id, std::regex("[A-Za-z0-9]{9}"))) << call.id;
  EXPECT_NE(result.calls[0].id, result.calls[1].id);
}

TEST(MistralToolParser, TextBeforeTheMarkerIsContent) {
  EXPECT_EQ(mistral("Let me check.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"q\": \"[TOOL_CALLS] ]}\"}}]"),
            (ToolParserResult{"Let me check.", {{kIds[0], "f", R"({"q": "[TOOL_CALLS] ]}"})"}}}));
}

// What does not follow the format is content as it is, the marker included; elements read before a bad
// one stay calls.
TEST(MistralToolParser, WhatIsNotACallIsContent) {
  for (const std::string text :
       {"No tools needed.", "[TOOL_CALLS] not an array", "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}",
        "[TOOL_CALLS] [1, 2]", "[TOOL_CALLS] [{\"name\": \"f\"}]",
        "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}},]",
        "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [}}]", "[TOOL_CALLS] [{\"name\": \"f\", \"argu",
        "[TOOL_CA"}) {
    const ToolParserResult result = mistral(text);
    if (text.find(",]") != std::string::npos) {
      EXPECT_EQ(result, (ToolParserResult{"]", {{kIds[0], "f", "{}"}}})) << text;
    } else {
      EXPECT_EQ(result, (ToolParserResult{text, {}})) << text;
    }
  }
  EXPECT_EQ(mistral(R"([TOOL_CALLS] [{"name": "f", "arguments": {}}, {"nom": "g"}])"),
            (ToolParserResult{R"({"nom": "g"}])", {{kIds[0], "f", "{}"}}}));
}

// vLLM returns no call and no text for an empty array.
TEST(MistralToolParser, AnEmptyArrayIsNothing) {
  EXPECT_EQ(mistral("[TOOL_CALLS] []"), (ToolParserResult{"", {}}));
}

TEST(MistralToolParser, ParallelToolCallsFalseKeepsTheFirstCall) {
  EXPECT_EQ(mistral(R"([TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}])",
                    seeded_options(7, false)),
            calls_only({{kIds[0], "f", "{}"}}));
}

TEST(MistralToolParser, StreamsEachCallAsItsObjectCloses) {
  MistralToolParser parser(seeded_options());
  EXPECT_EQ(parser.feed("Sure[TOOL_"), (ToolParserDelta{"Sure", {}}));
  EXPECT_EQ(parser.feed("CALLS] [{\"name\": \"f\", \"arguments\": {}}"),
            (ToolParserDelta{"", {{0, kIds[0], "f", ""}, {0, "", "", "{}"}}}));
  EXPECT_EQ(parser.feed(", {\"name\": \"g\", \"arguments\": {\"k\": \"v\"}}]"),
            (ToolParserDelta{"", {{1, kIds[1], "g", ""}, {1, "", "", R"({"k": "v"})"}}}));
  EXPECT_EQ(parser.finish(), ToolParserDelta{});
}

TEST(MistralToolParser, NamesItsMarker) {
  MistralToolParser parser({});
  EXPECT_EQ(parser.name(), "mistral");
  EXPECT_THAT(parser.markers(), ::testing::ElementsAre("[TOOL_CALLS]"));
  EXPECT_TRUE(parser.needs_special_tokens());
}

}  // namespace
}  // namespace serverd::parsers
