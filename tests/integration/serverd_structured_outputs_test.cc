// Structured outputs end to end over loopback: a tiny random-weight model (which writes noise unless
// constrained) served as serverd serves any model, asked for every kind of constraint in every place a
// client puts one (response_format, structured_outputs, guided_*), on chat and completions, whole and
// streamed, n > 1, seeded sampling, max_tokens too small, bad constraints; tool_choice "required" and a
// named function answered as tool_calls; the Responses API's text.format and forced tool_choice. Every
// output is checked against its constraint here, independently of the grammar engine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/serverd/api_test_fixture.h"
#include "tests/support/serverd/tiny_model_server.h"

namespace serverd::api {
namespace {

using serverd_test::ClientOptions;
using serverd_test::TinyModelServer;
using ::testing::HasSubstr;

// A person: every value bounded (random weights never close an unbounded string).
constexpr std::string_view kPersonSchema =
    R"({"type": "object", "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 8},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "role": {"enum": ["admin", "user", "guest"]},
          "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
          "active": {"type": "boolean"}},
        "required": ["name", "age", "role", "active"], "additionalProperties": false})";

constexpr std::string_view kRegex = R"([a-z]{3}-\\d{2})";  // as written inside a JSON string
const std::regex kRegexChecked(R"([a-z]{3}-\d{2})");

// A GBNF grammar and a regular expression of the same language, to check outputs without the engine.
constexpr std::string_view kGrammar = R"(root ::= \"(\" item (\",\" item){0,3} \")\"\nitem ::= [0-9] | \"x\")";
const std::regex kGrammarChecked(R"(\((?:[0-9]|x)(?:,(?:[0-9]|x)){0,3}\))");

constexpr std::string_view kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {
            "city": {"enum": ["Paris", "Oslo", "Lima"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "maxLength": 6}}, "required": ["zone"], "additionalProperties": false}}}])";

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  return d;
}

std::string as_text(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : "<not a string>";
}

std::size_t utf8_length(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// `text` is a person: what kPersonSchema says, keyword by keyword.
void expect_person(const std::string& text) {
  SCOPED_TRACE(text);
  const auto d = parsed(text);
  ASSERT_FALSE(d.HasParseError());
  ASSERT_TRUE(d.IsObject());
  for (const auto& member : d.GetObject()) {
    EXPECT_THAT((std::set<std::string>{"name", "age", "role", "tags", "active"}),
                ::testing::Contains(as_text(member.name)));
  }
  ASSERT_TRUE(d.HasMember("name") && d["name"].IsString());
  const std::size_t name_length = utf8_length(as_text(d["name"]));
  EXPECT_GE(name_length, 1u);
  EXPECT_LE(name_length, 8u);
  ASSERT_TRUE(d.HasMember("age") && d["age"].IsInt64());
  EXPECT_GE(d["age"].GetInt64(), 0);
  EXPECT_LE(d["age"].GetInt64(), 120);
  ASSERT_TRUE(d.HasMember("role"));
  EXPECT_THAT((std::set<std::string>{"admin", "user", "guest"}), ::testing::Contains(as_text(d["role"])));
  ASSERT_TRUE(d.HasMember("active") && d["active"].IsBool());
  if (d.HasMember("tags")) {
    ASSERT_TRUE(d["tags"].IsArray());
    EXPECT_LE(d["tags"].Size(), 3u);
    for (const auto& tag : d["tags"].GetArray()) {
      EXPECT_THAT((std::set<std::string>{"a", "b", "c"}), ::testing::Contains(as_text(tag)));
    }
  }
}

// A tool call's arguments as the tool's schema in kTools says.
void expect_arguments(const std::string& function, const std::string& arguments) {
  SCOPED_TRACE(function + "(" + arguments + ")");
  const auto d = parsed(arguments);
  ASSERT_FALSE(d.HasParseError());
  ASSERT_TRUE(d.IsObject());
  if (function == "get_weather") {
    EXPECT_EQ(d.MemberCount(), 2u);
    ASSERT_TRUE(d.HasMember("city") && d.HasMember("days") && d["days"].IsInt64());
    EXPECT_THAT((std::set<std::string>{"Paris", "Oslo", "Lima"}), ::testing::Contains(as_text(d["city"])));
    EXPECT_GE(d["days"].GetInt64(), 1);
    EXPECT_LE(d["days"].GetInt64(), 7);
  } else {
    ASSERT_EQ(function, "get_time");
    EXPECT_EQ(d.MemberCount(), 1u);
    ASSERT_TRUE(d.HasMember("zone") && d["zone"].IsString());
    EXPECT_LE(utf8_length(as_text(d["zone"])), 6u);
  }
}

class StructuredOutputsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<TinyModelServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  static ClientOptions client() {
    ClientOptions options;
    options.port = server_->port();
    options.timeout = std::chrono::seconds(120);
    return options;
  }
  static HttpReply post(std::string_view target, const std::string& body) {
    return serverd_test::http_request(client(), "POST", target, body);
  }
  // A 200 reply's JSON.
  static rapidjson::Document ok(std::string_view target, const std::string& body) {
    const HttpReply reply = post(target, body);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json(reply.body);
  }
  static Stream stream(std::string_view target, const std::string& body) {
    HttpConnection c(client());
    c.send_request("POST", target, body);
    return read_stream(c);
  }
  static std::string chat(const std::string& fields, std::string_view user = "Tell me about someone.") {
    return R"({"model": "tiny", "messages": [{"role": "user", "content": ")" + std::string(user) + R"("}], )" + fields +
           "}";
  }
  static std::string completion(const std::string& fields) {
    return R"({"model": "tiny", "prompt": "Once upon a time", )" + fields + "}";
  }

  static std::unique_ptr<TinyModelServer> server_;
};

