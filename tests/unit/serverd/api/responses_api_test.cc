// The Responses API request translated into the chat path's request, its refusals by name, and the writers
// of output items, usage, the response object and its server-sent events.
#include "serverd/api/responses_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;

ResponsesRequest parse(std::string_view body, ChatParserOptions parsers = {}) {
  rapidjson::Document doc;
  parse_request_body(body, doc);
  return parse_responses_request(doc, ParseLimits{}, parsers);
}

ApiError refusal(std::string_view body, ChatParserOptions parsers = {}) {
  try {
    parse(body, parsers);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(ResponsesRequestTest, StringInputIsOneUserMessageAfterTheInstructions) {
  const auto r = parse(R"({"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 7,
                           "temperature": 0.5, "top_p": 0.9, "stream": true})");
  EXPECT_EQ(r.chat.messages.json, R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])");
  EXPECT_EQ(r.chat.common.model, "m");
  EXPECT_EQ(r.chat.common.max_tokens, 7u);
  EXPECT_FLOAT_EQ(*r.chat.common.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.chat.common.top_p, 0.9f);
  EXPECT_TRUE(r.chat.common.stream);
  EXPECT_EQ(r.instructions, "Be brief.");
  EXPECT_TRUE(r.chat.tools_json.empty());
}

TEST(ResponsesRequestTest, InputItemsBecomeChatMessages) {
  const auto r = parse(R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                      {"type": "input_text", "text": "b"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\"x\":1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "42"},
      {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]})");
  EXPECT_EQ(r.chat.messages.json,
            R"([{"role":"system","content":"Rules."},{"role":"user","content":"a\nb"},)"
            // As the template sees the chat path's messages: null content is "", arguments their JSON.
            R"({"role":"assistant","content":"","tool_calls":[)"
            R"({"id":"c1","type":"function","function":{"name":"f","arguments":{}}},)"
            R"({"id":"c2","type":"function","function":{"name":"g","arguments":{"x":1}}}]},)"
            R"({"role":"tool","content":"42","tool_call_id":"c1"},{"role":"assistant","content":"done"}])");
  EXPECT_EQ(r.chat.messages.last_role, "assistant");
}

TEST(ResponsesRequestTest, FunctionToolsAreFlattenedForTheTemplateAndEchoedAsGiven) {
  const std::string tools =
      R"([{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object"}}])";
  const auto none = parse(R"({"input": "x", "tool_choice": "none", "tools": )" + tools + "}");
  EXPECT_EQ(none.chat.tools_json, R"([{"type":"function","function":{"name":"get_weather","description":"Weather",)"
                                  R"("parameters":{"type":"object"}}}])");
  EXPECT_EQ(none.tools_json, tools);
  EXPECT_FALSE(none.parse_tool_calls);

  const auto automatic = parse(R"({"input": "x", "tools": )" + tools + "}", ChatParserOptions{true, "hermes", ""});
  EXPECT_TRUE(automatic.parse_tool_calls);
  EXPECT_EQ(automatic.tool_choice, R"("auto")");
}

TEST(ResponsesRequestTest, TextFormatAndForcedToolChoicesConstrainTheChatRequest) {
  const auto schema = parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s",
                                "schema": {"type": "object"}, "strict": true}}})");
  ASSERT_TRUE(schema.chat.common.structured_output);
  EXPECT_EQ(schema.chat.common.structured_output->field, "text.format");
  EXPECT_EQ(schema.chat.common.structured_output->spec.kind, engine::grammar::StructuredOutputSpec::Kind::JsonSchema);
  EXPECT_EQ(schema.chat.common.structured_output->spec.text, R"({"type":"object"})");
  const auto object = parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})");
  ASSERT_TRUE(object.chat.common.structured_output);
  EXPECT_EQ(object.chat.common.structured_output->spec.kind, engine::grammar::StructuredOutputSpec::Kind::JsonObject);
  EXPECT_FALSE(parse(R"({"input": "x", "text": {"format": {"type": "text"}}})").chat.common.structured_output);

  const std::string tools = R"([{"type": "function", "name": "f", "parameters": {"type": "object"}}])";
  const auto named =
      parse(R"({"input": "x", "tool_choice": {"type": "function", "name": "f"}, "tools": )" + tools + "}");
  EXPECT_EQ(named.chat.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.chat.tool_choice_name, "f");
  EXPECT_EQ(named.tool_choice, R"({"type":"function","name":"f"})");
  EXPECT_FALSE(named.parse_tool_calls);
  const auto required = parse(R"({"input": "x", "tool_choice": "required", "tools": )" + tools + "}");
  EXPECT_EQ(required.chat.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(required.tool_choice, R"("required")");
}

TEST(ResponsesRequestTest, EchoedFieldsAndReasoningEffort) {
  const auto r = parse(R"({"input": "x", "metadata": {"k": "v"}, "user": "u", "parallel_tool_calls": false,
                           "store": true, "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}},
                           "truncation": "disabled", "background": false, "include": [], "service_tier": "auto",
                           "top_logprobs": 0})");
  EXPECT_EQ(r.metadata_json, R"({"k":"v"})");
  EXPECT_EQ(r.user, "u");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.reasoning_json, R"({"effort":"low"})");
  EXPECT_EQ(r.text_json, R"({"format":{"type":"text"}})");
  EXPECT_EQ(r.chat.template_kwargs_json, R"({"reasoning_effort":"low"})");
}

