// POST /v1/responses over loopback against the fake Generator and the byte-level test model: the whole
// response and its stream (event order, sequence numbers, items), the chat path's prompt and usage, output
// parsing into reasoning, message and function_call items, the token limit, and refusals by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "tests/support/serverd/api_server_fixture.h"

namespace serverd::api {
namespace {

using serverd_test::bytes;
using serverd_test::expect_error;
using serverd_test::HttpConnection;
using serverd_test::json;
using serverd_test::kEos;
using serverd_test::str;
using ::testing::ElementsAre;
using ::testing::StartsWith;

constexpr std::string_view kReply =
    "<think>plan</think>Let me look.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
    "</tool_call>";

class ResponsesApiTest : public serverd_test::ApiServerTest {
 protected:
  void SetUp() override { reply("Hi there!"); }

  void reply(std::string text) {
    generator_.set_script([text](const GenerationRequest&) {
      std::vector<std::int32_t> out = bytes(text);
      out.push_back(kEos);
      return out;
    });
  }

  void start_with_parsers() {
    start([](ApiServerOptions& o) { o.api.parsers = ChatParserOptions{true, "hermes", "qwen3"}; });
  }

  struct Stream {
    std::vector<std::string> types;
    std::vector<rapidjson::Document> events;
  };

  Stream stream(std::string_view body) {
    HttpConnection c(server_->port());
    c.send_request("POST", "/v1/responses", body);
    const auto head = c.read_response_header();
    EXPECT_EQ(head.status, 200);
    EXPECT_THAT(head.header("content-type"), StartsWith("text/event-stream"));
    Stream s;
    while (auto event = c.next_event()) {
      s.events.push_back(json(*event));
      s.types.push_back(str(s.events.back()["type"]));
      EXPECT_EQ(s.events.back()["sequence_number"].GetInt(), static_cast<int>(s.events.size()) - 1);
    }
    return s;
  }
};

TEST_F(ResponsesApiTest, WholeResponseIsTheChatPathsGeneration) {
  start();
  const auto reply = post("/v1/responses", R"({"model": "test-model", "input": "Hi", "instructions": "Be brief.",
                                             "metadata": {"k": "v"}, "store": true})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto r = json(reply.body);
  EXPECT_THAT(str(r["id"]), StartsWith("resp_"));
  EXPECT_EQ(str(r["object"]), "response");
  EXPECT_EQ(str(r["status"]), "completed");
  EXPECT_EQ(str(r["model"]), "test-model");
  EXPECT_EQ(str(r["instructions"]), "Be brief.");
  EXPECT_EQ(str(r["metadata"]["k"]), "v");
  ASSERT_EQ(r["output"].Size(), 1u);
  const auto& message = r["output"][0];
  EXPECT_EQ(str(message["type"]), "message");
  EXPECT_EQ(str(message["role"]), "assistant");
  EXPECT_EQ(str(message["status"]), "completed");
  EXPECT_EQ(str(message["content"][0]["type"]), "output_text");
  EXPECT_EQ(str(message["content"][0]["text"]), "Hi there!");

  // The same conversation through /v1/chat/completions: the same prompt and the same generation.
  const auto chat = json(post("/v1/chat/completions", R"({"messages": [{"role": "system", "content": "Be brief."},
                                                                       {"role": "user", "content": "Hi"}]})")
                             .body);
  EXPECT_EQ(r["usage"]["input_tokens"].GetInt(), chat["usage"]["prompt_tokens"].GetInt());
  EXPECT_EQ(r["usage"]["output_tokens"].GetInt(), chat["usage"]["completion_tokens"].GetInt());
  EXPECT_EQ(r["usage"]["total_tokens"].GetInt(), chat["usage"]["total_tokens"].GetInt());
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"].GetInt(), 0);
}

TEST_F(ResponsesApiTest, StreamSendsVllmsEventSequenceAndEndsWithTheWholeResponse) {
  start();
  const auto s = stream(R"({"input": "Hi", "stream": true})");
  ASSERT_GE(s.types.size(), 8u);
  EXPECT_EQ(s.types[0], "response.created");
  EXPECT_EQ(s.types[1], "response.in_progress");
  EXPECT_EQ(s.types[2], "response.output_item.added");
  EXPECT_EQ(s.types[3], "response.content_part.added");
  std::string text;
  std::size_t i = 4;
  for (; s.types[i] == "response.output_text.delta"; ++i) text += str(s.events[i]["delta"]);
  EXPECT_EQ(text, "Hi there!");
  std::vector<std::string> tail(s.types.begin() + static_cast<std::ptrdiff_t>(i), s.types.end());
  EXPECT_THAT(tail, ElementsAre("response.output_text.done", "response.content_part.done", "response.output_item.done",
                                "response.completed"));
  EXPECT_EQ(str(s.events[0]["response"]["status"]), "in_progress");
  EXPECT_TRUE(s.events[0]["response"]["usage"].IsNull());
  const auto& done = s.events.back()["response"];
  EXPECT_EQ(str(done["status"]), "completed");
  EXPECT_EQ(str(done["output"][0]["content"][0]["text"]), "Hi there!");
  EXPECT_EQ(str(done["output"][0]["id"]), str(s.events[2]["item"]["id"]));
  EXPECT_EQ(done["usage"]["output_tokens"].GetInt(), 10);  // the 9 bytes and the EOS
}

