// --tool-call-parser openai on what gpt-oss writes in the harmony format, alone and after the reasoning
// parser openai_gptoss, whole and streamed.
#include "serverd/parsers/openai_tool_parser.h"

#include <gtest/gtest.h>

#include "serverd/parsers/choice_parser.h"
#include "tests/unit/serverd/parsers/parser_test_support.h"

namespace serverd::parsers {
namespace {

using testing::calls_only;
using testing::expected_ids;
using testing::seeded_options;
using testing::whole_tool_calls;

const std::vector<std::string> kIds = expected_ids(CallIdStyle::kVllm, 3);

ToolParserResult openai(std::string_view text, ToolCallOptions options = seeded_options()) {
  return whole_tool_calls("openai", text, std::move(options));
}

// gpt-oss-20b asked for the weather with a get_weather tool: it thinks, then addresses the function on the
// commentary channel; <|call|> is an end-of-sequence token, so the text stops before it.
constexpr std::string_view kWeather =
    "<|channel|>analysis<|message|>User wants weather in Tokyo. Use get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"location\":\"Tokyo\",\"unit\":\"celsius\"}";

TEST(OpenAiToolParser, AMessageToAFunctionIsACall) {
  EXPECT_EQ(openai(kWeather), calls_only({{kIds[0], "get_weather", R"({"location": "Tokyo", "unit": "celsius"})"}}));
  // Ended by <|call|> in the text, and with the recipient after the role, as the template writes calls.
  EXPECT_EQ(openai("<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}<|call|>"),
            calls_only({{kIds[0], "lookup", R"({"q": 1})"}}));
}

// Arguments are loaded and dumped again with json.dumps' defaults, as vLLM's parser does: its spacing,
// non-ASCII escaped; text that is not JSON, or of another content type, passes on as written.
TEST(OpenAiToolParser, ArgumentsAreWrittenAsJsonDumpsWritesThem) {
  EXPECT_EQ(openai("<|channel|>commentary to=functions.f <|constrain|>json<|message|>\n{\"city\":\"Zürich\", "
                   "\"n\":[1,2.50]}\n"),
            calls_only({{kIds[0], "f", R"({"city": "Z\u00fcrich", "n": [1, 2.5]})"}}));
  EXPECT_EQ(openai("<|channel|>commentary to=functions.f<|message|>{\"a\":true}"),
            calls_only({{kIds[0], "f", R"({"a": true})"}}));
  EXPECT_EQ(openai("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": "),
            calls_only({{kIds[0], "f", R"({"a": )"}}));
  EXPECT_EQ(openai("<|channel|>commentary to=functions.run code<|message|>print( 1 )"),
            calls_only({{kIds[0], "run", "print( 1 )"}}));
}

TEST(OpenAiToolParser, SeveralCallsAndParallelToolCallsFalse) {
  const std::string two =
      "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|>"
      "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{\"x\": 2}";
  EXPECT_EQ(openai(two), calls_only({{kIds[0], "a", "{}"}, {kIds[1], "b", R"({"x": 2})"}}));
  EXPECT_EQ(openai(two, seeded_options(7, false)), calls_only({{kIds[0], "a", "{}"}}));
}

// Final and preamble (commentary without a recipient) messages are content; analysis and messages to the
// built-in tools are not; headers and end markers never are.
TEST(OpenAiToolParser, WhatIsContentAndWhatIsDropped) {
  EXPECT_EQ(openai("<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>4."),
            (ToolParserResult{"4.", {}}));
  EXPECT_EQ(openai("<|channel|>commentary<|message|>Checking the weather.<|end|><|start|>assistant<|channel|>"
                   "commentary to=functions.w <|constrain|>json<|message|>{}"),
            (ToolParserResult{"Checking the weather.", {{kIds[0], "w", "{}"}}}));
  EXPECT_EQ(openai("<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"}<|call|>"),
            (ToolParserResult{"", {}}));
  EXPECT_EQ(openai("<|channel|>commentary to=functions.<|message|>{}"), (ToolParserResult{"", {}}));
  // A model that ignored the format: its text is content.
  EXPECT_EQ(openai("Just text."), (ToolParserResult{"Just text.", {}}));
}

ChoiceParser gptoss_with_openai() {
  return ChoiceParser(make_reasoning_parser("openai_gptoss", {.keep_function_calls = true}),
                      make_tool_call_parser("openai", seeded_options()));
}

// Both parsers, as `--reasoning-parser openai_gptoss --tool-call-parser openai` runs them: the analysis is
// reasoning, the call a call, and nothing of the call reaches content; the same at every cut.
TEST(OpenAiToolParser, AfterTheReasoningParserTheAnalysisIsReasoningAndTheCallACall) {
  ChoiceParser whole = gptoss_with_openai();
  whole.feed(kWeather);
  whole.finish();
  const ChoiceResult expected{"User wants weather in Tokyo. Use get_weather.",
                              std::nullopt,
                              {{kIds[0], "get_weather", R"({"location": "Tokyo", "unit": "celsius"})"}}};
  EXPECT_EQ(whole.result(), expected);
  EXPECT_TRUE(whole.made_tool_calls());
  for (std::size_t cut = 0; cut <= kWeather.size(); ++cut) {
    ChoiceParser streamed = gptoss_with_openai();
    streamed.feed(kWeather.substr(0, cut));
    streamed.feed(kWeather.substr(cut));
    streamed.finish();
    EXPECT_EQ(streamed.result(), expected) << "cut at " << cut;
  }
  // Without keep_function_calls the reasoning parser passes only the arguments' text on: no call.
  ChoiceParser stripped(make_reasoning_parser("openai_gptoss"), make_tool_call_parser("openai", seeded_options()));
  stripped.feed(kWeather);
  stripped.finish();
  EXPECT_TRUE(stripped.result().calls.empty());
}

}  // namespace
}  // namespace serverd::parsers
