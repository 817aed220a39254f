// The OpenAI API end to end over loopback, against a fake Generator and a byte-level test model: response
// shapes (whole and streamed), stop strings, n, logprobs, usage, errors in OpenAI's shape with the server
// still serving, auth, limits, request ids, /health phases, cancellation and graceful shutdown. (/metrics:
// metrics_endpoint_test.cc; the other endpoints: endpoints_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/support/serverd/api_test_fixture.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(OpenAiApiTest, CompletionResponseShape) {
  start();
  const auto reply = post("/v1/completions", R"({"model": "test-model", "prompt": "Hello"})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.header("content-type"), "application/json");
  const auto d = json(reply.body);
  EXPECT_EQ(str(d["id"]), "cmpl-" + reply.header("x-request-id"));
  EXPECT_EQ(str(d["object"]), "text_completion");
  EXPECT_GT(d["created"].GetInt64(), 0);
  EXPECT_EQ(str(d["model"]), "test-model");
  ASSERT_EQ(d["choices"].Size(), 1u);
  const auto& choice = d["choices"][0];
  EXPECT_EQ(choice["index"].GetInt(), 0);
  EXPECT_EQ(str(choice["text"]), "Hello");
  EXPECT_TRUE(choice["logprobs"].IsNull());
  EXPECT_EQ(str(choice["finish_reason"]), "stop");
  EXPECT_TRUE(choice["stop_reason"].IsNull());
  EXPECT_EQ(d["usage"]["prompt_tokens"].GetInt(), 5);
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 6);  // the EOS counts
  EXPECT_EQ(d["usage"]["total_tokens"].GetInt(), 11);
}

TEST_F(OpenAiApiTest, CompletionMaxTokensDefaultsTo16) {
  start();
  const auto d = json(post("/v1/completions", R"({"prompt": "abcdefghijklmnopqrstuvwxyz"})").body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "abcdefghijklmnop");
  EXPECT_EQ(str(d["choices"][0]["finish_reason"]), "length");
  EXPECT_EQ(generator_.submitted().at(0).max_tokens, 16u);
}

TEST_F(OpenAiApiTest, CompletionStreamShape) {
  start();
  const auto s = stream("/v1/completions", R"({"prompt": "Hello", "stream": true})");
  EXPECT_EQ(s.head.status, 200);
  EXPECT_THAT(s.head.header("content-type"), StartsWith("text/event-stream"));
  EXPECT_TRUE(s.done);
  ASSERT_FALSE(s.events.empty());
  std::string text;
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    const auto& e = s.events[i];
    EXPECT_EQ(str(e["object"]), "text_completion");
    EXPECT_THAT(str(e["id"]), StartsWith("cmpl-"));
    EXPECT_FALSE(e.HasMember("usage"));
    text += str(e["choices"][0]["text"]);
    const bool last = i + 1 == s.events.size();
    EXPECT_EQ(e["choices"][0]["finish_reason"].IsNull(), !last);
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(str(s.events.back()["choices"][0]["finish_reason"]), "stop");
}

