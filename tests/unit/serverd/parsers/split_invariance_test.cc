// The property every parser keeps: however the text is cut into deltas (at every byte, byte by byte, at
// random), the stream adds up to the whole response, ids included. Each corpus holds real model outputs
// of the family, text around and between calls, strings that quote markers and brackets, unicode, and
// malformed calls.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::expect_reasoning_split_invariant;
using testing::expect_split_invariant;

const std::vector<std::string> kHermes = {
    "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco\", "
    "\"date\": \"2024-10-01\"}}\n</tool_call>",
    "\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 🌧\"}}\n</tool_call>",
    "I'll check.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"s\": \"<tool_call> } </tool_call> \\\" "
    "{\"}}\n</tool_call>"
    "\n\nDone.",
    "<tool_call>\nnot json\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_",
    "Use <tool_calls> or </tool_call> as text; <tool_c",
    "<tool_call>{\"name\": \"f\", \"arguments\": {\"unterminated: 1}}</tool_call> more",
};

const std::vector<std::string> kLlama3Json = {
    "{\"name\": \"get_current_weather\", \"parameters\": {\"city\": \"San Francisco\", \"unit\": \"fahrenheit\"}}",
    "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"get_time\", "
    "\"arguments\": {\"zone\": \"CET\", \"q\": \"};{\"}}",
    "  \n<|python_tag|> {\"name\": \"f\", \"parameters\": {}} ;\n I called f.",
    "Here you go: {\"name\": \"f\", \"parameters\": {}}",
    "{\"name\": \"f\", \"parameters\": {\"a\": [1, 2}}",
    "{\"name\": \"f\", \"parameters\": {}}; {\"oops\": 1}; {\"name\": \"g\", \"parameters\": {}}",
    "<|python_tag|>brave_search.call(query=\"übung\")",
    "<|python_ta",
    "{ prose in braces }",
};

const std::vector<std::string> kMistral = {
    "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", \"format\": "
    "\"celsius\"}}]",
    "Checking both.[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"[TOOL_CALLS] ]}{\"}}, {\"name\": \"b\", "
    "\"arguments\": {\"ñ\": \"日本\"}}]\nThat is all.",
    "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"nom\": \"b\"}] trailing",
    "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}",
    "[TOOL_CALLS] []",
    "[TOOL_CALLS] [{\"name\": \"a\", \"argu",
    "no call [TOOL_CA",
};

const std::vector<std::string> kPythonic = {
    "[get_weather(city='San Francisco', metric='celsius'), get_weather(city='Seattle', metric='celsius')]",
    " [\n  search(query=\"a (b) [c] 'd' \\\" ) ]\", limit=3),\n  ping()\n,]\n\nThen I will answer.",
    "[f(a='''triple ) ] '' quoted''', b={'k': [1, -2.5, None, True]}, c=r'\\d')]",
    "[f(a=1), g(1)]",
    "[Note] this is prose",
    "[1, 2, 3]",
    "[f(a='unterminated)]",
    "[f(a=\"ünïcödé 🎉\")",
};

const std::vector<std::string> kReasoning = {
    "<think>\nOkay, the user wants the weather. I'll call get_weather.\n</think>\n\n<tool_call>\n{}\n</tool_call>",
    "Okay, so 9.11 vs 9.8.\n</think>\n\n9.8 is greater.",
    "<think>\nstill thinking, < not a tag, </thin not either",
    "pre<think>x<think>y</think>z<think>after</think>",
    "</think>",
    "über <thi",
    "",
};

// gpt-oss's harmony channels (openai_gptoss): every marker cut at every byte.
const std::vector<std::string> kHarmony = {
    "<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4.",
    "<|channel|>final<|message|>No thinking <|b|> here",
    "<|channel|>analysis<|message|>cut short <|en",
    "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f "
    "<|constrain|>json<|message|>{\"x\": 1}<|call|>",
    "plain <|start text",
    "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant to=functions.w<|channel|>commentary "
    "json<|message|>{\"c\": \"<|end|> \\u00e9\"}<|call|><|start|>assistant<|channel|>commentary "
    "to=functions.v <|constrain|>json<|message|>not json",
};

TEST(SplitInvariance, Hermes) {
  for (const std::string& text : kHermes) expect_split_invariant("hermes", text);
}

TEST(SplitInvariance, Llama3Json) {
  for (const std::string& text : kLlama3Json) expect_split_invariant("llama3_json", text);
}

