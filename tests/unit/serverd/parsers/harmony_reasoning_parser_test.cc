// --reasoning-parser openai_gptoss on what gpt-oss writes in the harmony format, whole and streamed.
#include "serverd/parsers/harmony_reasoning_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::whole_reasoning;

ReasoningResult harmony(std::string_view text) {
  return whole_reasoning("openai_gptoss", text);
}

// The usual answer: an analysis message, then the final one (the prompt ended with <|start|>assistant, and
// <|return|> is an end-of-sequence token that never reaches the text).
TEST(HarmonyReasoningParser, AnalysisIsReasoningAndFinalIsContent) {
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>User asks 2+2. Simple: 4.<|end|>"
                    "<|start|>assistant<|channel|>final<|message|>2 + 2 = **4**."),
            (ReasoningResult{"User asks 2+2. Simple: 4.", "2 + 2 = **4**."}));
  // Two analysis messages add up; the final header may carry a constraint.
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
                    "<|start|>assistant<|channel|>final <|constrain|>json<|message|>{\"x\": 1}"),
            (ReasoningResult{"ab", "{\"x\": 1}"}));
}

// Low reasoning effort may skip the analysis channel: no reasoning text, all content.
TEST(HarmonyReasoningParser, WithoutAnalysisEverythingIsContent) {
  EXPECT_EQ(harmony("<|channel|>final<|message|>Hello! How can I help?"),
            (ReasoningResult{"", "Hello! How can I help?"}));
  EXPECT_EQ(harmony("<|channel|>final<|message|>"), (ReasoningResult{"", std::nullopt}));
  // A model that ignored the format: its text is content.
  EXPECT_EQ(harmony("Plain answer <|not a marker|>"), (ReasoningResult{"", "Plain answer <|not a marker|>"}));
}

// max_tokens reached while thinking: the reasoning so far, content null. A marker cut in half is text where
// it was cut; a header cut short is dropped.
TEST(HarmonyReasoningParser, CutShortInsideTheAnalysis) {
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>We need to compare 9.11 and"),
            (ReasoningResult{"We need to compare 9.11 and", std::nullopt}));
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>So 9.8 wins<|en"),
            (ReasoningResult{"So 9.8 wins<|en", std::nullopt}));
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>done<|end|><|start|>assistant<|chan"),
            (ReasoningResult{"done", std::nullopt}));
  EXPECT_EQ(harmony("<|channel|>analy"), (ReasoningResult{"", std::nullopt}));
  EXPECT_EQ(harmony(""), (ReasoningResult{"", std::nullopt}));
}

// The commentary channel (preambles, tool calls) is content: its text only, the header with any recipient
// dropped. Tool calls are not read by this parser.
TEST(HarmonyReasoningParser, CommentaryIsContent) {
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Tokyo\"}"),
            (ReasoningResult{"Need the weather.", "{\"city\":\"Tokyo\"}"}));
}

// Text that looks like a marker but is not one stays in its field; only real markers are structure.
TEST(HarmonyReasoningParser, OnlyMarkersAreStructure) {
  EXPECT_EQ(harmony("<|channel|>analysis<|message|>a <|b|> <|en d|><|end|><|start|>assistant<|channel|>final"
                    "<|message|>x <|start| y"),
            (ReasoningResult{"a <|b|> <|en d|>", "x <|start| y"}));
}

// A marker split across deltas reaches neither field; the bytes that may start one wait for the next delta.
TEST(HarmonyReasoningParser, StreamsWithoutLeakingMarkers) {
  HarmonyReasoningParser parser;
  EXPECT_TRUE(parser.in_reasoning());
  EXPECT_EQ(parser.feed("<|chan"), ReasoningDelta{});
  EXPECT_EQ(parser.feed("nel|>analysis<|mess"), ReasoningDelta{});
  EXPECT_EQ(parser.feed("age|>Think <"), (ReasoningDelta{"Think ", ""}));
  EXPECT_EQ(parser.feed("|e"), ReasoningDelta{});
  EXPECT_EQ(parser.feed("nd|><|start|>assistant<|channel|>final<|message"), ReasoningDelta{});
  EXPECT_TRUE(parser.in_reasoning());
  EXPECT_EQ(parser.feed("|>Answer"), (ReasoningDelta{"", "Answer"}));
  EXPECT_FALSE(parser.in_reasoning());
  EXPECT_EQ(parser.feed("<|ret"), ReasoningDelta{});
  EXPECT_EQ(parser.finish(), (ReasoningDelta{"", "<|ret"}));
  EXPECT_THROW(parser.feed("x"), std::logic_error);
  EXPECT_THROW(parser.finish(), std::logic_error);
}

// What the API layer counts in usage: a token is a reasoning token when it fed analysis text.
TEST(HarmonyReasoningParser, TellsWhichTokensWereReasoning) {
  HarmonyReasoningParser parser;
  struct Token {
    std::string_view text;
    bool in_reasoning;
    bool reasoning_token;
  };
  for (const Token& token :
       {Token{"<|channel|>", true, false}, Token{"analysis", true, false}, Token{"<|message|>", true, false},
        Token{"Let", true, true}, Token{" me", true, true}, Token{"<|end|>", true, false},
        Token{"<|start|>", true, false}, Token{"assistant", true, false}, Token{"<|channel|>", true, false},
        Token{"final", true, false}, Token{"<|message|>", false, false}, Token{"Hi", false, false}}) {
    parser.feed(token.text);
    EXPECT_EQ(parser.in_reasoning(), token.in_reasoning) << token.text;
    EXPECT_EQ(parser.last_feed_was_reasoning(), token.reasoning_token) << token.text;
  }
}

// The markers are special tokens: the text must be decoded with them kept, and structured outputs start
// after the final channel's header.
TEST(HarmonyReasoningParser, NeedsSpecialTokensAndEndsAtTheFinalHeader) {
  const auto parser = make_reasoning_parser("openai_gptoss");
  EXPECT_TRUE(parser->needs_special_tokens());
  EXPECT_FALSE(parser->passes_through());
  EXPECT_EQ(parser->end_marker(), "<|channel|>final<|message|>");
  EXPECT_FALSE(make_reasoning_parser("qwen3")->needs_special_tokens());
  EXPECT_EQ(make_reasoning_parser("deepseek_r1")->end_marker(), "</think>");
}

}  // namespace
}  // namespace serverd::parsers