TEST_F(OpenAiApiTest, StreamUsageComesInAFinalChunk) {
  start();
  const auto s =
      stream("/v1/completions", R"({"prompt": "Hello", "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_GE(s.events.size(), 2u);
  const auto& last = s.events.back();
  EXPECT_EQ(last["choices"].Size(), 0u);
  EXPECT_EQ(last["usage"]["prompt_tokens"].GetInt(), 5);
  EXPECT_EQ(last["usage"]["completion_tokens"].GetInt(), 6);
  EXPECT_EQ(last["usage"]["total_tokens"].GetInt(), 11);
  EXPECT_TRUE(s.events.front()["usage"].IsNull());  // the others carry "usage": null
}

// vLLM's stream_options.continuous_usage_stats: every chunk carries its choice's usage so far (the chat role
// chunk none generated yet), and the final usage chunk still comes.
TEST_F(OpenAiApiTest, ContinuousUsageStatsPutUsageInEveryChunk) {
  start();
  const auto s = stream("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  ASSERT_GE(s.events.size(), 3u);
  const int prompt = s.events.back()["usage"]["prompt_tokens"].GetInt();
  EXPECT_EQ(s.events.front()["usage"]["completion_tokens"].GetInt(), 0);  // the role chunk
  int last_seen = 0;
  for (std::size_t i = 0; i + 1 < s.events.size(); ++i) {
    const auto& usage = s.events[i]["usage"];
    ASSERT_TRUE(usage.IsObject()) << i;
    EXPECT_EQ(usage["prompt_tokens"].GetInt(), prompt);
    EXPECT_GE(usage["completion_tokens"].GetInt(), last_seen);  // it only grows
    last_seen = usage["completion_tokens"].GetInt();
    EXPECT_EQ(usage["total_tokens"].GetInt(), prompt + last_seen);
  }
  EXPECT_EQ(last_seen, 10);  // "Hi there!" and the EOS, by the end
  EXPECT_EQ(s.events.back()["usage"]["completion_tokens"].GetInt(), 10);
  // Without include_usage it changes nothing, as in vLLM.
  const auto plain = stream("/v1/completions", R"({"prompt": "Hello", "stream": true,
      "stream_options": {"continuous_usage_stats": true}})");
  for (const auto& e : plain.events) EXPECT_FALSE(e.HasMember("usage"));
}

TEST_F(OpenAiApiTest, SeveralPromptsWithNChoicesEach) {
  start();
  const auto d = json(post("/v1/completions", R"({"prompt": ["ab", "cde"], "n": 2, "seed": 5})").body);
  ASSERT_EQ(d["choices"].Size(), 4u);
  const char* expected[] = {"ab", "ab", "cde", "cde"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d["choices"][i]["index"].GetInt(), i);
    EXPECT_EQ(str(d["choices"][i]["text"]), expected[i]);
  }
  EXPECT_EQ(d["usage"]["prompt_tokens"].GetInt(), 5);       // each prompt once
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 14);  // 3 + 3 + 4 + 4
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 4u);
  EXPECT_EQ(submitted[0].sampling.seed, 5u);
  EXPECT_EQ(submitted[1].sampling.seed, 6u);  // the choices of a prompt differ
}

TEST_F(OpenAiApiTest, StopStringSplitAcrossTokensIsNeverStreamedAndCancelsTheSequence) {
  start();
  // Choice 0 echoes "abc STOP def"; choice 1 says "12345678". The fake emits one token of each per step, so
  // when choice 1's fifth token reaches the client, the server has handled choice 0's "S" (same queue,
  // earlier): had it been sent, it would have arrived first.
  generator_.set_script([](const GenerationRequest& request) {
    std::vector<std::int32_t> out = request.request_id.ends_with("-1") ? bytes("12345678") : request.prompt_tokens;
    out.push_back(kEos);
    return out;
  });
  generator_.hold_after(5);
  HttpConnection c(server_->port());
  c.send_request("POST", "/v1/completions", R"({"prompt": "abc STOP def", "stream": true, "stop": ["STOP"], "n": 2})");
  c.read_response_header();
  std::string text[2];
  std::string last_reason[2];
  const auto read_until = [&](const std::function<bool()>& enough) {
    while (!enough()) {
      const auto event = c.next_event();
      ASSERT_TRUE(event.has_value());
      if (*event == "[DONE]") continue;
      const auto e = json(*event);
      const auto& choice = e["choices"][0];
      const int index = choice["index"].GetInt();
      const std::string piece = str(choice["text"]);
      if (index == 0) {
        EXPECT_EQ(piece.find_first_of("STOP"), std::string::npos) << piece;
      }
      text[index] += piece;
      if (!choice["finish_reason"].IsNull()) last_reason[index] = str(choice["finish_reason"]);
      if (index == 0 && !choice["stop_reason"].IsNull()) {
        EXPECT_EQ(str(choice["stop_reason"]), "STOP");
      }
    }
  };
  read_until([&] { return text[1] == "12345"; });
  EXPECT_EQ(text[0], "abc ");
  generator_.hold_after(8);  // choice 0 reaches the end of "STOP" and waits: it is still running when cancelled
  EXPECT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.cancelled_count() == 1; }));
  generator_.release();
  read_until([&] { return !last_reason[0].empty() && !last_reason[1].empty(); });
  EXPECT_EQ(text[0], "abc ");
  EXPECT_EQ(last_reason[0], "stop");
  EXPECT_EQ(text[1], "12345678");
  EXPECT_EQ(c.next_event(), "[DONE]");
}