TEST(SplitInvariance, Mistral) {
  for (const std::string& text : kMistral) expect_split_invariant("mistral", text);
}

TEST(SplitInvariance, Pythonic) {
  for (const std::string& text : kPythonic) expect_split_invariant("pythonic", text);
}

TEST(SplitInvariance, Reasoning) {
  for (const std::string& text : kReasoning) {
    expect_reasoning_split_invariant("qwen3", text);
    expect_reasoning_split_invariant("deepseek_r1", text);
    expect_reasoning_split_invariant("qwen3", text, {.enable_thinking = false});
    expect_reasoning_split_invariant("openai_gptoss", text);
  }
}

TEST(SplitInvariance, Harmony) {
  for (const std::string& text : kHarmony) {
    expect_reasoning_split_invariant("openai_gptoss", text);
    expect_reasoning_split_invariant("openai_gptoss", text, {.keep_function_calls = true});
    expect_reasoning_split_invariant("qwen3", text);
    expect_split_invariant("openai", text);
  }
}

// Every tool-call parser on every corpus: text written for one family is plain text to the others, and
// must stream the same way too.
TEST(SplitInvariance, EveryParserOnEveryFamilysText) {
  for (const std::string_view parser : tool_call_parser_names()) {
    for (const auto* corpus : {&kHermes, &kLlama3Json, &kMistral, &kPythonic, &kReasoning, &kHarmony}) {
      for (const std::string& text : *corpus) expect_split_invariant(parser, text);
    }
  }
}

// Seeded random texts made of the pieces the parsers look at (markers, brackets, quotes, escapes, call
// fragments, multi-byte characters), so that the property also meets orders no model would write.
TEST(SplitInvariance, RandomTextsOfMarkersAndBrackets) {
  static const std::vector<std::string_view> kPieces = {"<tool_call>",
                                                        "</tool_call>",
                                                        "[TOOL_CALLS]",
                                                        "<|python_tag|>",
                                                        "<think>",
                                                        "</think>",
                                                        "<tool_",
                                                        "</thi",
                                                        "{",
                                                        "}",
                                                        "[",
                                                        "]",
                                                        "(",
                                                        ")",
                                                        "\"",
                                                        "'",
                                                        "'''",
                                                        "\\",
                                                        ",",
                                                        ";",
                                                        ":",
                                                        "=",
                                                        " ",
                                                        "\n",
                                                        "é",
                                                        "🌍",
                                                        "\"name\": \"f\"",
                                                        "\"arguments\": {\"a\": 1}",
                                                        "\"parameters\": []",
                                                        "f(",
                                                        "a=1",
                                                        "x",
                                                        "True"};
  base::SplitMix64 random(2024);
  for (int round = 0; round < 150; ++round) {
    std::string text;
    const std::size_t pieces = 1 + random.next() % 24;
    for (std::size_t i = 0; i < pieces; ++i) text += kPieces[random.next() % kPieces.size()];
    for (const std::string_view parser : tool_call_parser_names()) expect_split_invariant(parser, text);
    expect_reasoning_split_invariant("qwen3", text);
  }
}

// The property has teeth: a parser that lost a held byte, or sent a tag early, would differ here. The
// whole responses of a few corpus entries, checked by value so that an invariant kept by two equally wrong
// results cannot pass.
TEST(SplitInvariance, WholeResponsesAreTheExpectedOnes) {
  EXPECT_EQ(testing::whole_tool_calls("hermes", kHermes[6]), (ToolParserResult{kHermes[6], {}}));
  EXPECT_EQ(testing::whole_tool_calls("llama3_json", kLlama3Json[7]), (ToolParserResult{kLlama3Json[7], {}}));
  EXPECT_EQ(testing::whole_tool_calls("mistral", kMistral[6]), (ToolParserResult{kMistral[6], {}}));
  EXPECT_EQ(testing::whole_reasoning("qwen3", kReasoning[5]), (ReasoningResult{"über <thi", std::nullopt}));
  const ToolParserResult hermes = testing::whole_tool_calls("hermes", kHermes[2]);
  ASSERT_EQ(hermes.calls.size(), 1u);
  EXPECT_EQ(hermes.calls[0].arguments, R"({"s": "<tool_call> } </tool_call> \" {"})");
  EXPECT_EQ(hermes.content, "I'll check.\nDone.");
}

}  // namespace
}  // namespace serverd::parsers
