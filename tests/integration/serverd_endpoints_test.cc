// vLLM's endpoints beyond completions over loopback: /ping as /health, /invocations routed by the body's
// shape, /load, and the endpoints vLLM has (or does not have) that serverd refuses by name, each with its
// status and sentence in OpenAI's error shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/serverd/api_server_fixture.h"

namespace {

using serverd_test::expect_error;
using serverd_test::FakeGenerator;
using serverd_test::HttpConnection;
using serverd_test::json;
using serverd_test::str;

class EndpointsTest : public serverd_test::ApiServerTest {};

TEST_F(EndpointsTest, PingAnswersAsHealthForGetAndPost) {
  start({}, /*serve=*/false);
  server_->set_phase("loading");
  auto reply = get("/ping");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, R"({"status":"loading"})");
  server_->serve(model_.info(256), generator_);
  for (const char* method : {"GET", "POST"}) {
    reply = serverd_test::http_request(server_->port(), method, "/ping");
    EXPECT_EQ(reply.status, 200) << method;
    EXPECT_EQ(reply.body, "") << method;
  }
  reply = serverd_test::http_request(server_->port(), "PUT", "/ping");
  expect_error(reply, 405, "MethodNotAllowedError", std::nullopt, "Method Not Allowed");
  EXPECT_EQ(reply.header("allow"), "GET, POST");
}

TEST_F(EndpointsTest, InvocationsTakesTheEndpointTheBodysShapeImplies) {
  start();
  auto d = json(post("/invocations", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3})").body);
  EXPECT_EQ(str(d["object"]), "chat.completion");
  EXPECT_THAT(str(d["id"]), ::testing::StartsWith("chatcmpl-"));
  d = json(post("/invocations", R"({"prompt": "abc"})").body);
  EXPECT_EQ(str(d["object"]), "text_completion");
  EXPECT_EQ(str(d["choices"][0]["text"]), "abc");
  // A body of neither shape, and a bad field of the shape it has, as the endpoints answer them.
  expect_error(post("/invocations", R"({"input": "x"})"), 400, "BadRequestError", std::nullopt,
               "Cannot find suitable handler for request. Expected one of: ['ChatCompletionRequest', "
               "'CompletionRequest']");
  expect_error(post("/invocations", R"({"prompt": "x", "n": 0})"), 400, "BadRequestError", "n",
               "n must be at least 1, got 0.");
  expect_error(post("/invocations", R"({"prompt": )"), 400, "BadRequestError", std::nullopt, "Invalid JSON");
  EXPECT_EQ(generator_.submitted_count(), 2u);
}

TEST_F(EndpointsTest, LoadCountsGenerationRequestsUntilTheirResponseEnds) {
  start();
  EXPECT_EQ(get("/load").body, R"({"server_load":0})");
  generator_.hold_after(1);
  HttpConnection streaming(server_->port());
  streaming.send_request("POST", "/v1/completions", R"({"prompt": "Hello", "stream": true})");
  ASSERT_TRUE(generator_.wait_until([](const FakeGenerator& g) { return g.holding_count(1) == 1; }));
  EXPECT_EQ(get("/load").body, R"({"server_load":1})");
  generator_.release();
  ASSERT_EQ(streaming.read_response().status, 200);
  EXPECT_EQ(get("/load").body, R"({"server_load":0})");
}

TEST_F(EndpointsTest, EndpointsServerdDoesNotServeAreRefusedByName) {
  start();
  struct Case {
    std::string method;
    std::string target;
    int status;
    std::string type;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"GET", "/v1/models/test-model", 404, "NotFoundError", "GET /v1/models/{model} is not an endpoint"},
      {"GET", "/v1/models/org/name", 404, "NotFoundError", "GET /v1/models lists the served model"},
      {"GET", "/v1/responses/resp-1", 404, "NotFoundError", "serverd stores no responses"},
      {"POST", "/v1/responses/resp-1/cancel", 404, "NotFoundError", "no response to retrieve or cancel"},
      {"POST", "/pooling", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/classify", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/score", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/v1/score", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/rerank", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/v1/rerank", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/v2/rerank", 501, "NotImplementedError", "pooling endpoints"},
      {"POST", "/v1/audio/transcriptions", 501, "NotImplementedError", "no speech-to-text models"},
      {"POST", "/v1/audio/translations", 501, "NotImplementedError", "no speech-to-text models"},
      {"POST", "/v1/audio/speech", 404, "NotFoundError", "Text-to-speech (/v1/audio/speech) is not an endpoint"},
      {"POST", "/v1/images/generations", 404, "NotFoundError", "Image generation (/v1/images/*)"},
      {"POST", "/v1/images/edits", 404, "NotFoundError", "Image generation"},
      {"POST", "/v1/images/variations", 404, "NotFoundError", "Image generation"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target);
    expect_error(serverd_test::http_request(server_->port(), c.method, c.target, "{}"), c.status, c.type, std::nullopt,
                 c.message);
  }
  // Near misses are ordinary 404s.
  for (const char* target : {"/v1/models/", "/v1/responses/resp-1/other", "/v1/embeddings/x"}) {
    expect_error(get(target), 404, "NotFoundError", std::nullopt, "Not Found");
    EXPECT_EQ(str(json(get(target).body)["error"]["message"]), "Not Found") << target;
  }
  EXPECT_EQ(generator_.submitted_count(), 0u);
}

TEST_F(EndpointsTest, ApiKeyGuardsTheRefusedV1EndpointsToo) {
  start([](serverd::api::ApiServerOptions& o) { o.api.api_keys = {"sekrit"}; });
  expect_error(post("/v1/score", "{}"), 401, "AuthenticationError", std::nullopt, "Unauthorized");
  expect_error(post("/v1/score", "{}", {"Authorization: Bearer sekrit"}), 501, "NotImplementedError", std::nullopt,
               "pooling endpoints");
  EXPECT_EQ(get("/ping").status, 200);
  EXPECT_EQ(post("/invocations", R"({"prompt": "x"})").status, 200);  // not under /v1, as in vLLM
}

}  // namespace
