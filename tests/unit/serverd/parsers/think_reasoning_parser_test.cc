// --reasoning-parser qwen3 and deepseek_r1 on what Qwen3 and DeepSeek-R1 write, whole and streamed.
#include "serverd/parsers/think_reasoning_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::whole_reasoning;

constexpr std::array<std::string_view, 2> kParsers = {"qwen3", "deepseek_r1"};

// Qwen3-8B with its original template (enable_thinking left on): the model writes the tags, and vLLM keeps
// the whitespace around them in both fields.
TEST(ThinkReasoningParser, SplitsQwen3Thinking) {
  const std::string text =
      "<think>\nOkay, the user wants the weather in Paris. I should call get_weather.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (const std::string_view parser : kParsers) {
    EXPECT_EQ(whole_reasoning(parser, text),
              (ReasoningResult{"\nOkay, the user wants the weather in Paris. I should call get_weather.\n",
                               "\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                               "</tool_call>"}))
        << parser;
  }
}

// DeepSeek-R1 since its template change (and Qwen3 2507 thinking models) get <think>\n in the prompt, so
// the output starts inside the reasoning and only </think> is generated.
TEST(ThinkReasoningParser, ReasoningStartsAtTheFirstByte) {
  const std::string text = "Okay, so I need to compare 9.11 and 9.8.\n</think>\n\n9.8 is greater than 9.11.";
  for (const std::string_view parser : kParsers) {
    EXPECT_EQ(whole_reasoning(parser, text),
              (ReasoningResult{"Okay, so I need to compare 9.11 and 9.8.\n", "\n\n9.8 is greater than 9.11."}))
        << parser;
  }
}

// Without </think> the answer was cut short while thinking: all of it is reasoning, content is null; so is
// content when nothing follows </think>.
TEST(ThinkReasoningParser, WithoutTheEndEverythingIsReasoning) {
  for (const std::string_view parser : kParsers) {
    EXPECT_EQ(whole_reasoning(parser, "<think>\nStill thinking about"),
              (ReasoningResult{"\nStill thinking about", std::nullopt}));
    EXPECT_EQ(whole_reasoning(parser, "plain answer"), (ReasoningResult{"plain answer", std::nullopt}));
    EXPECT_EQ(whole_reasoning(parser, "done</think>"), (ReasoningResult{"done", std::nullopt}));
    EXPECT_EQ(whole_reasoning(parser, ""), (ReasoningResult{"", std::nullopt}));
    EXPECT_EQ(whole_reasoning(parser, "cut at </thi"), (ReasoningResult{"cut at </thi", std::nullopt}));
  }
}

// Only the first <think> before </think> is dropped, text before it stays reasoning, and after </think>
// everything is content as it is, tags included.
TEST(ThinkReasoningParser, OnlyTheFirstTagsAreStructure) {
  for (const std::string_view parser : kParsers) {
    EXPECT_EQ(whole_reasoning(parser, "a</think>b<think>c</think>d"), (ReasoningResult{"a", "b<think>c</think>d"}));
    EXPECT_EQ(whole_reasoning(parser, "pre<think>x</think>y"), (ReasoningResult{"prex", "y"}));
    EXPECT_EQ(whole_reasoning(parser, "<think>a<think>b</think>c"), (ReasoningResult{"a<think>b", "c"}));
    EXPECT_EQ(whole_reasoning(parser, "<think></think>"), (ReasoningResult{"", std::nullopt}));
  }
}

// Thinking off: qwen3 reads chat_template_kwargs.enable_thinking=false (its template closed the think block
// in the prompt), every parser reads a prompt that closed it; then everything is content and there is no
// reasoning field.
TEST(ThinkReasoningParser, PassesThroughWhenThinkingIsOff) {
  const std::string text = "Paris is sunny.</think> ok";
  EXPECT_EQ(whole_reasoning("qwen3", text, {.enable_thinking = false}), (ReasoningResult{std::nullopt, text}));
  EXPECT_EQ(whole_reasoning("qwen3", "", {.enable_thinking = false}), (ReasoningResult{std::nullopt, ""}));
  EXPECT_EQ(whole_reasoning("qwen3", text, {.enable_thinking = true}), (ReasoningResult{"Paris is sunny.", " ok"}));
  EXPECT_EQ(whole_reasoning("deepseek_r1", text, {.enable_thinking = false}),
            (ReasoningResult{"Paris is sunny.", " ok"}));
  ReasoningOptions closed_in_prompt;
  closed_in_prompt.prompt_closes_reasoning = true;
  for (const std::string_view parser : kParsers) {
    EXPECT_EQ(whole_reasoning(parser, text, closed_in_prompt), (ReasoningResult{std::nullopt, text}));
  }
}

// A tag split across deltas reaches neither field; the bytes that may start one wait for the next delta.
TEST(ThinkReasoningParser, StreamsWithoutLeakingTags) {
  ThinkReasoningParser parser("qwen3", false);
  EXPECT_EQ(parser.feed("<thi"), ReasoningDelta{});
  EXPECT_EQ(parser.feed("nk>Let me see <"), (ReasoningDelta{"Let me see ", ""}));
  EXPECT_EQ(parser.feed("b> bold </"), (ReasoningDelta{"<b> bold ", ""}));
  EXPECT_EQ(parser.feed("thi"), ReasoningDelta{});
  EXPECT_TRUE(parser.in_reasoning());
  EXPECT_EQ(parser.feed("nk>\n\nAnswer"), (ReasoningDelta{"", "\n\nAnswer"}));
  EXPECT_FALSE(parser.in_reasoning());
  EXPECT_EQ(parser.feed(" </think>"), (ReasoningDelta{"", " </think>"}));
  EXPECT_EQ(parser.finish(), ReasoningDelta{});
  EXPECT_THROW(parser.feed("x"), std::logic_error);
  EXPECT_THROW(parser.finish(), std::logic_error);
}

// What the API layer counts in usage: a token is a reasoning token when it fed reasoning text.
TEST(ThinkReasoningParser, TellsWhichTokensWereReasoning) {
  ThinkReasoningParser parser("qwen3", false);
  struct Token {
    std::string_view text;
    bool in_reasoning;
    bool reasoning_token;
  };
  for (const Token& token :
       {Token{"<think>", true, false}, Token{"\n", true, true}, Token{"Let", true, true}, Token{" me", true, true},
        Token{"</think>", false, false}, Token{"\n\n", false, false}, Token{"Hi", false, false}}) {
    parser.feed(token.text);
    EXPECT_EQ(parser.in_reasoning(), token.in_reasoning) << token.text;
    EXPECT_EQ(parser.last_feed_was_reasoning(), token.reasoning_token) << token.text;
  }
  const auto off = make_reasoning_parser("qwen3", {.enable_thinking = false});
  off->feed("text");
  EXPECT_FALSE(off->in_reasoning());
  EXPECT_FALSE(off->last_feed_was_reasoning());
  EXPECT_TRUE(off->passes_through());
}

}  // namespace
}  // namespace serverd::parsers
