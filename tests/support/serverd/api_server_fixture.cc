#include "tests/support/serverd/api_server_fixture.h"

#include <gmock/gmock.h>

#include <chrono>

namespace serverd_test {

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

std::string str(const rapidjson::Value& value) {
  return value.IsString() ? std::string(value.GetString(), value.GetStringLength()) : "<not a string>";
}

void expect_error(const HttpReply& reply, int status, const std::string& type, const std::optional<std::string>& param,
                  const std::string& message_part) {
  EXPECT_EQ(reply.status, status) << reply.body;
  EXPECT_EQ(reply.header("content-type"), "application/json");
  const auto d = json(reply.body);
  ASSERT_TRUE(d.IsObject() && d.MemberCount() == 1 && d.HasMember("error")) << reply.body;
  const auto& e = d["error"];
  ASSERT_EQ(e.MemberCount(), 4u) << reply.body;
  EXPECT_THAT(str(e["message"]), ::testing::HasSubstr(message_part));
  EXPECT_EQ(str(e["type"]), type);
  if (param) {
    EXPECT_EQ(str(e["param"]), *param) << reply.body;
  } else {
    EXPECT_TRUE(e["param"].IsNull()) << reply.body;
  }
  EXPECT_EQ(e["code"].GetInt(), status);
}

void ApiServerTest::TearDown() {
  if (server_) server_->shutdown(std::chrono::milliseconds(0));
}

void ApiServerTest::start(const std::function<void(serverd::api::ApiServerOptions&)>& tweak, bool serve) {
  serverd::api::ApiServerOptions options;
  options.http.io_threads = 2;
  options.api.version = "9.9.9";
  if (tweak) tweak(options);
  server_ = std::make_unique<serverd::api::ApiServer>(std::move(options));
  server_->start();
  if (serve) server_->serve(model_.info(256), generator_);
}

HttpReply ApiServerTest::post(std::string_view target, std::string_view body, const std::vector<std::string>& headers) {
  return http_request(server_->port(), "POST", target, body, headers);
}

HttpReply ApiServerTest::get(std::string_view target, const std::vector<std::string>& headers) {
  return http_request(server_->port(), "GET", target, {}, headers);
}

}  // namespace serverd_test
