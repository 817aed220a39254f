// What serverd's `vllm serve` flags change in the API, over loopback against the fake Generator: several
// served names and API keys, the response role, forced usage, cached prompt tokens, the server seed, the
// request log, and how chat prompts are built (request templates, content formats, default kwargs, message
// forms).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "tests/support/serverd/api_test_fixture.h"

namespace serverd::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ApiFlagsTest : public OpenAiApiTest {
 protected:
  // The prompt the template rendered for the last submitted sequence.
  std::string last_prompt() {
    const auto submitted = generator_.submitted();
    return submitted.empty() ? "" : model_.tokenizer.decode(submitted.back().prompt_tokens, false);
  }
  HttpReply chat(std::string_view body) { return post("/v1/chat/completions", body); }
};

TEST_F(ApiFlagsTest, EveryServedNameIsAcceptedAndListedAndTheFirstIsReported) {
  start({}, false);
  auto info = model_.info(256);
  info.aliases = {"alias-one", "alias-two"};
  server_->serve(info, generator_);
  const auto models = json(get("/v1/models").body);
  ASSERT_EQ(models["data"].Size(), 3u);
  EXPECT_EQ(str(models["data"][0]["id"]), "test-model");
  EXPECT_EQ(str(models["data"][2]["id"]), "alias-two");
  EXPECT_EQ(str(models["data"][2]["root"]), "/models/test-model");
  const auto reply = post("/v1/completions", R"({"model": "alias-two", "prompt": "Hi", "max_tokens": 2})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(str(json(reply.body)["model"]), "test-model");  // vLLM reports the first name
  expect_error(post("/v1/completions", R"({"model": "other", "prompt": "Hi"})"), 404, "NotFoundError", "model",
               "The model `other` does not exist.");
}

TEST_F(ApiFlagsTest, AnyOfSeveralApiKeysOpensV1) {
  start([](ApiServerOptions& o) { o.api.api_keys = {"first", "second"}; });
  EXPECT_EQ(get("/v1/models", {"Authorization: Bearer second"}).status, 200);
  EXPECT_EQ(get("/v1/models", {"Authorization: Bearer first"}).status, 200);
  EXPECT_EQ(get("/v1/models", {"Authorization: Bearer third"}).status, 401);
  EXPECT_EQ(get("/v1/models").status, 401);
}

TEST_F(ApiFlagsTest, ResponseRoleIsTheFlagsUnlessTheLastMessageIsContinued) {
  start([](ApiServerOptions& o) { o.api.chat.response_role = "bot"; });
  const auto reply = chat(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(str(json(reply.body)["choices"][0]["message"]["role"]), "bot");
  const auto streamed =
      stream("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})");
  ASSERT_FALSE(streamed.events.empty());
  EXPECT_EQ(str(streamed.events.front()["choices"][0]["delta"]["role"]), "bot");
  // Without a generation prompt the reply continues the last message, in its role.
  const auto continued =
      chat(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}],
                                 "add_generation_prompt": false, "continue_final_message": true})");
  ASSERT_EQ(continued.status, 200) << continued.body;
  EXPECT_EQ(str(json(continued.body)["choices"][0]["message"]["role"]), "assistant");
}

TEST_F(ApiFlagsTest, ForcedUsageEndsEveryStream) {
  start([](ApiServerOptions& o) { o.api.force_include_usage = true; });
  const auto s = stream("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2, "stream": true})");
  ASSERT_TRUE(s.done);
  ASSERT_FALSE(s.events.empty());
  const auto& last = s.events.back();
  EXPECT_EQ(last["choices"].Size(), 0u);
  EXPECT_EQ(last["usage"]["prompt_tokens"].GetInt(), 2);
  EXPECT_TRUE(s.events.front()["usage"].IsNull());  // every chunk carries the key, as with include_usage
}

TEST_F(ApiFlagsTest, WithoutTheFlagStreamsCarryNoUsage) {
  start();
  const auto s = stream("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2, "stream": true})");
  ASSERT_FALSE(s.events.empty());
  EXPECT_FALSE(s.events.back().HasMember("usage"));
}