std::unique_ptr<TinyModelServer> StructuredOutputsTest::server_;

// The content of every choice of a chat reply, each ended by `finish`.
std::vector<std::string> contents(const rapidjson::Document& d, std::string_view finish = "stop") {
  std::vector<std::string> out;
  for (const auto& choice : d["choices"].GetArray()) {
    EXPECT_EQ(as_text(choice["finish_reason"]), finish);
    out.push_back(choice.HasMember("message") ? as_text(choice["message"]["content"]) : as_text(choice["text"]));
  }
  return out;
}

TEST_F(StructuredOutputsTest, ResponseFormatJsonSchemaMatchesTheSchemaInEveryChoice) {
  const auto d =
      ok("/v1/chat/completions",
         chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "person", "strict": true,
                           "schema": )" +
              std::string(kPersonSchema) + R"(}}, "n": 3, "temperature": 1.0, "seed": 5, "max_tokens": 300)"));
  const auto outputs = contents(d);
  ASSERT_EQ(outputs.size(), 3u);
  for (const auto& text : outputs) expect_person(text);
}

TEST_F(StructuredOutputsTest, GuidedJsonAndStructuredOutputsJsonOnCompletions) {
  for (const std::string& field : {R"("guided_json": )" + std::string(kPersonSchema),
                                   R"("structured_outputs": {"json": )" + std::string(kPersonSchema) + "}"}) {
    SCOPED_TRACE(field);
    const auto d = ok("/v1/completions", completion(field + R"(, "max_tokens": 300, "temperature": 0.8, "seed": 2)"));
    for (const auto& text : contents(d)) expect_person(text);
  }
}

// json_object is any object; a logit bias towards the quote and the closing brace keeps random weights from
// writing one string for ever, and the mask still decides what is allowed.
TEST_F(StructuredOutputsTest, ResponseFormatJsonObjectIsAnObject) {
  const auto& tokenizer = *server_->model().tokenizer;
  const auto quote = tokenizer.encode("\"", false);
  const auto brace = tokenizer.encode("}", false);
  ASSERT_EQ(quote.size(), 1u);
  ASSERT_EQ(brace.size(), 1u);
  const std::string bias =
      R"("logit_bias": {")" + std::to_string(quote[0]) + R"(": 8, ")" + std::to_string(brace[0]) + R"(": 8})";
  const auto d = ok("/v1/chat/completions", chat(R"("response_format": {"type": "json_object"}, "max_tokens": 200, )"
                                                 R"("temperature": 1.0, "seed": 3, "n": 2, )" +
                                                 bias));
  for (const auto& text : contents(d)) {
    const auto object = parsed(text);
    EXPECT_FALSE(object.HasParseError()) << text;
    EXPECT_TRUE(object.IsObject()) << text;
  }
}

