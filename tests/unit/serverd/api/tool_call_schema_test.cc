// The constraint of a forced tool_choice, as vLLM builds it: a named function's parameters, "required"'s
// array of {name, parameters} with the tools' $defs at the top, and the refusals.
#include "serverd/api/tool_call_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serverd/api/api_error.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;
using Kind = engine::grammar::StructuredOutputSpec::Kind;

ChatRequest chat(std::string tools, ToolChoice choice, std::string name = {}) {
  ChatRequest r;
  r.tools_json = std::move(tools);
  r.tool_choice = choice;
  r.tool_choice_name = std::move(name);
  return r;
}

constexpr std::string_view kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"$ref": "#/$defs/city"}}, "$defs": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time"}}])";

std::string error_of(const ChatRequest& request) {
  try {
    chat_constraint(request);
  } catch (const ApiException& e) {
    return e.error().message + " [" + e.error().param.value_or("") + "]";
  }
  return "accepted";
}

TEST(ToolCallSchema, ANamedFunctionIsConstrainedToItsParameters) {
  const auto c = chat_constraint(chat(std::string(kTools), ToolChoice::kNamed, "get_weather"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->field, "tool_choice");
  EXPECT_EQ(c->spec.kind, Kind::JsonSchema);
  EXPECT_EQ(c->spec.text, R"({"type":"object","properties":{"city":{"$ref":"#/$defs/city"}},)"
                          R"("$defs":{"city":{"type":"string"}}})");
  // vLLM constrains nothing for a function without parameters.
  EXPECT_FALSE(chat_constraint(chat(std::string(kTools), ToolChoice::kNamed, "get_time")));
}

TEST(ToolCallSchema, RequiredIsAnArrayOfCallsOfTheTools) {
  const auto c = chat_constraint(chat(std::string(kTools), ToolChoice::kRequired));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->spec.text,
            R"({"type":"array","minItems":1,"items":{"type":"object","anyOf":[)"
            R"({"properties":{"name":{"type":"string","enum":["get_weather"]},"parameters":{"type":"object",)"
            R"("properties":{"city":{"$ref":"#/$defs/city"}}}},"required":["name","parameters"]},)"
            R"({"properties":{"name":{"type":"string","enum":["get_time"]},"parameters":{"type":"object",)"
            R"("properties":{}}},"required":["name","parameters"]}]},"$defs":{"city":{"type":"string"}}})");
}

TEST(ToolCallSchema, NoneAndAutoKeepTheRequestsOwnConstraint) {
  ChatRequest r = chat(std::string(kTools), ToolChoice::kAuto);
  EXPECT_FALSE(chat_constraint(r));
  r.common.structured_output = StructuredOutputRequest{{Kind::Regex, "a+", {}, std::nullopt}, "guided_regex"};
  EXPECT_EQ(chat_constraint(r)->field, "guided_regex");
}

TEST(ToolCallSchema, TheToolsSchemaStandsInForARequestsJsonSchemaButNotBesideAnotherKind) {
  ChatRequest r = chat(std::string(kTools), ToolChoice::kRequired);
  r.common.structured_output = StructuredOutputRequest{{Kind::JsonSchema, "{}", {}, std::nullopt}, "response_format"};
  EXPECT_EQ(chat_constraint(r)->field, "tool_choice");
  r.common.structured_output = StructuredOutputRequest{{Kind::Regex, "a+", {}, std::nullopt}, "guided_regex"};
  EXPECT_EQ(error_of(r),
            "You can only use one kind of structured outputs constraint but multiple are specified: tool_choice, "
            "guided_regex [guided_regex]");
}

TEST(ToolCallSchema, RefusalsInVllmsWords) {
  EXPECT_EQ(error_of(chat(std::string(kTools), ToolChoice::kNamed, "nope")),
            "Tool 'nope' has not been passed in `tools`. [tool_choice]");
  const std::string clash = R"([{"type": "function", "function": {"name": "a", "parameters": {"$defs": {"x": {}}}}},
                                {"type": "function", "function": {"name": "b", "parameters": {"$defs": {"x": {"type": "string"}}}}}])";
  EXPECT_EQ(error_of(chat(clash, ToolChoice::kRequired)),
            "Tool definition 'x' has multiple schemas, which is not supported. [tools]");
  EXPECT_THAT(error_of(chat(R"([{"type": "function"}])", ToolChoice::kRequired)), HasSubstr("[tools]"));
}

}  // namespace
}  // namespace serverd::api
