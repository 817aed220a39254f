#pragma once

// The OpenAI API over loopback against the fake Generator and the byte-level test model, as serverd's
// API tests share it: a server per test, requests on fresh connections, streams read event by event, and
// OpenAI's error shape checked. Chat prompts get the fake reply "Hi there!"; completion prompts are echoed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/api_server.h"
#include "tests/support/serverd/fake_generator.h"
#include "tests/support/serverd/http_test_client.h"
#include "tests/support/serverd/test_model.h"

namespace serverd_test {

inline rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

inline std::string str(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : "<not a string>";
}

struct Stream {
  HttpReply head;
  std::vector<rapidjson::Document> events;  // without the final [DONE]
  bool done = false;                        // [DONE] came last
};

inline Stream read_stream(HttpConnection& c) {
  Stream s;
  s.head = c.read_response_header();
  while (auto event = c.next_event()) {
    if (s.done) ADD_FAILURE() << "an event after [DONE]: " << *event;
    if (*event == "[DONE]") {
      s.done = true;
    } else {
      s.events.push_back(json(*event));
    }
  }
  return s;
}

// Expects OpenAI's error shape: {"error": {"message", "type", "param", "code"}} and nothing else.
inline void expect_error(const HttpReply& reply, int status, const std::string& type,
                         const std::optional<std::string>& param, const std::string& message_part) {
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

class OpenAiApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    generator_.set_script([](const serverd::api::GenerationRequest& request) {
      std::vector<std::int32_t> out =
          request.prompt_tokens.front() == kImStart ? bytes("Hi there!") : request.prompt_tokens;
      out.push_back(kEos);
      return out;
    });
  }
  void TearDown() override {
    if (server_) server_->shutdown(std::chrono::milliseconds(0));
  }

  void start(const std::function<void(serverd::api::ApiServerOptions&)>& tweak = {}, bool serve = true) {
    serverd::api::ApiServerOptions options;
    options.http.io_threads = 2;
    options.api.version = "9.9.9";
    if (tweak) tweak(options);
    server_ = std::make_unique<serverd::api::ApiServer>(std::move(options));
    server_->start();
    if (serve) server_->serve(model_.info(256), generator_);
  }

  HttpReply post(std::string_view target, std::string_view body, const std::vector<std::string>& headers = {}) {
    return http_request(server_->port(), "POST", target, body, headers);
  }
  HttpReply get(std::string_view target, const std::vector<std::string>& headers = {}) {
    return http_request(server_->port(), "GET", target, {}, headers);
  }
  Stream stream(std::string_view target, std::string_view body) {
    HttpConnection c(server_->port());
    c.send_request("POST", target, body);
    return read_stream(c);
  }
  std::size_t rendered_length(const std::string& text) const { return model_.tokenizer.encode(text, false).size(); }

  TestModel model_;
  FakeGenerator generator_{{kEos}};
  std::unique_ptr<serverd::api::ApiServer> server_;  // last: stopped before the generator and the model go
};

}  // namespace serverd_test