TEST_F(OpenAiApiTest, IncludeStopStrInOutputAndStopTokenIds) {
  start();
  auto d =
      json(post("/v1/completions", R"({"prompt": "abc STOP def", "stop": "STOP", "include_stop_str_in_output": true})")
               .body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "abc STOP");
  d = json(post("/v1/completions", R"({"prompt": "a!b", "stop_token_ids": [33]})").body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "a");
  EXPECT_EQ(d["choices"][0]["stop_reason"].GetInt(), 33);
  EXPECT_EQ(str(d["choices"][0]["finish_reason"]), "stop");
}

TEST_F(OpenAiApiTest, CompletionLogprobsShape) {
  start();
  const auto d = json(post("/v1/completions", R"({"prompt": "ab", "logprobs": 2, "max_tokens": 2})").body);
  const auto& lp = d["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.IsObject()) << d["choices"][0]["logprobs"].GetType();
  EXPECT_EQ(str(lp["tokens"][0]), "a");
  EXPECT_EQ(str(lp["tokens"][1]), "b");
  EXPECT_EQ(lp["text_offset"][0].GetInt(), 0);
  EXPECT_EQ(lp["text_offset"][1].GetInt(), 1);
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][0].GetDouble(), -0.5);  // 'a' = 97: the fake's -0.25 * (1 + 97 % 4)
  // The chosen token ("a", also the most likely) and the next most likely: 2 entries, not 3.
  EXPECT_EQ(lp["top_logprobs"][0].MemberCount(), 2u);
  EXPECT_TRUE(lp["top_logprobs"][0].HasMember("b"));
  EXPECT_EQ(generator_.submitted().at(0).sampling.logprobs, 2);

  const auto s = stream("/v1/completions", R"({"prompt": "ab", "logprobs": 0, "max_tokens": 2, "stream": true})");
  std::vector<int> offsets;
  for (const auto& e : s.events) {
    const auto& chunk_lp = e["choices"][0]["logprobs"];
    ASSERT_TRUE(chunk_lp.IsObject());
    for (const auto& offset : chunk_lp["text_offset"].GetArray()) offsets.push_back(offset.GetInt());
  }
  EXPECT_EQ(offsets, (std::vector<int>{0, 1}));
}

TEST_F(OpenAiApiTest, EchoPutsThePromptFirst) {
  start();
  auto d = json(post("/v1/completions", R"({"prompt": "ab", "echo": true, "max_tokens": 2})").body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "abab");
  d = json(post("/v1/completions", R"({"prompt": "ab", "echo": true, "max_tokens": 0})").body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "ab");
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 0);
  EXPECT_EQ(generator_.submitted_count(), 1u);  // nothing generated for the second
  const auto s = stream("/v1/completions", R"({"prompt": "ab", "echo": true, "max_tokens": 1, "stream": true})");
  EXPECT_THAT(str(s.events.front()["choices"][0]["text"]), StartsWith("ab"));
}