TEST_F(StructuredOutputsTest, RegexesMatchWholeOnChatAndCompletions) {
  const std::string regex(kRegex);
  for (const std::string& field :
       {R"("structured_outputs": {"regex": ")" + regex + R"("})", R"("guided_regex": ")" + regex + R"(")"}) {
    SCOPED_TRACE(field);
    for (const auto& text : contents(ok("/v1/chat/completions", chat(field + R"(, "n": 2, "temperature": 1.0)")))) {
      EXPECT_TRUE(std::regex_match(text, kRegexChecked)) << text;
    }
    for (const auto& text : contents(ok("/v1/completions", completion(field + R"(, "max_tokens": 20)")))) {
      EXPECT_TRUE(std::regex_match(text, kRegexChecked)) << text;
    }
  }
}

TEST_F(StructuredOutputsTest, ChoicesAreOneOfTheChoices) {
  const std::set<std::string> colours = {"red", "green", "blue"};
  for (const std::string& field : {std::string(R"("structured_outputs": {"choice": ["red", "green", "blue"]})"),
                                   std::string(R"("guided_choice": ["red", "green", "blue"])")}) {
    SCOPED_TRACE(field);
    for (const auto& text : contents(ok("/v1/chat/completions", chat(field + R"(, "n": 4, "temperature": 1.5)")))) {
      EXPECT_THAT(colours, ::testing::Contains(text));
    }
  }
}

TEST_F(StructuredOutputsTest, GrammarsParse) {
  const std::string grammar(kGrammar);
  for (const std::string& field :
       {R"("structured_outputs": {"grammar": ")" + grammar + R"("})", R"("guided_grammar": ")" + grammar + R"(")"}) {
    SCOPED_TRACE(field);
    for (const auto& text : contents(ok("/v1/completions", completion(field + R"(, "n": 3, "temperature": 1.0, )"
                                                                              R"("max_tokens": 40)")))) {
      EXPECT_TRUE(std::regex_match(text, kGrammarChecked)) << text;
    }
  }
}

// The stream's deltas add up to what the whole response holds for the same seed, and are valid.
TEST_F(StructuredOutputsTest, StreamedDeltasAddUpToTheWholeResponse) {
  const std::string fields = R"("guided_json": )" + std::string(kPersonSchema) +
                             R"(, "temperature": 1.0, "seed": 9, "max_tokens": 300, "n": 2)";
  const auto whole = contents(ok("/v1/chat/completions", chat(fields)));
  const Stream s = stream("/v1/chat/completions", chat(fields + R"(, "stream": true)"));
  ASSERT_TRUE(s.done);
  std::vector<std::string> joined(2);
  std::vector<std::string> finish(2);
  for (const auto& event : s.events) {
    for (const auto& choice : event["choices"].GetArray()) {
      const auto i = choice["index"].GetUint64();
      if (choice["delta"].HasMember("content")) joined.at(i) += as_text(choice["delta"]["content"]);
      if (choice["finish_reason"].IsString()) finish.at(i) = as_text(choice["finish_reason"]);
    }
  }
  EXPECT_EQ(joined, whole);
  EXPECT_EQ(finish, (std::vector<std::string>{"stop", "stop"}));
  for (const auto& text : joined) expect_person(text);

  const Stream completion_stream = stream("/v1/completions", completion(R"("guided_regex": ")" + std::string(kRegex) +
                                                                        R"(", "stream": true, "max_tokens": 20)"));
  std::string text;
  for (const auto& event : completion_stream.events) text += as_text(event["choices"][0]["text"]);
  EXPECT_TRUE(std::regex_match(text, kRegexChecked)) << text;
}

