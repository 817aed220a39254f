// Structured-output fields to one constraint: response_format, vLLM's structured_outputs and the older
// guided_* fields, each kind read from each place; two constraints, unsupported options and bad shapes
// refused by name.
#include "serverd/api/structured_output_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"
#include "serverd/api/protocol.h"

namespace serverd::api {
namespace {

using Kind = engine::grammar::StructuredOutputSpec::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::optional<StructuredOutputRequest> read(std::string_view body) {
  rapidjson::Document document;
  parse_request_body(body, document);
  return parse_structured_output(document);
}

ApiError error_of(std::string_view body) {
  try {
    read(body);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException for " << body;
  return {};
}

TEST(StructuredOutputRequest, NoneAskedForNoneGiven) {
  EXPECT_FALSE(read(R"({"prompt": "x"})"));
  EXPECT_FALSE(read(R"({"response_format": {"type": "text"}})"));
  EXPECT_FALSE(read(R"({"response_format": null, "structured_outputs": {"json_object": false}})"));
}

TEST(StructuredOutputRequest, ResponseFormatJsonSchemaAndJsonObject) {
  const auto schema = read(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "person",
      "strict": true, "description": "d", "schema": {"type": "object", "required": ["a"]}}}})");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->spec.kind, Kind::JsonSchema);
  EXPECT_EQ(schema->spec.text, R"({"type":"object","required":["a"]})");
  EXPECT_EQ(schema->field, "response_format");
  const auto object = read(R"({"response_format": {"type": "json_object"}})");
  ASSERT_TRUE(object);
  EXPECT_EQ(object->spec.kind, Kind::JsonObject);
}

TEST(StructuredOutputRequest, EveryStructuredOutputsKind) {
  auto r = read(R"({"structured_outputs": {"json": "{\"type\": \"integer\"}", "whitespace_pattern": " ?"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::JsonSchema);
  EXPECT_EQ(r->spec.text, R"({"type": "integer"})");  // a schema given as JSON text stays as given
  EXPECT_EQ(r->spec.whitespace_pattern, " ?");
  EXPECT_EQ(r->field, "structured_outputs.json");
  r = read(R"({"structured_outputs": {"regex": "[a-z]+"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Regex);
  EXPECT_EQ(r->spec.text, "[a-z]+");
  r = read(R"({"structured_outputs": {"choice": ["yes", "no"]}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Choice);
  EXPECT_THAT(r->spec.choices, ElementsAre("yes", "no"));
  r = read(R"({"structured_outputs": {"grammar": "root ::= \"a\""}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Grammar);
  EXPECT_EQ(r->spec.text, "root ::= \"a\"");
  r = read(R"({"structured_outputs": {"json_object": true}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::JsonObject);
}

TEST(StructuredOutputRequest, TheOlderGuidedFields) {
  auto r = read(R"({"guided_json": {"type": "string"}, "guided_whitespace_pattern": "", "guided_decoding_backend":
      "xgrammar"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::JsonSchema);
  EXPECT_EQ(r->spec.text, R"({"type":"string"})");
  EXPECT_EQ(r->spec.whitespace_pattern, "");
  EXPECT_EQ(r->field, "guided_json");
  r = read(R"({"guided_regex": "\\d+", "guided_decoding_backend": "outlines"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Regex);
  EXPECT_EQ(r->spec.text, "\\d+");
  r = read(R"({"guided_choice": ["a"]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Choice);
  r = read(R"({"guided_grammar": "root ::= [0-9]"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec.kind, Kind::Grammar);
}

TEST(StructuredOutputRequest, RefusesEachBadShapeByName) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})", "guided_regex",
       "You can only use one kind of structured outputs constraint but multiple are specified: response_format, "
       "guided_regex"},
      {R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})", "structured_outputs.choice",
       "multiple are specified: structured_outputs.regex, structured_outputs.choice"},
      {R"({"response_format": "json"})", "response_format", "must be an object"},
      {R"({"response_format": {}})", "response_format", "needs a 'type'"},
      {R"({"response_format": {"type": "yaml"}})", "response_format", "got 'yaml'"},
      {R"({"response_format": {"type": "structural_tag", "format": {}}})", "response_format",
       "'structural_tag' is not supported"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format", "needs a 'json_schema' object"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})", "response_format",
       "needs a 'name' string"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n"}}})", "response_format",
       "needs a 'schema'"},
      {R"({"structured_outputs": {"json": 5}})", "structured_outputs.json", "must be a JSON schema"},
      {R"({"structured_outputs": {"regex": 5}})", "structured_outputs.regex", "must be a string, got a number"},
      {R"({"structured_outputs": {"choice": []}})", "structured_outputs.choice", "non-empty array of strings"},
      {R"({"guided_choice": ["a", 1]})", "guided_choice", "it holds a number"},
      {R"({"structured_outputs": {"structural_tag": "{}"}})", "structured_outputs",
       "'structured_outputs.structural_tag' is not supported"},
      {R"({"structured_outputs": {"json_object": true, "disable_any_whitespace": true}})", "structured_outputs",
       "'structured_outputs.disable_any_whitespace' is not supported"},
      {R"({"structured_outputs": {"json_object": true, "disable_additional_properties": true}})", "structured_outputs",
       "'structured_outputs.disable_additional_properties' is not supported"},
      {R"({"structured_outputs": {"whitespace_pattern": " "}})", "structured_outputs.whitespace_pattern",
       "needs a JSON constraint"},
      {R"({"guided_regex": "a", "guided_whitespace_pattern": " "})", "guided_whitespace_pattern",
       "applies to JSON constraints only, not to 'guided_regex'"},
      {R"({"guided_json": {}, "guided_decoding_backend": "magic"})", "guided_decoding_backend", "got 'magic'"},
      {R"({"structured_outputs": []})", "structured_outputs", "must be an object"},
  };
  for (const Case& c : cases) {
    const ApiError error = error_of(c.body);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_THAT(error.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(StructuredOutputRequest, BothEndpointsCarryIt) {
  rapidjson::Document completion;
  parse_request_body(R"({"prompt": "x", "guided_choice": ["a", "b"]})", completion);
  EXPECT_EQ(parse_completion_request(completion, ParseLimits{}).common.structured_output->spec.kind, Kind::Choice);
  rapidjson::Document chat;
  parse_request_body(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type":
      "json_object"}})",
                     chat);
  EXPECT_EQ(parse_chat_request(chat, ParseLimits{}).common.structured_output->spec.kind, Kind::JsonObject);
}

TEST(StructuredOutputRequest, KnowsVllmsBackendNames) {
  for (const char* name : {"auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"}) {
    EXPECT_TRUE(is_known_structured_output_backend(name)) << name;
  }
  EXPECT_FALSE(is_known_structured_output_backend("llguidance2"));
}

}  // namespace
}  // namespace serverd::api