TEST_F(OpenAiApiTest, ChatResponseShape) {
  start();
  const auto reply =
      post("/v1/chat/completions", R"({"model": "test-model", "messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto d = json(reply.body);
  EXPECT_EQ(str(d["id"]), "chatcmpl-" + reply.header("x-request-id"));
  EXPECT_EQ(str(d["object"]), "chat.completion");
  const auto& choice = d["choices"][0];
  EXPECT_EQ(str(choice["message"]["role"]), "assistant");
  EXPECT_EQ(str(choice["message"]["content"]), "Hi there!");
  EXPECT_EQ(str(choice["finish_reason"]), "stop");
  EXPECT_TRUE(choice["stop_reason"].IsNull());
  EXPECT_TRUE(choice["logprobs"].IsNull());
  const std::size_t prompt = rendered_length("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(d["usage"]["prompt_tokens"].GetUint64(), prompt);
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 10);
  // Chat's default max_tokens is what the context leaves.
  EXPECT_EQ(generator_.submitted().at(0).max_tokens, 256 - prompt);
}

TEST_F(OpenAiApiTest, ChatStreamShape) {
  start();
  const auto s =
      stream("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true, "n": 2})");
  ASSERT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 4u);
  std::string content[2];
  int finishes = 0;
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    const auto& e = s.events[i];
    EXPECT_EQ(str(e["object"]), "chat.completion.chunk");
    const auto& choice = e["choices"][0];
    const int index = choice["index"].GetInt();
    if (i < 2) {  // every choice opens with the role
      EXPECT_EQ(index, static_cast<int>(i));
      EXPECT_EQ(str(choice["delta"]["role"]), "assistant");
      EXPECT_EQ(str(choice["delta"]["content"]), "");
      continue;
    }
    EXPECT_FALSE(choice["delta"].HasMember("role"));
    if (choice["delta"].HasMember("content")) content[index] += str(choice["delta"]["content"]);
    if (!choice["finish_reason"].IsNull()) {
      EXPECT_EQ(str(choice["finish_reason"]), "stop");
      ++finishes;
    }
  }
  EXPECT_EQ(content[0], "Hi there!");
  EXPECT_EQ(content[1], "Hi there!");
  EXPECT_EQ(finishes, 2);
}

TEST_F(OpenAiApiTest, ChatLogprobsShape) {
  start();
  const auto d = json(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
                                                      "logprobs": true, "top_logprobs": 2, "max_tokens": 1})")
                          .body);
  const auto& content = d["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.Size(), 1u);
  EXPECT_EQ(str(content[0]["token"]), "H");
  EXPECT_EQ(content[0]["bytes"][0].GetInt(), 'H');
  EXPECT_TRUE(content[0]["logprob"].IsNumber());
  ASSERT_EQ(content[0]["top_logprobs"].Size(), 2u);
  EXPECT_EQ(str(content[0]["top_logprobs"][1]["token"]), "I");
}

TEST_F(OpenAiApiTest, ChatTemplateKwargsAndContinueFinalMessageReachThePrompt) {
  start();
  ASSERT_EQ(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
                                             "chat_template_kwargs": {"enable_thinking": false}})")
                .status,
            200);
  ASSERT_EQ(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"},
                                                         {"role": "assistant", "content": "Sure,"}],
                                             "continue_final_message": true, "echo": true})")
                .status,
            200);
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_THAT(model_.tokenizer.decode(submitted[0].prompt_tokens), testing::EndsWith("<think>\n\n</think>\n\n"));
  EXPECT_THAT(model_.tokenizer.decode(submitted[1].prompt_tokens), testing::EndsWith("<|im_start|>assistant\nSure,"));
}

