// Request bodies to structs: types, ranges and the fields this server refuses, each error naming its field
// in vLLM's words; prompts built from them with vLLM's context-length messages.
#include "serverd/api/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"
#include "serverd/api/prompts.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

rapidjson::Document parse(std::string_view body) {
  rapidjson::Document document;
  parse_request_body(body, document);
  return document;
}

// The ApiError thrown by `fn`.
template <typename Fn>
ApiError error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException";
  return {};
}

ApiError completion_error(std::string_view body) {
  return error_of([&] { parse_completion_request(parse(body), ParseLimits{}); });
}

ApiError chat_error(std::string_view body) {
  return error_of([&] { parse_chat_request(parse(body), ParseLimits{}); });
}

TEST(ParseBody, RefusesWhatIsNotAJsonObject) {
  EXPECT_THAT(error_of([] { parse("{\"prompt\": "); }).message, HasSubstr("Invalid JSON"));
  EXPECT_THAT(error_of([] { parse("[1, 2]"); }).message, HasSubstr("must be a JSON object"));
  EXPECT_THAT(error_of([] { parse("{\"prompt\": \"\xFF\"}"); }).message, HasSubstr("Invalid JSON"));
  const std::string deep = "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_THAT(error_of([&] { parse(deep); }).message, HasSubstr("deeper than"));
}

// A key given twice means its last value, as Python (and so vLLM) reads it, at every depth; a reader that
// kept the first would serve what a proxy in front of it saw as out of range.
TEST(ParseBody, RepeatedKeysKeepTheirLastValue) {
  const ParseLimits limits;
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 2, "max_tokens": 18446744073709551616})").param,
            "max_tokens");
  const auto r =
      parse_completion_request(parse(R"({"prompt": "a", "max_tokens": 99, "prompt": "b", "max_tokens": 3})"), limits);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "b");
  EXPECT_EQ(r.common.max_tokens, 3u);
  const auto nested = parse(R"({"o": {"k": 1, "j": 0, "k": 2}, "l": [{"k": "a", "k": "b"}]})");
  ASSERT_EQ(nested["o"].MemberCount(), 2u);
  EXPECT_STREQ(nested["o"].MemberBegin()->name.GetString(), "k");  // where the key first appeared
  EXPECT_EQ(nested["o"]["k"].GetInt(), 2);
  EXPECT_STREQ(nested["l"][0]["k"].GetString(), "b");
}

TEST(ParseCompletion, PromptForms) {
  const ParseLimits limits;
  auto r = parse_completion_request(parse(R"({"prompt": "hi"})"), limits);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  r = parse_completion_request(parse(R"({"prompt": ["a", "b"]})"), limits);
  EXPECT_EQ(r.prompts.size(), 2u);
  r = parse_completion_request(parse(R"({"prompt": [1, 2, 3]})"), limits);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_THAT(r.prompts[0].tokens, ElementsAre(1, 2, 3));
  r = parse_completion_request(parse(R"({"prompt": [[1], [2, 3]]})"), limits);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[1].is_tokens);
  EXPECT_EQ(completion_error(R"({"prompt": ["a", [1]]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt": [1, -2]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt": ""})").message,
            "Either prompt or prompt_embeds must be provided and non-empty.");
  EXPECT_EQ(completion_error(R"({"model": "m"})").param, "prompt");
}

TEST(ParseCompletion, DefaultsAndUnknownFields) {
  const auto r = parse_completion_request(parse(R"({"prompt": "x", "whatever": {"deep": [1]}, "user": "u"})"), {});
  EXPECT_EQ(r.common.n, 1u);
  EXPECT_FALSE(r.common.max_tokens.has_value());  // 16 is applied with the prompt
  EXPECT_TRUE(r.common.add_special_tokens);
  EXPECT_TRUE(r.common.skip_special_tokens);
  EXPECT_FALSE(r.logprobs.has_value());
}