TEST_F(StructuredOutputsTest, MaxTokensBeforeTheConstraintEndsIsLength) {
  const auto d = ok("/v1/completions", completion(R"("guided_regex": "[a-z]{40}", "max_tokens": 5)"));
  const auto outputs = contents(d, "length");
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(std::regex_match(outputs[0], std::regex("[a-z]{1,39}"))) << outputs[0];
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 5);
}

TEST_F(StructuredOutputsTest, BadConstraintsAreA400NamingThePosition) {
  expect_error(post("/v1/chat/completions",
                    chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
                           {"type": "object", "properties": {"a": {"type": "strin"}}}}})")),
               400, "BadRequestError", "response_format", "/properties/a");
  expect_error(post("/v1/completions", completion(R"("guided_regex": "(ab")")), 400, "BadRequestError", "guided_regex",
               "Invalid 'guided_regex'");
  expect_error(post("/v1/completions", completion(R"("structured_outputs": {"grammar": "root ::= \"a\" |\nx ::= )"
                                                  R"(\"b\" (\" }"})")),
               400, "BadRequestError", "structured_outputs.grammar", "line 2");
}

// tool_choice names a function: the output is its arguments, answered as one call of it ("stop", content "").
TEST_F(StructuredOutputsTest, ANamedToolChoiceIsOneCallOfThatFunction) {
  const std::string fields = R"("tools": )" + std::string(kTools) +
                             R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, )"
                             R"("temperature": 1.0, "seed": 4, "max_tokens": 200, "n": 2)";
  const auto d = ok("/v1/chat/completions", chat(fields, "Weather?"));
  std::vector<std::string> arguments;
  for (const auto& choice : d["choices"].GetArray()) {
    EXPECT_EQ(as_text(choice["finish_reason"]), "stop");
    const auto& message = choice["message"];
    EXPECT_EQ(as_text(message["content"]), "");
    ASSERT_EQ(message["tool_calls"].Size(), 1u);
    const auto& call = message["tool_calls"][0];
    EXPECT_THAT(as_text(call["id"]), ::testing::StartsWith("chatcmpl-tool-"));
    EXPECT_EQ(as_text(call["type"]), "function");
    EXPECT_EQ(as_text(call["function"]["name"]), "get_weather");
    arguments.push_back(as_text(call["function"]["arguments"]));
    expect_arguments("get_weather", arguments.back());
  }

  // Streamed: the call's header with its first text, then argument pieces adding up to the same arguments.
  const Stream s = stream("/v1/chat/completions", chat(fields + R"(, "stream": true)", "Weather?"));
  std::vector<std::string> streamed(2);
  std::vector<int> headers(2);
  for (const auto& event : s.events) {
    for (const auto& choice : event["choices"].GetArray()) {
      const auto i = choice["index"].GetUint64();
      if (choice["finish_reason"].IsString()) {
        EXPECT_EQ(as_text(choice["finish_reason"]), "stop");
      }
      if (!choice["delta"].HasMember("tool_calls")) continue;
      for (const auto& piece : choice["delta"]["tool_calls"].GetArray()) {
        EXPECT_EQ(piece["index"].GetInt(), 0);
        if (piece.HasMember("id")) {
          ++headers.at(i);
          EXPECT_EQ(as_text(piece["function"]["name"]), "get_weather");
        }
        if (piece["function"].HasMember("arguments")) streamed.at(i) += as_text(piece["function"]["arguments"]);
      }
    }
  }
  EXPECT_EQ(headers, (std::vector<int>{1, 1}));
  EXPECT_EQ(streamed, arguments);
}