TEST_F(OpenAiApiTest, BadRequestsGetOpenAiErrorsAndTheServerCarriesOn) {
  start();
  struct Case {
    std::string target;
    std::string body;
    int status;
    std::string type;
    std::optional<std::string> param;
    std::string message;
  };
  const std::string long_prompt(300, 'x');
  const std::vector<Case> cases = {
      {"/v1/completions", R"({"prompt": )", 400, "BadRequestError", std::nullopt, "Invalid JSON"},
      {"/v1/completions", R"([1])", 400, "BadRequestError", std::nullopt, "JSON object"},
      {"/v1/completions", R"({"prompt": "x", "n": 0})", 400, "BadRequestError", "n", "n must be at least 1, got 0."},
      {"/v1/completions", R"({"prompt": "x", "n": 100000})", 400, "BadRequestError", "n", "n must be at most"},
      {"/v1/completions", R"({"prompt": "x", "temperature": -1})", 400, "BadRequestError", "temperature",
       "temperature"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 0})", 400, "BadRequestError", "top_p", "top_p"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", 400, "BadRequestError", "max_tokens",
       "must be an integer"},
      {"/v1/completions", R"({"prompt": ""})", 400, "BadRequestError", "prompt", "must be provided and non-empty"},
      {"/v1/completions", R"({"prompt": [1, 5000]})", 400, "BadRequestError", "prompt",
       "Token id 5000 is out of vocabulary"},
      {"/v1/completions", R"({"prompt": ")" + long_prompt + R"("})", 400, "BadRequestError", "input_tokens",
       "This model's maximum context length is 256 tokens. However, your request has 300 input tokens. Please "
       "reduce the length of the input messages."},
      {"/v1/completions", R"({"prompt": "hello", "max_tokens": 300})", 400, "BadRequestError", "max_tokens",
       "'max_tokens' or 'max_completion_tokens' is too large: 300. This model's maximum context length is 256 "
       "tokens and your request has 5 input tokens (300 > 256 - 5)."},
      {"/v1/completions", R"({"model": "nope", "prompt": "x"})", 404, "NotFoundError", "model",
       "The model `nope` does not exist."},
      {"/v1/completions", R"({"prompt": "x", "stop": [""]})", 400, "BadRequestError", "stop",
       "stop cannot contain an empty string."},
      {"/v1/completions", R"({"prompt": "x", "suffix": "y"})", 400, "BadRequestError", "suffix", "suffix"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "BadRequestError", "messages", "must not be empty"},
      {"/v1/chat/completions", R"({"messages": [{"role": "forbidden", "content": "x"}]})", 400, "BadRequestError",
       std::nullopt, "Role forbidden is not allowed"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]})",
       400, "BadRequestError", "tool_choice", "\"auto\" tool choice requires"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})", 400,
       "BadRequestError", "response_format", "needs a 'json_schema' object"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 1000})",
       400, "BadRequestError", "max_tokens", "is too large: 1000"},
      {"/tokenize", R"({"prompt": 5})", 400, "BadRequestError", "prompt", "must be a string"},
      {"/v1/nothing-here", R"({})", 404, "NotFoundError", std::nullopt, "Not Found"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target + " " + c.body.substr(0, 120));
    expect_error(post(c.target, c.body), c.status, c.type, c.param, c.message);
  }
  const auto wrong_method = get("/v1/completions");
  expect_error(wrong_method, 405, "MethodNotAllowedError", std::nullopt, "Method Not Allowed");
  EXPECT_EQ(wrong_method.header("allow"), "POST");
  // Still serving, and nothing was submitted for any of them.
  EXPECT_EQ(get("/health").status, 200);
  EXPECT_EQ(str(json(post("/v1/completions", R"({"prompt": "ok"})").body)["choices"][0]["text"]), "ok");
  EXPECT_EQ(generator_.submitted_count(), 1u);
}

