// What the server's tool and reasoning flags make of a chat request: vLLM's 400 for "auto" without them,
// the tools the template sees, special tokens kept for parsers that need them, and parsers per choice.
#include "serverd/api/chat_parsing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"

namespace serverd::api {
namespace {

ChatRequest with_tools(ToolChoice choice) {
  ChatRequest request;
  request.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
  request.tool_choice = choice;
  return request;
}

ChatParserOptions auto_tools(std::string parser) {
  ChatParserOptions options;
  options.enable_auto_tool_choice = true;
  options.tool_call_parser = std::move(parser);
  return options;
}

TEST(ChatParsing, AutoNeedsBothFlags) {
  ChatParserOptions parser_only;
  parser_only.tool_call_parser = "hermes";
  for (const ChatParserOptions& options : {ChatParserOptions{}, parser_only}) {
    try {
      check_tool_choice(with_tools(ToolChoice::kAuto), options);
      ADD_FAILURE() << "accepted";
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().message,
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
      EXPECT_EQ(e.error().param, "tool_choice");
    }
  }
  EXPECT_NO_THROW(check_tool_choice(with_tools(ToolChoice::kAuto), auto_tools("hermes")));
  EXPECT_NO_THROW(check_tool_choice(with_tools(ToolChoice::kNone), ChatParserOptions{}));
}

TEST(ChatParsing, ToolChoiceNoneShowsTheToolsUnlessExcluded) {
  ChatParserOptions options;
  EXPECT_EQ(template_tools(with_tools(ToolChoice::kNone), options), with_tools(ToolChoice::kNone).tools_json);
  options.exclude_tools_when_tool_choice_none = true;
  EXPECT_EQ(template_tools(with_tools(ToolChoice::kNone), options), "");
  EXPECT_EQ(template_tools(with_tools(ToolChoice::kAuto), options), with_tools(ToolChoice::kAuto).tools_json);
}

TEST(ChatParsing, SpecialTokensAreKeptOnlyWhenAParserThatNeedsThemReadsCalls) {
  EXPECT_TRUE(parser_needs_special_tokens(with_tools(ToolChoice::kAuto), auto_tools("hermes")));
  EXPECT_FALSE(parser_needs_special_tokens(with_tools(ToolChoice::kAuto), auto_tools("llama3_json")));
  EXPECT_FALSE(parser_needs_special_tokens(with_tools(ToolChoice::kNone), auto_tools("hermes")));
}

// gpt-oss's harmony markers are special tokens: its reasoning parser needs them in every request, tools or
// not; structured outputs then wait for the final channel rather than </think>.
TEST(ChatParsing, HarmonyKeepsSpecialTokensAndEndsAtTheFinalChannel) {
  ChatParserOptions options;
  options.reasoning_parser = "openai_gptoss";
  EXPECT_TRUE(parser_needs_special_tokens(ChatRequest{}, options));
  const ChatParsing parsing = chat_parsing(ChatRequest{}, options, "<|start|>assistant");
  EXPECT_TRUE(parsing.starts_in_reasoning);
  EXPECT_EQ(parsing.reasoning_end, "<|channel|>final<|message|>");
  options.reasoning_parser = "qwen3";
  EXPECT_FALSE(parser_needs_special_tokens(ChatRequest{}, options));
  EXPECT_EQ(chat_parsing(ChatRequest{}, options, "").reasoning_end, "</think>");
}

TEST(ChatParsing, ParsersFollowTheFlagsAndTheRequest) {
  EXPECT_FALSE(chat_parsing(with_tools(ToolChoice::kNone), auto_tools("hermes"), "").make_parser);

  const ChatParsing tools = chat_parsing(with_tools(ToolChoice::kAuto), auto_tools("hermes"), "");
  ASSERT_TRUE(tools.make_parser);
  EXPECT_TRUE(tools.auto_tools);
  EXPECT_FALSE(tools.reasoning);
  auto parser = tools.make_parser();
  parser->feed("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  parser->finish();
  EXPECT_TRUE(parser->made_tool_calls());

  ChatParserOptions reasoning;
  reasoning.reasoning_parser = "qwen3";
  ChatRequest plain;
  const ChatParsing thinking = chat_parsing(plain, reasoning, "<|im_start|>assistant\n");
  ASSERT_TRUE(thinking.make_parser);
  EXPECT_TRUE(thinking.reasoning);
  EXPECT_FALSE(thinking.auto_tools);
  auto split = thinking.make_parser();
  split->feed("a</think>b");
  split->finish();
  EXPECT_EQ(split->result().reasoning, "a");

  // A prompt that closed the think block: everything is content.
  auto closed = chat_parsing(plain, reasoning, "<think>\n\n</think>\n\n").make_parser();
  closed->feed("a</think>b");
  closed->finish();
  EXPECT_EQ(closed->result().reasoning, std::nullopt);
  EXPECT_EQ(closed->result().content, "a</think>b");
}

}  // namespace
}  // namespace serverd::api