TEST(ParseCompletion, RangesAndTypesNameTheirField) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;  // a part of it
  };
  const Case cases[] = {
      {R"({"prompt": "x", "n": 0})", "n", "n must be at least 1, got 0."},
      {R"({"prompt": "x", "n": 1000})", "n", "n must be at most 128, got 1000."},
      {R"({"prompt": "x", "n": 1.5})", "n", "fractional"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "max_tokens must be at least 1, got 0."},
      {R"({"prompt": "x", "max_tokens": "5"})", "max_tokens", "must be an integer, got a string"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number"},
      {R"({"prompt": "x", "stream": 1})", "stream", "must be a boolean"},
      {R"({"prompt": "x", "stop": ""})", "stop", "stop cannot contain an empty string."},
      {R"({"prompt": "x", "stop": [1]})", "stop", "string or an array of strings"},
      {R"({"prompt": "x", "stop_token_ids": ["a"]})", "stop_token_ids", "integer"},
      {R"({"prompt": "x", "min_tokens": -1})", "min_tokens", "greater than or equal to 0"},
      {R"({"prompt": "x", "max_tokens": 2, "min_tokens": 3})", "min_tokens", "less than or equal to max_tokens=2"},
      {R"({"prompt": "x", "logprobs": -3})", "logprobs", "`logprobs` must be a positive value or -1."},
      {R"({"prompt": "x", "prompt_logprobs": -2})", "prompt_logprobs",
       "`prompt_logprobs` must be a positive value or -1."},
      {R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})", "prompt_logprobs",
       "`prompt_logprobs` are not available when `stream=True`."},
      {R"({"prompt": "x", "prompt_logprobs": -1, "stream": true})", "prompt_logprobs", "not available"},
      {R"({"prompt": "x", "prompt_logprobs": "2"})", "prompt_logprobs", "must be an integer, got a string"},
      {R"({"prompt": "x", "return_tokens_as_token_ids": 1})", "return_tokens_as_token_ids", "must be a boolean"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias", "token ids"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "Stream options can only be defined when `stream=True`."},
      {R"({"prompt": "x", "suffix": "y"})", "suffix", "suffix is not currently supported"},
      {R"({"prompt": "x", "best_of": 2})", "best_of", "not supported"},
      {R"({"prompt": "x", "use_beam_search": true})", "use_beam_search", "not supported"},
      {R"({"prompt": "x", "response_format": {"type": "structural_tag"}})", "response_format", "not supported"},
      {R"({"prompt": "x", "truncate_prompt_tokens": 0})", "truncate_prompt_tokens", "-1 or at least 1"},
      {R"({"prompt": "x", "seed": 1e30})", "seed", "integer"},
  };
  for (const Case& c : cases) {
    const ApiError error = completion_error(c.body);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_THAT(error.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(ParseCompletion, AcceptsWhatVllmAccepts) {
  const auto r = parse_completion_request(
      parse(R"({"prompt": "x", "n": 2.0, "best_of": 2, "response_format": {"type": "text"}, "seed": -1,
                "stream": true, "stream_options": {"include_usage": true}, "stop": ["a", "b"], "logprobs": 0,
                "logit_bias": {"5": -100}, "allowed_token_ids": [], "max_tokens": null})"),
      {});
  EXPECT_EQ(r.common.n, 2u);
  EXPECT_EQ(r.common.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_TRUE(r.common.include_usage);
  EXPECT_THAT(r.common.stop, ElementsAre("a", "b"));
  EXPECT_EQ(r.logprobs, 0);
  ASSERT_EQ(r.common.logit_bias.size(), 1u);
  EXPECT_EQ(r.common.logit_bias[0].first, 5);
  // echo with max_tokens 0 asks for the prompt alone
  EXPECT_EQ(parse_completion_request(parse(R"({"prompt": "x", "echo": true, "max_tokens": 0})"), {}).common.max_tokens,
            0u);
  EXPECT_FALSE(r.common.prompt_logprobs.has_value());
  EXPECT_FALSE(r.common.return_tokens_as_token_ids.has_value());
}

// The prompt's log-probabilities (vLLM's extension): echo with logprobs, prompt_logprobs of -1 or more (0
// even when streamed, which shows none), -1 logprobs; --max-logprobs is checked later, with the vocabulary.
TEST(ParseCompletion, PromptLogprobsEchoAndTokenIds) {
  const auto r = parse_completion_request(
      parse(
          R"({"prompt": "x", "echo": true, "logprobs": -1, "prompt_logprobs": 30, "return_tokens_as_token_ids": true})"),
      {});
  EXPECT_TRUE(r.common.echo);
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_EQ(r.common.prompt_logprobs, 30);
  EXPECT_EQ(r.common.return_tokens_as_token_ids, true);
  EXPECT_EQ(parse_completion_request(parse(R"({"prompt": "x", "prompt_logprobs": 0, "stream": true})"), {})
                .common.prompt_logprobs,
            0);
  EXPECT_EQ(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": -1,
                                         "logprobs": true, "top_logprobs": -1})"),
                               {})
                .common.prompt_logprobs,
            -1);
}