TEST_F(OpenAiApiTest, ApiKeyGuardsV1Only) {
  start([](ApiServerOptions& o) { o.api.api_keys = {"sekrit"}; });
  const auto refused = get("/v1/models");
  expect_error(refused, 401, "AuthenticationError", std::nullopt, "Unauthorized");
  expect_error(post("/v1/completions", R"({"prompt": "x"})", {"Authorization: Bearer wrong"}), 401,
               "AuthenticationError", std::nullopt, "Unauthorized");
  EXPECT_EQ(get("/v1/models", {"Authorization: Bearer sekrit"}).status, 200);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x"})", {"Authorization: Bearer sekrit"}).status, 200);
  EXPECT_EQ(get("/health").status, 200);
  EXPECT_EQ(get("/metrics").status, 200);
  EXPECT_EQ(post("/tokenize", R"({"prompt": "x"})").status, 200);
}

TEST_F(OpenAiApiTest, OversizedBodyGets413InOpenAiShape) {
  start([](ApiServerOptions& o) { o.http.max_body_bytes = 1024; });
  expect_error(post("/v1/completions", R"({"prompt": ")" + std::string(2000, 'x') + R"("})"), 413,
               "RequestEntityTooLargeError", std::nullopt, "too large");
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x"})").status, 200);
}

TEST_F(OpenAiApiTest, RequestIdIsEchoedOrMade) {
  start();
  auto reply = post("/v1/completions", R"({"prompt": "x"})", {"X-Request-Id: my-id-1"});
  EXPECT_EQ(reply.header("x-request-id"), "my-id-1");
  EXPECT_EQ(str(json(reply.body)["id"]), "cmpl-my-id-1");
  reply = post("/v1/completions", R"({"prompt": ""})", {"X-Request-Id: my-id-2"});
  EXPECT_EQ(reply.header("x-request-id"), "my-id-2");  // errors too
  reply = get("/health");
  EXPECT_EQ(reply.header("x-request-id").size(), 32u);
  EXPECT_NE(reply.header("x-request-id"), get("/health").header("x-request-id"));
}

TEST_F(OpenAiApiTest, HealthReportsThePhaseUntilTheModelIsServed) {
  start({}, /*serve=*/false);
  auto reply = get("/health");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, R"({"status":"starting"})");
  server_->set_phase("loading");
  EXPECT_EQ(get("/health").body, R"({"status":"loading"})");
  expect_error(post("/v1/completions", R"({"prompt": "x"})"), 503, "ServiceUnavailableError", std::nullopt,
               "not ready yet (loading)");
  EXPECT_EQ(get("/metrics").status, 200);
  server_->serve(model_.info(256), generator_);
  reply = get("/health");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "");
}

TEST_F(OpenAiApiTest, ModelsTokenizeDetokenizeVersion) {
  start();
  auto d = json(get("/v1/models").body);
  EXPECT_EQ(str(d["object"]), "list");
  ASSERT_EQ(d["data"].Size(), 1u);
  EXPECT_EQ(str(d["data"][0]["id"]), "test-model");
  EXPECT_EQ(str(d["data"][0]["object"]), "model");
  EXPECT_EQ(str(d["data"][0]["owned_by"]), "vllm");
  EXPECT_EQ(str(d["data"][0]["root"]), "/models/test-model");
  EXPECT_EQ(d["data"][0]["max_model_len"].GetInt(), 256);

  d = json(post("/tokenize", R"({"prompt": "hi", "return_token_strs": true})").body);
  EXPECT_EQ(d["count"].GetInt(), 2);
  EXPECT_EQ(d["max_model_len"].GetInt(), 256);
  EXPECT_EQ(d["tokens"][0].GetInt(), 'h');
  EXPECT_EQ(str(d["token_strs"][1]), "i");
  d = json(post("/tokenize", R"({"messages": [{"role": "user", "content": "Hi"}]})").body);
  EXPECT_EQ(d["count"].GetUint64(), rendered_length("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_TRUE(d["token_strs"].IsNull());
  d = json(post("/detokenize", R"({"tokens": [104, 105]})").body);
  EXPECT_EQ(str(d["prompt"]), "hi");
  EXPECT_EQ(get("/version").body, R"({"version":"9.9.9"})");
}

TEST_F(OpenAiApiTest, KeepAliveCarriesWholeAndStreamedResponses) {
  start();
  HttpConnection c(server_->port());
  c.send_request("POST", "/v1/completions", R"({"prompt": "one"})");
  EXPECT_EQ(str(json(c.read_response().body)["choices"][0]["text"]), "one");
  c.send_request("POST", "/v1/completions", R"({"prompt": "two", "stream": true})");
  EXPECT_TRUE(read_stream(c).done);
  c.send_request("GET", "/health");
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(OpenAiApiTest, ClientLeavingMidStreamCancelsGeneration) {
  start();
  generator_.hold_after(2);
  HttpConnection c(server_->port());
  c.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "stream": true})");
  c.read_response_header();
  ASSERT_TRUE(c.next_event().has_value());
  c.close();
  EXPECT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.cancelled_count() == 1; }));
  EXPECT_TRUE(generator_.wait_until([this](const FakeGenerator&) { return server_->active_sequences() == 0; }));
}