// tool_choice "required": a JSON array of calls of the tools, answered as tool_calls ("tool_calls").
TEST_F(StructuredOutputsTest, RequiredToolChoiceIsCallsOfTheTools) {
  const std::string fields = R"("tools": )" + std::string(kTools) +
                             R"(, "tool_choice": "required", "temperature": 1.0, "max_tokens": 400, "n": 3, "seed": 8)";
  const auto d = ok("/v1/chat/completions", chat(fields, "Weather and time?"));
  std::vector<std::vector<std::string>> whole;  // per choice: name(arguments) of each call
  for (const auto& choice : d["choices"].GetArray()) {
    EXPECT_EQ(as_text(choice["finish_reason"]), "tool_calls");
    const auto& message = choice["message"];
    EXPECT_EQ(as_text(message["content"]), "");
    ASSERT_GE(message["tool_calls"].Size(), 1u);
    whole.emplace_back();
    for (const auto& call : message["tool_calls"].GetArray()) {
      const std::string name = as_text(call["function"]["name"]);
      expect_arguments(name, as_text(call["function"]["arguments"]));
      whole.back().push_back(name + as_text(call["function"]["arguments"]));
    }
  }

  const Stream s = stream("/v1/chat/completions", chat(fields + R"(, "stream": true)", "Weather and time?"));
  std::vector<std::vector<std::string>> streamed(3);
  for (const auto& event : s.events) {
    for (const auto& choice : event["choices"].GetArray()) {
      const auto i = choice["index"].GetUint64();
      if (choice["finish_reason"].IsString()) {
        EXPECT_EQ(as_text(choice["finish_reason"]), "tool_calls");
      }
      if (!choice["delta"].HasMember("tool_calls")) continue;
      for (const auto& piece : choice["delta"]["tool_calls"].GetArray()) {
        const auto index = static_cast<std::size_t>(piece["index"].GetInt());
        if (piece.HasMember("id")) {
          ASSERT_EQ(index, streamed.at(i).size());
          streamed.at(i).push_back(as_text(piece["function"]["name"]));
        }
        if (piece["function"].HasMember("arguments"))
          streamed.at(i).at(index) += as_text(piece["function"]["arguments"]);
      }
    }
  }
  EXPECT_EQ(streamed, whole);

  // parallel_tool_calls false: the first call only.
  const auto single = ok("/v1/chat/completions", chat(fields + R"(, "parallel_tool_calls": false)", "Weather?"));
  for (const auto& choice : single["choices"].GetArray()) EXPECT_EQ(choice["message"]["tool_calls"].Size(), 1u);
}

TEST_F(StructuredOutputsTest, ToolChoiceRefusalsInVllmsWords) {
  expect_error(
      post("/v1/chat/completions", chat(R"("tools": )" + std::string(kTools) +
                                        R"(, "tool_choice": {"type": "function", "function": {"name": "get_news"}})")),
      400, "BadRequestError", "tool_choice", "Tool 'get_news' has not been passed in `tools`.");
  expect_error(post("/v1/chat/completions", chat(R"("tools": )" + std::string(kTools) +
                                                 R"(, "tool_choice": "required", "guided_regex": "a+")")),
               400, "BadRequestError", "guided_regex",
               "You can only use one kind of structured outputs constraint but multiple are specified");
}

TEST_F(StructuredOutputsTest, ResponsesTextFormatAndForcedToolChoice) {
  const auto d = ok("/v1/responses", R"({"model": "tiny", "input": "Someone?", "max_output_tokens": 300,
                                         "text": {"format": {"type": "json_schema", "name": "person", "strict": true,
                                         "schema": )" +
                                         std::string(kPersonSchema) + "}}}");
  EXPECT_EQ(as_text(d["status"]), "completed");
  ASSERT_EQ(d["output"].Size(), 1u);
  expect_person(as_text(d["output"][0]["content"][0]["text"]));
  EXPECT_EQ(as_text(d["text"]["format"]["type"]), "json_schema");

  const auto call = ok("/v1/responses", R"({"model": "tiny", "input": "Weather?", "max_output_tokens": 200,
      "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"enum": ["Paris", "Oslo", "Lima"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"], "additionalProperties": false}}],
      "tool_choice": {"type": "function", "name": "get_weather"}})");
  ASSERT_EQ(call["output"].Size(), 1u);
  EXPECT_EQ(as_text(call["output"][0]["type"]), "function_call");
  EXPECT_EQ(as_text(call["output"][0]["name"]), "get_weather");
  expect_arguments("get_weather", as_text(call["output"][0]["arguments"]));
  EXPECT_EQ(as_text(call["tool_choice"]["name"]), "get_weather");
}

}  // namespace
}  // namespace serverd::api