TEST(ParseChat, MessagesAreNormalisedToTextContent) {
  const auto r = parse_chat_request(
      parse(
          R"({"messages": [{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                              {"role": "assistant", "content": null, "name": "x"},
                              {"role": "user", "content": "hi"}]})"),
      {});
  // Every message has a content, in both of vLLM's formats; null reads as empty.
  EXPECT_EQ(
      r.messages.json,
      R"([{"role":"system","content":"a\nb"},{"role":"assistant","content":"","name":"x"},{"role":"user","content":"hi"}])");
  EXPECT_EQ(r.messages.openai_json,
            R"([{"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},)"
            R"({"role":"assistant","content":[],"name":"x"},{"role":"user","content":[{"type":"text","text":"hi"}]}])");
  EXPECT_EQ(r.messages.last_role, "user");
  EXPECT_EQ(r.messages.last_content, "hi");
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.common.add_special_tokens);
}

TEST(ParseChat, DeveloperIsSystemAndToolContentStaysAString) {
  const auto r =
      parse_chat_request(parse(R"({"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"},
                             {"role": "tool", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]}]})"),
                         {});
  EXPECT_EQ(r.messages.json,
            R"([{"role":"system","content":"d"},{"role":"user","content":"u"},{"role":"tool","content":"1\n2"}])");
  EXPECT_EQ(
      r.messages.openai_json,
      R"([{"role":"system","content":[{"type":"text","text":"d"}]},{"role":"user","content":[{"type":"text","text":"u"}]},)"
      R"({"role":"tool","content":"1\n2"}])");
  EXPECT_EQ(r.messages.last_role, "tool");
  EXPECT_EQ(r.messages.last_content, "1\n2");
}

TEST(ParseChat, RequestTemplatesAreReadForTheServiceToJudge) {
  auto r =
      parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{ 1 }}"})"), {});
  EXPECT_EQ(r.chat_template, "{{ 1 }}");
  r = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
                                   "chat_template_kwargs": {"chat_template": "{{ 2 }}", "enable_thinking": true}})"),
                         {});
  EXPECT_EQ(r.chat_template, "{{ 2 }}");
  EXPECT_EQ(r.template_kwargs_json, R"({"enable_thinking":true})");  // the template is no template variable
  EXPECT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}]})"), {}).chat_template);
}