TEST_F(OpenAiApiTest, ClientLeavingBeforeAWholeResponseCancelsGeneration) {
  start();
  generator_.hold_after(1);
  HttpConnection c(server_->port());
  c.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "n": 2})");
  ASSERT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.holding_count(1) == 2; }));
  c.close();
  EXPECT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.cancelled_count() == 2; }));
}

TEST_F(OpenAiApiTest, GracefulShutdownFinishesAStreamInFlight) {
  start();
  generator_.hold_after(2);
  HttpConnection streaming(server_->port());
  streaming.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "stream": true})");
  const auto head = streaming.read_response_header();
  std::string text = str(json(*streaming.next_event())["choices"][0]["text"]);
  HttpConnection idle(server_->port());
  idle.send_request("GET", "/health");
  ASSERT_EQ(idle.read_response().status, 200);

  std::thread stopper([this] { server_->shutdown(std::chrono::seconds(30)); });
  EXPECT_TRUE(idle.wait_closed());  // the drain has begun
  generator_.release();
  bool done = false;
  while (auto event = streaming.next_event()) {
    if (*event == "[DONE]") {
      done = true;
    } else {
      text += str(json(*event)["choices"][0]["text"]);
    }
  }
  stopper.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(generator_.cancelled_count(), 0u);
  EXPECT_EQ(server_->requests_in_flight(), 0u);
}

TEST_F(OpenAiApiTest, ShutdownCancelsWhatOutlivesTheGracePeriod) {
  start();
  generator_.hold_after(1);
  HttpConnection streaming(server_->port());
  streaming.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "stream": true})");
  ASSERT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.holding_count(1) == 1; }));
  server_->shutdown(std::chrono::milliseconds(0));
  EXPECT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.cancelled_count() == 1; }));
}

TEST_F(OpenAiApiTest, OverloadGets503WithRetryAfter) {
  start([](ApiServerOptions& o) { o.api.max_active_sequences = 1; });
  generator_.hold_after(1);
  HttpConnection first(server_->port());
  first.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "stream": true})");
  ASSERT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.holding_count(1) == 1; }));
  const auto refused = post("/v1/completions", R"({"prompt": "x"})");
  expect_error(refused, 503, "ServiceUnavailableError", std::nullopt, "overloaded");
  EXPECT_EQ(refused.header("retry-after"), "1");
  generator_.release();
  EXPECT_TRUE(read_stream(first).done);

  generator_.set_overloaded(true);  // the engine's own refusal
  const auto engine_full = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})");
  expect_error(engine_full, 503, "ServiceUnavailableError", std::nullopt, "overloaded");
  EXPECT_EQ(engine_full.header("retry-after"), "1");
  generator_.set_overloaded(false);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x"})").status, 200);
}

}  // namespace
}  // namespace serverd::api