TEST_F(ApiFlagsTest, PromptTokensDetailsCountCachedTokens) {
  generator_.set_cached_prompt_tokens(16);
  start([](ApiServerOptions& o) { o.api.prompt_tokens_details = true; });
  const auto d = json(post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 2})").body);
  EXPECT_EQ(d["usage"]["prompt_tokens_details"]["cached_tokens"].GetInt(), 16);
  const auto s = stream("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true,
                            "stream_options": {"include_usage": true}})");
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.back()["usage"]["prompt_tokens_details"]["cached_tokens"].GetInt(), 16);
}

TEST_F(ApiFlagsTest, PromptTokensDetailsAreNullWithoutTheFlagOrWithoutHits) {
  generator_.set_cached_prompt_tokens(16);
  start();
  EXPECT_TRUE(
      json(post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 2})").body)["usage"]["prompt_tokens_details"]
          .IsNull());
  server_->shutdown(std::chrono::milliseconds(0));
  generator_.set_cached_prompt_tokens(0);
  start([](ApiServerOptions& o) { o.api.prompt_tokens_details = true; });
  EXPECT_TRUE(
      json(post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 2})").body)["usage"]["prompt_tokens_details"]
          .IsNull());
}

TEST_F(ApiFlagsTest, TheServerSeedSeedsRequestsWithoutOne) {
  start([](ApiServerOptions& o) { o.api.seed = 7; });
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1, "n": 2})").status, 200);
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1, "seed": 99})").status, 200);
  const auto first = generator_.submitted();
  ASSERT_EQ(first.size(), 3u);
  ASSERT_TRUE(first[0].sampling.seed && first[1].sampling.seed);
  EXPECT_NE(*first[0].sampling.seed, *first[1].sampling.seed);
  EXPECT_EQ(first[2].sampling.seed, 99u);  // a request's own seed wins
  // The same server seed gives the same streams, in the order requests arrive.
  server_->shutdown(std::chrono::milliseconds(0));
  start([](ApiServerOptions& o) { o.api.seed = 7; });
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1, "n": 2})").status, 200);
  const auto again = generator_.submitted();
  EXPECT_EQ(again[3].sampling.seed, first[0].sampling.seed);
  EXPECT_EQ(again[4].sampling.seed, first[1].sampling.seed);
}

TEST_F(ApiFlagsTest, WithoutTheServerSeedRequestsStayUnseeded) {
  start();
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1})").status, 200);
  EXPECT_FALSE(generator_.submitted().front().sampling.seed);
}

TEST_F(ApiFlagsTest, LogsOneLinePerRequest) {
  std::mutex mutex;
  std::vector<std::string> lines;
  start([&](ApiServerOptions& o) {
    o.api.request_log = [&](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  });
  const auto reply = post("/v1/completions", R"({"prompt": ["Hi", "Hey"], "max_tokens": 3, "n": 2})");
  ASSERT_EQ(reply.status, 200);
  std::lock_guard lock(mutex);
  EXPECT_THAT(lines,
              ElementsAre("request cmpl-" + reply.header("x-request-id") + ": prompt tokens 2, 3, max_tokens 3, n 2"));
}

TEST_F(ApiFlagsTest, RequestTemplatesNeedTheServersTrust) {
  start();
  expect_error(chat(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template": "{{ 'x' }}"})"), 400,
               "BadRequestError", "chat_template", "--trust-request-chat-template is not set");
  expect_error(chat(R"({"messages": [{"role": "user", "content": "Hi"}],
                       "chat_template_kwargs": {"chat_template": "{{ 'x' }}"}})"),
               400, "BadRequestError", "chat_template", "--trust-request-chat-template is not set");
  EXPECT_EQ(generator_.submitted_count(), 0u);
}

