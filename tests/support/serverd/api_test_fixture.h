#pragma once

// The fixture of serverd's OpenAI API tests over loopback: ApiServerTest (api_server_fixture.h) with chat
// prompts answered by a fixed reply and completion prompts echoed, and a reader of server-sent events.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <string_view>
#include <vector>

#include "tests/support/serverd/api_server_fixture.h"

namespace serverd::api {

using serverd_test::bytes;
using serverd_test::expect_error;
using serverd_test::FakeGenerator;
using serverd_test::HttpConnection;
using serverd_test::HttpReply;
using serverd_test::json;
using serverd_test::kEos;
using serverd_test::kImStart;
using serverd_test::str;

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

class OpenAiApiTest : public serverd_test::ApiServerTest {
 protected:
  void SetUp() override {
    // Chat prompts get a fixed reply; completion prompts are echoed.
    generator_.set_script([](const GenerationRequest& request) {
      std::vector<std::int32_t> out =
          request.prompt_tokens.front() == kImStart ? bytes("Hi there!") : request.prompt_tokens;
      out.push_back(kEos);
      return out;
    });
  }

  Stream stream(std::string_view target, std::string_view body) {
    HttpConnection c(server_->port());
    c.send_request("POST", target, body);
    return read_stream(c);
  }
  std::size_t rendered_length(const std::string& text) const { return model_.tokenizer.encode(text, false).size(); }
};

}  // namespace serverd::api