TEST(ResponsesRequestTest, RefusesWhatItCannotHonourByName) {
  struct Case {
    std::string body;
    int status;
    std::string param;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"input": "x", "conversation": "c"})", 400, "conversation", "'conversation' is not supported"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", 404, "previous_response_id",
       "Response with id 'resp_1' not found"},
      {R"({"input": "x", "background": true})", 400, "background", "does not support `store=True`"},
      {R"({"input": "x", "tool_choice": "required"})", 400, "tool_choice", "`tools` must be set"},
      {R"({"input": "x", "tool_choice": {"type": "file_search"}, "tools": [{"type": "function", "name": "f"}]})", 400,
       "tool_choice", "a named tool choice must be {\"type\": \"function\", \"name\": ...}"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}]})", 400, "tool_choice",
       "--enable-auto-tool-choice"},
      {R"({"input": "x", "tools": [{"type": "web_search_preview"}], "tool_choice": "none"})", 400, "tools",
       "'web_search_preview'"},
      {R"({"input": "x", "text": {"format": {"type": "xml"}}})", 400, "text",
       "'text.format.type' must be 'text', 'json_object' or 'json_schema'; got 'xml'"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})", 400, "text", "needs a 'name'"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s"}}})", 400, "text",
       "needs a 'schema' object"},
      {R"({"input": "x", "truncation": "auto"})", 400, "truncation", "'auto'"},
      {R"({"input": "x", "reasoning": {"summary": "auto"}})", 400, "reasoning", "reasoning.summary"},
      {R"({"input": "x", "include": ["message.output_text.logprobs"]})", 400, "include", "'include'"},
      {R"({"input": "x", "top_logprobs": 2})", 400, "top_logprobs", "log-probabilities"},
      {R"({"input": "x", "max_output_tokens": 0})", 400, "max_output_tokens", "at least 1, got 0"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", 400, "input",
       "'input_image'"},
      {R"({"input": [{"type": "file_search_call"}]})", 400, "input", "'file_search_call'"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", 400, "input", "got 'tool'"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", 400, "input", "'call_id'"},
      {R"({"model": "m"})", 400, "input", "'input' is required"},
      {R"({"input": []})", 400, "input", "must not be an empty array"},
  };
  for (const Case& c : cases) {
    const ApiError e = refusal(c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(ResponsesWritersTest, OutputItemsOpenEmptyAndCloseWithTheirContent) {
  const auto write = [](const OutputItem& item, bool done) {
    JsonWriter w;
    write_output_item(w, item, done);
    return w.take();
  };
  const OutputItem message{OutputItem::Kind::kMessage, "msg_1", "Hi", "", ""};
  EXPECT_EQ(write(message, false),
            R"({"id":"msg_1","type":"message","role":"assistant","content":[],"status":"in_progress"})");
  EXPECT_EQ(write(message, true),
            R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi",)"
            R"("annotations":[],"logprobs":null}],"status":"completed"})");
  const OutputItem reasoning{OutputItem::Kind::kReasoning, "rs_1", "why", "", ""};
  EXPECT_EQ(write(reasoning, true),
            R"({"id":"rs_1","type":"reasoning","summary":[],"content":[{"text":"why","type":"reasoning_text"}],)"
            R"("encrypted_content":null,"status":null})");
  const OutputItem call{OutputItem::Kind::kFunctionCall, "fc_1", "{\"a\":1}", "call_9", "f"};
  EXPECT_EQ(
      write(call, false),
      R"({"id":"fc_1","type":"function_call","call_id":"call_9","name":"f","arguments":"","status":"in_progress"})");
  EXPECT_EQ(write(call, true), R"({"id":"fc_1","type":"function_call","call_id":"call_9","name":"f",)"
                               R"("arguments":"{\"a\":1}","status":"completed"})");
}

TEST(ResponsesWritersTest, UsageAndTheResponseObject) {
  JsonWriter w;
  write_response_usage(w, ResponseUsage{5, 3, 2});
  EXPECT_EQ(w.take(), R"({"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,)"
                      R"("output_tokens_details":{"reasoning_tokens":2,"tool_output_tokens":0},"total_tokens":8})");

  const auto request = parse(R"({"input": "x", "instructions": "I", "user": "u"})");
  ResponseEcho echo{"resp_a", 100, "m", &request, 0.5, 1.0, 16};
  rapidjson::Document doc;
  doc.Parse(response_json(echo, "incomplete", {}, ResponseUsage{1, 16, 0}).c_str());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["id"].GetString(), "resp_a");
  EXPECT_STREQ(doc["object"].GetString(), "response");
  EXPECT_EQ(doc["created_at"].GetInt64(), 100);
  EXPECT_STREQ(doc["status"].GetString(), "incomplete");
  EXPECT_STREQ(doc["incomplete_details"]["reason"].GetString(), "max_output_tokens");
  EXPECT_STREQ(doc["instructions"].GetString(), "I");
  EXPECT_STREQ(doc["user"].GetString(), "u");
  EXPECT_DOUBLE_EQ(doc["temperature"].GetDouble(), 0.5);
  EXPECT_EQ(doc["max_output_tokens"].GetInt(), 16);
  EXPECT_STREQ(doc["tool_choice"].GetString(), "auto");
  EXPECT_TRUE(doc["tools"].IsArray());
  EXPECT_EQ(doc["usage"]["total_tokens"].GetInt(), 17);

  doc.Parse(response_json(echo, "in_progress", {}, std::nullopt).c_str());
  EXPECT_TRUE(doc["usage"].IsNull());
  EXPECT_TRUE(doc["incomplete_details"].IsNull());
}

TEST(ResponsesWritersTest, EventsAreNamedBeforeTheirData) {
  EXPECT_EQ(responses_sse_event("response.created", R"({"type":"response.created"})"),
            "event: response.created\ndata: {\"type\":\"response.created\"}\n\n");
}

}  // namespace
}  // namespace serverd::api
