#pragma once

// What serverd's API tests over loopback share: an ApiServer on port 0 in front of a FakeGenerator and the
// byte-level test model, requests on fresh connections, and the checks of JSON replies and OpenAI errors.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

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

// `text` parsed; a parse error fails the test.
rapidjson::Document json(const std::string& text);
// A string value, or "<not a string>".
std::string str(const rapidjson::Value& value);

// Expects OpenAI's error shape: {"error": {"message", "type", "param", "code"}} and nothing else, with
// `message_part` in the message.
void expect_error(const HttpReply& reply, int status, const std::string& type, const std::optional<std::string>& param,
                  const std::string& message_part);

class ApiServerTest : public ::testing::Test {
 protected:
  void TearDown() override;

  // Starts the server (options tweaked first) and, unless told not to, serves the test model.
  void start(const std::function<void(serverd::api::ApiServerOptions&)>& tweak = {}, bool serve = true);
  HttpReply post(std::string_view target, std::string_view body, const std::vector<std::string>& headers = {});
  HttpReply get(std::string_view target, const std::vector<std::string>& headers = {});

  TestModel model_;
  FakeGenerator generator_{{kEos}};
  std::unique_ptr<serverd::api::ApiServer> server_;  // last: stopped before the generator and the model go
};

}  // namespace serverd_test
