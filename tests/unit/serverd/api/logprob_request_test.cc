// What a request asks of log-probabilities, as vLLM resolves it: echo's default for prompt_logprobs on each
// endpoint, what a streamed response leaves out (and so the engine does not compute), -1 as the vocabulary,
// --max-logprobs with vLLM's messages, and return_tokens_as_token_ids from the request or the server.
#include "serverd/api/logprob_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

class LogprobRequestTest : public ::testing::Test {
 protected:
  LogprobPlan completion(std::string_view body, LogprobLimits limits = {}) {
    rapidjson::Document d;
    parse_request_body(body, d);
    return plan_completion_logprobs(parse_completion_request(d, {}), limits, info_);
  }
  LogprobPlan chat(std::string_view body, LogprobLimits limits = {}) {
    rapidjson::Document d;
    parse_request_body(body, d);
    return plan_chat_logprobs(parse_chat_request(d, {}), limits, info_);
  }
  ApiError completion_error(std::string_view body, LogprobLimits limits = {}) {
    try {
      completion(body, limits);
    } catch (const ApiException& e) {
      return e.error();
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }

  serverd_test::TestModel model_;
  ModelInfo info_ = model_.info();
  std::size_t vocab_ = model_.tokenizer.vocab_size();
};

TEST_F(LogprobRequestTest, CompletionsEchoAsksForThePromptsAsManyAsLogprobs) {
  auto plan = completion(R"({"prompt": "x", "echo": true, "logprobs": 3})");
  EXPECT_EQ(plan.sampled, 3u);
  EXPECT_EQ(plan.prompt, 3u);
  EXPECT_TRUE(plan.echo_prompt);
  EXPECT_TRUE(plan.prompt_field);
  // Streamed: no prompt_logprobs field, but the echoed chunk leads with them.
  plan = completion(R"({"prompt": "x", "echo": true, "logprobs": 3, "stream": true})");
  EXPECT_EQ(plan.prompt, 3u);
  EXPECT_TRUE(plan.echo_prompt);
  EXPECT_FALSE(plan.prompt_field);
  // prompt_logprobs wins over echo's default; 0 asks for the prompt token alone.
  plan = completion(R"({"prompt": "x", "echo": true, "logprobs": 3, "prompt_logprobs": 0})");
  EXPECT_EQ(plan.prompt, 0u);
  // echo alone, logprobs alone: no prompt log-probabilities.
  EXPECT_FALSE(completion(R"({"prompt": "x", "echo": true})").prompt.has_value());
  EXPECT_FALSE(completion(R"({"prompt": "x", "logprobs": 2})").prompt.has_value());
  // prompt_logprobs without echo: the field only; streamed, nothing shows them, so nothing computes them.
  plan = completion(R"({"prompt": "x", "prompt_logprobs": 2})");
  EXPECT_EQ(plan.prompt, 2u);
  EXPECT_TRUE(plan.prompt_field);
  EXPECT_FALSE(plan.echo_prompt);
  EXPECT_FALSE(plan.sampled.has_value());
  EXPECT_FALSE(completion(R"({"prompt": "x", "prompt_logprobs": 0, "stream": true})").prompt.has_value());
}

TEST_F(LogprobRequestTest, ChatEchoTakesTopLogprobsForThePromptEvenWithoutLogprobs) {
  auto plan = chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})");
  EXPECT_EQ(plan.prompt, 0u);  // top_logprobs' default
  EXPECT_TRUE(plan.prompt_field);
  EXPECT_FALSE(plan.echo_prompt);
  EXPECT_FALSE(plan.sampled.has_value());
  plan = chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "logprobs": true, "top_logprobs": 4})");
  EXPECT_EQ(plan.prompt, 4u);
  EXPECT_EQ(plan.sampled, 4u);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 2})").prompt, 2u);
  EXPECT_FALSE(
      chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "stream": true})").prompt.has_value());
}

TEST_F(LogprobRequestTest, MaxLogprobsCapsEveryCountWithVllmsMessages) {
  ApiError e = completion_error(R"({"prompt": "x", "logprobs": 21})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "logprobs");
  EXPECT_EQ(e.message, "Requested sample logprobs of 21, which is greater than max allowed: 20");
  e = completion_error(R"({"prompt": "x", "prompt_logprobs": 21})");
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_EQ(e.message, "Requested prompt logprobs of 21, which is greater than max allowed: 20");
  // -1 is the whole vocabulary.
  e = completion_error(R"({"prompt": "x", "logprobs": -1})");
  EXPECT_EQ(e.message,
            "Requested sample logprobs of " + std::to_string(vocab_) + ", which is greater than max allowed: 20");
  // The sampled count is checked first, as vLLM does.
  EXPECT_EQ(completion_error(R"({"prompt": "x", "logprobs": 30, "prompt_logprobs": 30})").param, "logprobs");
  // 0 asks for nothing beyond the token, whatever the cap.
  EXPECT_EQ(completion(R"({"prompt": "x", "logprobs": 0, "prompt_logprobs": 0})", {.max_logprobs = 0}).prompt, 0u);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "logprobs": 6})", {.max_logprobs = 5}).message,
            "Requested sample logprobs of 6, which is greater than max allowed: 5");
  // --max-logprobs -1: up to the vocabulary.
  const auto plan = completion(R"({"prompt": "x", "logprobs": -1, "prompt_logprobs": -1})", {.max_logprobs = -1});
  EXPECT_EQ(plan.sampled, vocab_);
  EXPECT_EQ(plan.prompt, vocab_);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "prompt_logprobs": 1000})", {.max_logprobs = -1}).message,
            "Requested prompt logprobs of 1000, which is greater than max allowed: " + std::to_string(vocab_));
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": -1})",
                 {.max_logprobs = -1})
                .sampled,
            vocab_);
}

TEST_F(LogprobRequestTest, TokensAsIdsFromTheRequestElseTheServer) {
  EXPECT_FALSE(completion(R"({"prompt": "x"})").tokens_as_ids);
  EXPECT_TRUE(completion(R"({"prompt": "x"})", {.return_tokens_as_token_ids = true}).tokens_as_ids);
  EXPECT_TRUE(completion(R"({"prompt": "x", "return_tokens_as_token_ids": true})").tokens_as_ids);
  EXPECT_FALSE(chat(R"({"messages": [{"role": "user", "content": "x"}], "return_tokens_as_token_ids": false})",
                    {.return_tokens_as_token_ids = true})
                   .tokens_as_ids);
}

}  // namespace
}  // namespace serverd::api
