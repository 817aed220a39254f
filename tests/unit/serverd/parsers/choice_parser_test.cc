// choice_parser: reasoning split off first, tool calls parsed from the content that remains, the stream
// adding up to the whole response, reasoning tokens counted.
#include "serverd/parsers/choice_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

ChoiceParser qwen3_with_hermes() {
  return ChoiceParser(make_reasoning_parser("qwen3"), make_tool_call_parser("hermes", testing::seeded_options()));
}

constexpr std::string_view kThinkThenCall =
    "<think>\nThe user wants the weather in Paris.\n</think>\n\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST(ChoiceParser, ReasoningIsSplitOffBeforeToolCallsAreParsed) {
  ChoiceParser parser = qwen3_with_hermes();
  parser.feed(kThinkThenCall, 30);
  parser.finish();
  const ChoiceResult result = parser.result();
  ASSERT_TRUE(result.reasoning.has_value());
  EXPECT_EQ(*result.reasoning, "\nThe user wants the weather in Paris.\n");
  EXPECT_EQ(result.content, "\n\n");  // what stands between the reasoning and the call, as vLLM keeps it
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_EQ(result.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_TRUE(parser.made_tool_calls());
}

TEST(ChoiceParser, AToolCallInsideTheReasoningIsReasoning) {
  ChoiceParser parser = qwen3_with_hermes();
  parser.feed("<think>I could emit <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call></think>Done.");
  parser.finish();
  const ChoiceResult result = parser.result();
  EXPECT_TRUE(result.calls.empty());
  EXPECT_EQ(result.content, "Done.");
  EXPECT_NE(result.reasoning->find("<tool_call>"), std::string::npos);
}

TEST(ChoiceParser, StreamedDeltasAddUpToTheWholeResponseAtEverySplit) {
  ChoiceParser whole = qwen3_with_hermes();
  whole.feed(kThinkThenCall);
  whole.finish();
  for (std::size_t cut = 0; cut <= kThinkThenCall.size(); ++cut) {
    ChoiceParser streamed = qwen3_with_hermes();
    ChoiceDelta sum;
    for (const ChoiceDelta& d :
         {streamed.feed(kThinkThenCall.substr(0, cut)), streamed.feed(kThinkThenCall.substr(cut)), streamed.finish()}) {
      sum.reasoning += d.reasoning;
      sum.content += d.content;
      sum.tool_calls.insert(sum.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    }
    EXPECT_EQ(streamed.result(), whole.result()) << "cut at " << cut;
    EXPECT_EQ(sum.reasoning, *whole.result().reasoning) << "cut at " << cut;
    ASSERT_EQ(sum.tool_calls.size(), 2u) << "cut at " << cut;  // the header, then the arguments
    EXPECT_TRUE(sum.tool_calls[0].starts_call());
    EXPECT_EQ(sum.tool_calls[0].name, "get_weather");
    EXPECT_EQ(sum.tool_calls[1].arguments, "{\"city\": \"Paris\"}");
  }
}

TEST(ChoiceParser, TokensCountAsReasoningOnlyWhileInsideTheReasoning) {
  ChoiceParser parser = qwen3_with_hermes();
  parser.feed("<think>", 1);
  parser.feed("step one", 2);
  parser.feed("</think>", 1);
  parser.feed("The answer.", 3);
  parser.finish();
  // The tokens between the tags, as vLLM counts them: the tags themselves are not reasoning.
  EXPECT_EQ(parser.reasoning_tokens(), 2u);
  EXPECT_EQ(parser.result().content, "The answer.");
}

TEST(ChoiceParser, WithoutParsersTextIsContent) {
  ChoiceParser parser(nullptr, nullptr);
  EXPECT_EQ(parser.feed("<think>a</think><tool_call>{}</tool_call>", 5).content,
            "<think>a</think><tool_call>{}</tool_call>");
  parser.finish();
  const ChoiceResult result = parser.result();
  EXPECT_FALSE(result.reasoning.has_value());
  EXPECT_EQ(result.content, "<think>a</think><tool_call>{}</tool_call>");
  EXPECT_EQ(parser.reasoning_tokens(), 0u);
  EXPECT_FALSE(parser.made_tool_calls());
}

TEST(ChoiceParser, ThinkingOffLeavesReasoningNull) {
  ReasoningOptions options;
  options.enable_thinking = false;
  ChoiceParser parser(make_reasoning_parser("qwen3", options), nullptr);
  parser.feed("Plain answer.", 2);
  parser.finish();
  EXPECT_FALSE(parser.result().reasoning.has_value());
  EXPECT_EQ(parser.result().content, "Plain answer.");
  EXPECT_EQ(parser.reasoning_tokens(), 0u);
}

}  // namespace
}  // namespace serverd::parsers
