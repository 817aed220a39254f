// Log-probabilities over the OpenAI API, end to end over loopback against the fake Generator: the prompt's
// (prompt_logprobs; echo with logprobs on completions) in vLLM's shapes whole and streamed, scored once per
// prompt for all its choices, --max-logprobs with vLLM's errors, and return_tokens_as_token_ids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/serverd/api_test_fixture.h"

namespace serverd::api {
namespace {

using OpenAiLogprobsTest = OpenAiApiTest;

// The fake's log-probability of prompt token `token` with `top` most likely tokens.
double prompt_logprob(std::int32_t token, std::size_t top) {
  return static_cast<double>(FakeGenerator::prompt_scored(token, top).logprob);
}

TEST_F(OpenAiLogprobsTest, CompletionEchoWithLogprobsLeadsWithThePromptsAndFillsPromptLogprobs) {
  start();
  const auto d = json(post("/v1/completions", R"({"prompt": "ab", "echo": true, "logprobs": 1, "max_tokens": 2,
                                                 "n": 2})")
                          .body);
  ASSERT_EQ(d["choices"].Size(), 2u);
  for (const auto& choice : d["choices"].GetArray()) {
    EXPECT_EQ(str(choice["text"]), "abab");
    const auto& lp = choice["logprobs"];
    ASSERT_EQ(lp["tokens"].Size(), 4u);
    EXPECT_EQ(str(lp["tokens"][0]), "a");
    EXPECT_EQ(str(lp["tokens"][1]), "b");
    EXPECT_TRUE(lp["token_logprobs"][0].IsNull());  // nothing predicts the first prompt token
    EXPECT_TRUE(lp["top_logprobs"][0].IsNull());
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].GetDouble(), prompt_logprob('b', 1));
    EXPECT_EQ(lp["top_logprobs"][1].MemberCount(), 2u);  // "b" and the most likely, "a"
    EXPECT_EQ(lp["text_offset"][3].GetInt(), 3);
    // The same, keyed by token id, in vLLM's prompt_logprobs.
    const auto& prompt = choice["prompt_logprobs"];
    ASSERT_TRUE(prompt.IsArray());
    ASSERT_EQ(prompt.Size(), 2u);
    EXPECT_TRUE(prompt[0].IsNull());
    ASSERT_EQ(prompt[1].MemberCount(), 2u);
    EXPECT_STREQ(prompt[1].MemberBegin()->name.GetString(), "98");
    EXPECT_EQ(prompt[1]["98"]["rank"].GetInt(), 1098);
    EXPECT_EQ(str(prompt[1]["98"]["decoded_token"]), "b");
    EXPECT_EQ(prompt[1]["97"]["rank"].GetInt(), 1);
  }
  // One sequence scores the prompt for both choices.
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[0].prompt_logprobs, 1u);
  EXPECT_FALSE(submitted[1].prompt_logprobs.has_value());
}

TEST_F(OpenAiLogprobsTest, StreamedEchoCarriesThePromptsInEachChoicesFirstChunk) {
  start();
  // The second choice generates everything before the first has scored the prompt: its first chunk waits.
  generator_.hold_prompt_scoring(true);
  serverd_test::HttpConnection c(server_->port());
  c.send_request("POST", "/v1/completions",
                 R"({"prompt": "abc", "echo": true, "logprobs": 0, "max_tokens": 3, "n": 2, "stream": true})");
  ASSERT_TRUE(
      generator_.wait_until([](const FakeGenerator& g) { return g.submitted_count() == 2 && g.active_count() == 1; }));
  generator_.hold_prompt_scoring(false);
  const auto s = read_stream(c);
  ASSERT_TRUE(s.done);
  std::vector<std::vector<std::string>> tokens(2);
  std::vector<bool> first_seen(2, false);
  for (const auto& e : s.events) {
    if (e["choices"].Empty()) continue;
    const auto& choice = e["choices"][0];
    EXPECT_FALSE(choice.HasMember("prompt_logprobs"));
    const auto index = static_cast<std::size_t>(choice["index"].GetInt());
    const auto& lp = choice["logprobs"];
    ASSERT_TRUE(lp.IsObject());
    if (!first_seen[index]) {
      first_seen[index] = true;
      EXPECT_THAT(str(choice["text"]), testing::StartsWith("abc"));
      ASSERT_GE(lp["tokens"].Size(), 3u);
      EXPECT_TRUE(lp["token_logprobs"][0].IsNull());
      EXPECT_DOUBLE_EQ(lp["token_logprobs"][2].GetDouble(), prompt_logprob('c', 0));
      EXPECT_EQ(lp["text_offset"][0].GetInt(), 0);
    }
    for (const auto& t : lp["tokens"].GetArray()) tokens[index].push_back(str(t));
  }
  for (const auto& choice_tokens : tokens) {
    EXPECT_EQ(choice_tokens, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  }
}

TEST_F(OpenAiLogprobsTest, EchoOfThePromptAloneScoresItWithoutGenerating) {
  start();
  const auto d =
      json(post("/v1/completions", R"({"prompt": "ab", "echo": true, "logprobs": 0, "max_tokens": 0})").body);
  const auto& choice = d["choices"][0];
  EXPECT_EQ(str(choice["text"]), "ab");
  EXPECT_EQ(str(choice["finish_reason"]), "length");
  ASSERT_EQ(choice["logprobs"]["tokens"].Size(), 2u);
  EXPECT_DOUBLE_EQ(choice["logprobs"]["token_logprobs"][1].GetDouble(), prompt_logprob('b', 0));
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 0);
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].max_tokens, 0u);
  EXPECT_EQ(submitted[0].prompt_logprobs, 0u);
}