TEST(ParseChat, RefusalsNameTheirField) {
  struct Case {
    const char* body;
    std::optional<std::string> param;
    const char* message;
  };
  const Case cases[] = {
      {R"({"messages": []})", "messages", "must not be empty"},
      {R"({"messages": "hi"})", "messages", "array"},
      {R"({"messages": [{"content": "hi"}]})", "messages", "role"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", "messages",
       "'image_url' are not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false, "top_logprobs": 2})", "top_logprobs",
       "when using `top_logprobs`, `logprobs` must be set to true."},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": -1})", "top_logprobs",
       "when using `top_logprobs`, `logprobs` must be set to true."},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": -2})", "top_logprobs",
       "`top_logprobs` must be a positive value or -1."},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 2, "stream": true})", "prompt_logprobs",
       "`prompt_logprobs` are not available when `stream=True`."},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "function"}})",
       "tool_choice", "A named `tool_choice` must be"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"})", "tool_choice",
       "When using `tool_choice`, `tools` must be set."},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", "tools", "must not be an empty array"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template": 1})", "chat_template", "string"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"chat_template": 1}})",
       "chat_template_kwargs", "must be a string"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages", "needs a 'text' string"},
      {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true, "add_generation_prompt": true})",
       std::nullopt, "Cannot set both `continue_final_message` and `add_generation_prompt` to True."},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0, "max_tokens": 5})",
       "max_completion_tokens", "at least 1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", "chat_template_kwargs",
       "object"},
  };
  for (const Case& c : cases) {
    const ApiError error = chat_error(c.body);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_THAT(error.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(ParseChat, ToolChoiceNoneSendsToolsToTheTemplate) {
  const auto r = parse_chat_request(
      parse(
          R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": "none", "max_tokens": 7, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3,
                "continue_final_message": true, "chat_template_kwargs": {"enable_thinking": false}})"),
      {});
  EXPECT_EQ(r.tools_json, R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(r.common.max_tokens, 9u);  // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FALSE(r.add_generation_prompt);  // continue_final_message alone turns it off
  EXPECT_EQ(r.template_kwargs_json, R"({"enable_thinking":false})");
  EXPECT_EQ(r.enable_thinking, false);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r.parallel_tool_calls);
}

TEST(ParseChat, ToolsWithoutToolChoiceMeanAuto) {
  const auto r = parse_chat_request(
      parse(
          R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}],
                "parallel_tool_calls": false})"),
      {});
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);  // the service decides whether it can be honoured
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.enable_thinking, std::nullopt);
  EXPECT_EQ(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}]})"), {}).tool_choice,
            ToolChoice::kNone);
}

// The history as vLLM hands it to the template: null or missing content is "", arguments given as JSON text
// are parsed, anything else becomes {}, and an empty tool_calls list is dropped.
TEST(ParseChat, ReplayedToolCallsReachTheTemplateAsVllmGivesThem) {
  const auto r = parse_chat_request(parse(R"({"messages": [
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": [1, 2]}"}},
        {"id": "b", "type": "function", "function": {"arguments": "not json", "name": "g"}},
        {"id": "c", "type": "function", "function": {"name": "h"}}]},
      {"role": "tool", "tool_call_id": "a"},
      {"role": "assistant", "content": "done", "tool_calls": []}]})"),
                                    {});
  EXPECT_EQ(r.messages.json, R"([{"role":"assistant","content":"","tool_calls":[)"
                             R"({"id":"a","type":"function","function":{"name":"f","arguments":{"x":[1,2]}}},)"
                             R"({"id":"b","type":"function","function":{"name":"g","arguments":{}}},)"
                             R"({"id":"c","type":"function","function":{"name":"h","arguments":{}}}]},)"
                             R"({"role":"tool","content":"","tool_call_id":"a"},)"
                             R"({"role":"assistant","content":"done"}])");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}]}]})").message,
            "Each of a message's 'tool_calls' needs a 'function' object");
}

class PromptsTest : public ::testing::Test {
 protected:
  serverd_test::TestModel model_;
  ModelInfo info_ = model_.info(32);
};

TEST_F(PromptsTest, ContextLengthErrorsUseVllmWording) {
  const ApiError long_prompt = error_of([&] { resolve_max_tokens(std::nullopt, 16, 40, info_); });
  EXPECT_EQ(long_prompt.message,
            "This model's maximum context length is 32 tokens. However, your request has 40 input tokens. Please "
            "reduce the length of the input messages.");
  EXPECT_EQ(long_prompt.param, "input_tokens");
  const ApiError too_many = error_of([&] { resolve_max_tokens(30, 16, 10, info_); });
  EXPECT_EQ(too_many.message,
            "'max_tokens' or 'max_completion_tokens' is too large: 30. This model's maximum context length is 32 "
            "tokens and your request has 10 input tokens (30 > 32 - 10).");
  EXPECT_EQ(too_many.param, "max_tokens");
  EXPECT_EQ(resolve_max_tokens(std::nullopt, std::nullopt, 10, info_), 22u);  // chat: the rest of the context
  EXPECT_EQ(resolve_max_tokens(std::nullopt, 16, 10, info_), 16u);
  info_.defaults.max_tokens = 5;  // generation_config's max_new_tokens caps it
  EXPECT_EQ(resolve_max_tokens(std::nullopt, std::nullopt, 10, info_), 5u);
}