TEST_F(ResponsesApiTest, ParsersTurnTheTextIntoReasoningMessageAndFunctionCallItems) {
  start_with_parsers();
  reply(std::string(kReply));
  const std::string body =
      R"({"input": "Weather in Paris?", "tools": [{"type": "function", "name": "get_weather", "parameters": {}}])";
  const auto r = json(post("/v1/responses", body + "}").body);
  ASSERT_EQ(r["output"].Size(), 3u) << r["output"].Size();
  EXPECT_EQ(str(r["output"][0]["type"]), "reasoning");
  EXPECT_EQ(str(r["output"][0]["content"][0]["text"]), "plan");
  EXPECT_EQ(str(r["output"][1]["content"][0]["text"]), "Let me look.");
  const auto& call = r["output"][2];
  EXPECT_EQ(str(call["type"]), "function_call");
  EXPECT_EQ(str(call["name"]), "get_weather");
  EXPECT_EQ(str(call["arguments"]), R"({"city": "Paris"})");
  EXPECT_FALSE(str(call["call_id"]).empty());
  EXPECT_GT(r["usage"]["output_tokens_details"]["reasoning_tokens"].GetInt(), 0);

  const auto s = stream(body + R"(, "stream": true})");
  const auto& done = s.events.back()["response"];
  ASSERT_EQ(done["output"].Size(), 3u);
  for (rapidjson::SizeType k = 0; k < 3; ++k) EXPECT_EQ(str(done["output"][k]["type"]), str(r["output"][k]["type"]));
  EXPECT_EQ(str(done["output"][2]["arguments"]), R"({"city": "Paris"})");
  EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"].GetInt(),
            r["usage"]["output_tokens_details"]["reasoning_tokens"].GetInt());
  const auto has = [&](std::string_view type) {
    return std::find(s.types.begin(), s.types.end(), type) != s.types.end();
  };
  EXPECT_TRUE(has("response.reasoning_text.delta"));
  EXPECT_TRUE(has("response.reasoning_text.done"));
  EXPECT_TRUE(has("response.function_call_arguments.delta"));
  EXPECT_TRUE(has("response.function_call_arguments.done"));
}

TEST_F(ResponsesApiTest, TheTokenLimitMakesTheResponseIncomplete) {
  start();
  const auto r = json(post("/v1/responses", R"({"input": "Hi", "max_output_tokens": 2})").body);
  EXPECT_EQ(str(r["status"]), "incomplete");
  EXPECT_EQ(str(r["incomplete_details"]["reason"]), "max_output_tokens");
  EXPECT_EQ(str(r["output"][0]["content"][0]["text"]), "Hi");
  EXPECT_EQ(r["max_output_tokens"].GetInt(), 2);
}

TEST_F(ResponsesApiTest, RefusalsNameTheField) {
  start();
  expect_error(post("/v1/responses", R"({"input": "Hi", "seed": 1})"), 400, "BadRequestError", "seed",
               "'seed' is not supported");
  expect_error(post("/v1/responses", R"({"input": "Hi", "previous_response_id": "resp_x"})"), 404, "NotFoundError",
               "previous_response_id", "Response with id 'resp_x' not found");
  expect_error(post("/v1/responses", R"({"input": "Hi", "model": "other"})"), 404, "NotFoundError", "model",
               "The model `other` does not exist.");
  expect_error(post("/v1/responses", R"({"input": "Hi", "tools": [{"type": "function", "name": "f"}]})"), 400,
               "BadRequestError", "tool_choice", "--enable-auto-tool-choice");
  expect_error(get("/v1/responses/resp_x"), 404, "NotFoundError", std::nullopt, "serverd stores no responses");
  // Still serving.
  EXPECT_EQ(post("/v1/responses", R"({"input": "Hi"})").status, 200);
}

}  // namespace
}  // namespace serverd::api