TEST_F(OpenAiLogprobsTest, PromptLogprobsOnCompletionChoicesAndOnTheChatResponse) {
  start();
  auto d = json(post("/v1/completions", R"({"prompt": "abc", "prompt_logprobs": 2, "max_tokens": 1})").body);
  const auto& choice = d["choices"][0];
  EXPECT_TRUE(choice["logprobs"].IsNull());
  ASSERT_EQ(choice["prompt_logprobs"].Size(), 3u);
  EXPECT_EQ(choice["prompt_logprobs"][2]["99"]["rank"].GetInt(), 1099);
  EXPECT_DOUBLE_EQ(choice["prompt_logprobs"][1]["98"]["logprob"].GetDouble(), prompt_logprob('b', 2));
  EXPECT_EQ(choice["prompt_logprobs"][1]["98"]["rank"].GetInt(), 2);  // 'b' is second most likely
  EXPECT_EQ(choice["prompt_logprobs"][1].MemberCount(), 2u);

  d = json(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "prompt_logprobs": 1,
                                           "max_tokens": 1})")
               .body);
  EXPECT_FALSE(d["choices"][0].HasMember("prompt_logprobs"));
  const auto& prompt = d["prompt_logprobs"];
  ASSERT_TRUE(prompt.IsArray());
  EXPECT_EQ(prompt.Size(), static_cast<unsigned>(d["usage"]["prompt_tokens"].GetInt()));
  EXPECT_TRUE(prompt[0].IsNull());
  EXPECT_TRUE(prompt[1].IsObject());
  // Without it, the chat response still names the field (null), as vLLM's does.
  d = json(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})").body);
  EXPECT_TRUE(d["prompt_logprobs"].IsNull());
  EXPECT_FALSE(generator_.submitted().back().prompt_logprobs.has_value());
}

TEST_F(OpenAiLogprobsTest, LimitsAndStreamsRefusedInVllmsWords) {
  start();
  expect_error(post("/v1/completions", R"({"prompt": "a", "prompt_logprobs": 1, "stream": true})"), 400,
               "BadRequestError", "prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.");
  expect_error(post("/v1/completions", R"({"prompt": "a", "logprobs": 21})"), 400, "BadRequestError", "logprobs",
               "Requested sample logprobs of 21, which is greater than max allowed: 20");
  expect_error(post("/v1/completions", R"({"prompt": "a", "prompt_logprobs": 21})"), 400, "BadRequestError",
               "prompt_logprobs", "Requested prompt logprobs of 21, which is greater than max allowed: 20");
  expect_error(post("/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "Hi"}], "logprobs": true, "top_logprobs": -1})"),
               400, "BadRequestError", "logprobs",
               "Requested sample logprobs of " + std::to_string(model_.tokenizer.vocab_size()) +
                   ", which is greater than max allowed: 20");
  EXPECT_EQ(generator_.submitted_count(), 0u);
}

TEST_F(OpenAiLogprobsTest, MaxLogprobsMinusOneAllowsTheWholeVocabulary) {
  start([](ApiServerOptions& o) { o.api.logprobs.max_logprobs = -1; });
  const auto reply =
      post("/v1/completions", R"({"prompt": "ab", "logprobs": -1, "prompt_logprobs": -1, "max_tokens": 1})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].sampling.logprobs, static_cast<int>(model_.tokenizer.vocab_size()));
  EXPECT_EQ(submitted[0].prompt_logprobs, model_.tokenizer.vocab_size());
}

TEST_F(OpenAiLogprobsTest, TokensAsIdsFromTheServerFlagUnlessTheRequestSaysOtherwise) {
  start([](ApiServerOptions& o) { o.api.logprobs.return_tokens_as_token_ids = true; });
  auto d = json(post("/v1/completions", R"({"prompt": "ab", "echo": true, "logprobs": 1, "max_tokens": 1})").body);
  auto& lp = d["choices"][0]["logprobs"];
  EXPECT_EQ(str(lp["tokens"][0]), "token_id:97");  // the echoed prompt's first token too
  EXPECT_EQ(str(lp["tokens"][2]), "token_id:97");
  EXPECT_TRUE(lp["top_logprobs"][1].HasMember("token_id:98"));
  // vLLM's prompt_logprobs keep the text.
  EXPECT_EQ(str(d["choices"][0]["prompt_logprobs"][1]["98"]["decoded_token"]), "b");

  d = json(post("/v1/completions",
                R"({"prompt": "ab", "logprobs": 1, "max_tokens": 1, "return_tokens_as_token_ids": false})")
               .body);
  EXPECT_EQ(str(d["choices"][0]["logprobs"]["tokens"][0]), "a");

  d = json(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "logprobs": true,
                                           "top_logprobs": 1, "max_tokens": 1})")
               .body);
  const auto& entry = d["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(str(entry["token"]), "token_id:72");
  EXPECT_EQ(entry["bytes"].Size(), 11u);
  EXPECT_EQ(str(entry["top_logprobs"][0]["token"]), "token_id:72");
}

}  // namespace
}  // namespace serverd::api
