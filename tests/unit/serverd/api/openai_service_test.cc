// The OpenAI service without sockets: an in-memory exchange shows what it answers while draining.
#include "serverd/api/openai_service.h"

#include <gtest/gtest.h>

#include "tests/support/serverd/fake_generator.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

class RecordingExchange final : public http::Exchange {
 public:
  explicit RecordingExchange(http::Request request) : request_(std::move(request)) {}
  const http::Request& request() const override { return request_; }
  void respond(http::Response response) override { response_ = std::move(response); }
  void start_stream(http::Response head) override { response_ = std::move(head); }
  void write(std::string data) override { response_.body += data; }
  void finish() override {}
  void on_abort(std::function<void()>) override {}
  void post(std::function<void()> task) override { task(); }

  const http::Response& response() const { return response_; }

 private:
  http::Request request_;
  http::Response response_;
};

http::Response call(OpenAiService& service, std::string method, std::string target, std::string body = {}) {
  auto exchange =
      std::make_shared<RecordingExchange>(http::Request{std::move(method), std::move(target), {}, std::move(body)});
  service.handle(exchange);
  return exchange->response();
}

TEST(OpenAiService, DrainingTurnsHealthAndNewGenerationsAway) {
  serverd_test::TestModel model;
  serverd_test::FakeGenerator generator({serverd_test::kEos});
  OpenAiService service(ApiOptions{});
  service.serve(model.info(), generator);
  EXPECT_EQ(call(service, "GET", "/health").status, 200);
  service.begin_drain();
  const auto health = call(service, "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, R"({"status":"draining"})");
  const auto refused = call(service, "POST", "/v1/completions", R"({"prompt": "x"})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(
      refused.body,
      R"({"error":{"message":"The server is shutting down","type":"ServiceUnavailableError","param":null,"code":503}})");
  EXPECT_EQ(call(service, "GET", "/metrics").status, 200);  // still observable
  EXPECT_EQ(generator.submitted_count(), 0u);
}

}  // namespace
}  // namespace serverd::api