TEST_F(ApiFlagsTest, TrustedRequestTemplatesAreRendered) {
  start([](ApiServerOptions& o) { o.api.chat.trust_request_chat_template = true; });
  ASSERT_EQ(chat(R"({"messages": [{"role": "user", "content": "Hi"}],
                     "chat_template": "[{{ messages[0]['content'] }}]"})")
                .status,
            200);
  EXPECT_EQ(last_prompt(), "[Hi]");
  ASSERT_EQ(chat(R"json({"messages": [{"role": "user", "content": "Yo"}],
                     "chat_template_kwargs": {"chat_template": "({{ messages[0]['content'] }})"}})json")
                .status,
            200);
  EXPECT_EQ(last_prompt(), "(Yo)");
  expect_error(chat(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template": "{% if %}"})"), 400,
               "BadRequestError", "chat_template", "The request's chat_template cannot be used");
}

TEST_F(ApiFlagsTest, DefaultKwargsGoToEveryRequestUnderTheRequestsOwn) {
  start([](ApiServerOptions& o) { o.api.chat.default_kwargs_json = R"({"enable_thinking": false})"; });
  ASSERT_EQ(chat(R"({"messages": [{"role": "user", "content": "Hi"}]})").status, 200);
  EXPECT_THAT(last_prompt(), HasSubstr("<think>\n\n</think>"));
  ASSERT_EQ(chat(R"({"messages": [{"role": "user", "content": "Hi"}],
                     "chat_template_kwargs": {"enable_thinking": true}})")
                .status,
            200);
  EXPECT_THAT(last_prompt(), ::testing::Not(HasSubstr("<think>")));
}

// A template that shows each message's content as the template receives it.
constexpr std::string_view kShowContent =
    R"({% for m in messages %}{{ m['role'] }}={{ m['content'] | tojson }};{% endfor %})";

TEST_F(ApiFlagsTest, ContentFormatsAsVllmHandsThemToTemplates) {
  for (const auto& [format, shown] : std::vector<std::pair<ContentFormat, std::string>>{
           {ContentFormat::kString, R"(user="a\nb";)"},
           {ContentFormat::kOpenAi, R"(user=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}];)"}}) {
    SCOPED_TRACE(shown);
    start([format = format](ApiServerOptions& o) {
      o.api.chat.content_format = format;
      o.api.chat.trust_request_chat_template = true;
    });
    const std::string body = R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                 {"type": "text", "text": "b"}]}], "add_generation_prompt": false,
                                 "chat_template": ")" +
                             std::string(kShowContent) + R"("})";
    ASSERT_EQ(chat(body).status, 200) << chat(body).body;
    EXPECT_EQ(last_prompt(), shown);
    server_->shutdown(std::chrono::milliseconds(0));
  }
}

TEST_F(ApiFlagsTest, AutoContentFormatFollowsTheTemplate) {
  start([](ApiServerOptions& o) { o.api.chat.trust_request_chat_template = true; });
  const auto body = [](std::string_view tmpl) {
    return R"({"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": false, "chat_template": ")" +
           std::string(tmpl) + R"("})";
  };
  // A template that loops over a message's content gets parts; the test model's ChatML template a string.
  ASSERT_EQ(
      chat(body("{% for m in messages %}{% for p in m['content'] %}<{{ p['text'] }}>{% endfor %}{% endfor %}")).status,
      200);
  EXPECT_EQ(last_prompt(), "<a>");
  ASSERT_EQ(chat(body(kShowContent)).status, 200);
  EXPECT_EQ(last_prompt(), R"(user="a";)");
}

TEST_F(ApiFlagsTest, MessagesInHistoryTakeEveryForm) {
  start([](ApiServerOptions& o) { o.api.chat.trust_request_chat_template = true; });
  ASSERT_EQ(chat(R"({"messages": [{"role": "developer", "content": "Be brief"},
                                  {"role": "user", "content": "Hi"},
                                  {"role": "assistant", "content": null},
                                  {"role": "assistant"},
                                  {"role": "tool", "content": [{"type": "text", "text": "42"}]}],
                     "add_generation_prompt": false, "chat_template": ")" +
                 std::string(kShowContent) + R"("})")
                .status,
            200);
  EXPECT_EQ(last_prompt(), R"(system="Be brief";user="Hi";assistant="";assistant="";tool="42";)");
}

}  // namespace
}  // namespace serverd::api