TEST_F(PromptsTest, CompletionPromptsAreTokenizedOrChecked) {
  auto request = parse_completion_request(parse(R"({"prompt": ["ab", "c"]})"), {});
  auto prompts = build_completion_prompts(request, info_);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_THAT(prompts[0].tokens, ElementsAre('a', 'b'));
  request = parse_completion_request(parse(R"({"prompt": [1, 999]})"), {});
  EXPECT_EQ(error_of([&] { build_completion_prompts(request, info_); }).message, "Token id 999 is out of vocabulary");
  request = parse_completion_request(parse(R"({"prompt": "abcdef", "truncate_prompt_tokens": 2})"), {});
  EXPECT_THAT(build_completion_prompts(request, info_)[0].tokens, ElementsAre('e', 'f'));
}

TEST_F(PromptsTest, ChatPromptsGoThroughTheTemplate) {
  const auto request = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "Hi"}],
                                    "chat_template_kwargs": {"enable_thinking": false}})"),
                                          {});
  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  inputs.template_kwargs_json = request.template_kwargs_json;
  const auto prompt = build_chat_prompt(inputs, model_.info(256), {});
  EXPECT_EQ(prompt.text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(prompt.tokens.front(), serverd_test::kImStart);
}

TEST_F(PromptsTest, ContinueFinalMessageLeavesTheLastMessageOpen) {
  const auto request = parse_chat_request(
      parse(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel "}],
                "continue_final_message": true})"),
      {});
  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  inputs.add_generation_prompt = request.add_generation_prompt;
  inputs.continue_final_message = true;
  EXPECT_EQ(build_chat_prompt(inputs, model_.info(256), {}).text,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel ");
}

TEST_F(PromptsTest, TemplateErrorsAndMissingTemplatesAreBadRequests) {
  const auto request = parse_chat_request(parse(R"({"messages": [{"role": "forbidden", "content": "x"}]})"), {});
  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  EXPECT_EQ(error_of([&] { build_chat_prompt(inputs, model_.info(256), {}); }).message,
            "Role forbidden is not allowed");
  auto no_template = model_.info(256);
  no_template.chat_template = nullptr;
  EXPECT_THAT(error_of([&] { build_chat_prompt(inputs, no_template, {}); }).message,
              HasSubstr("default chat template is no longer allowed"));
}

TEST_F(PromptsTest, SamplingTakesTheRequestThenTheModelDefaults) {
  info_.defaults.temperature = 0.7f;
  info_.defaults.top_k = 20;
  auto request = parse_completion_request(parse(R"({"prompt": "x", "top_k": 5})"), {});
  const auto p = build_sampling(request.common, -1, info_);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  request = parse_completion_request(parse(R"({"prompt": "x", "temperature": -1})"), {});
  const ApiError error = error_of([&] { build_sampling(request.common, -1, info_); });
  EXPECT_EQ(error.param, "temperature");
  request = parse_completion_request(parse(R"({"prompt": "x", "logit_bias": {"100000": 1}})"), {});
  EXPECT_EQ(error_of([&] { build_sampling(request.common, -1, info_); }).param, "logit_bias");
}

}  // namespace
}  // namespace serverd::api

namespace serverd::api {
namespace {

TEST(ParseChat, RequiredAndNamedToolChoicesAreRead) {
  const std::string tools = R"("messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}])";
  rapidjson::Document body;
  parse_request_body("{" + tools + R"(, "tool_choice": "required"})", body);
  EXPECT_EQ(parse_chat_request(body, ParseLimits{}).tool_choice, ToolChoice::kRequired);
  parse_request_body("{" + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})", body);
  const ChatRequest named = parse_chat_request(body, ParseLimits{});
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tool_choice_name, "f");
}

}  // namespace
}  // namespace serverd::api
