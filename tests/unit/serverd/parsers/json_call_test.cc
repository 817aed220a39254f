// JSON call objects: what counts as a call, and an object's text read byte by byte.
#include "serverd/parsers/json_call.h"

#include <gtest/gtest.h>

namespace serverd::parsers {
namespace {

TEST(JsonCall, ReadsNameAndTheFirstArgumentsKeyPresent) {
  const auto call =
      json_call(" \n{\"name\": \"f\", \"parameters\": {\"b\":[true,null]}}\n", {"arguments", "parameters"});
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "f");
  EXPECT_EQ(call->arguments, R"({"b": [true, null]})");
  EXPECT_EQ(json_call(R"({"name": "f", "parameters": 1, "arguments": 2})", {"arguments", "parameters"})->arguments,
            "2");
  EXPECT_FALSE(json_call(R"({"name": "f", "parameters": {}})", {"arguments"}).has_value());
}

TEST(JsonCall, RefusesWhatIsNoCall) {
  for (const std::string_view text :
       {"", "[]", "{}", "\"f\"", R"({"name": null, "arguments": {}})", R"({"name": "", "arguments": {}})",
        R"({"name": "f", "arguments": {})", "{\"name\": \"\xff\", \"arguments\": {}}",
        R"({"name": "f", "arguments": {}} {})"}) {
    EXPECT_FALSE(json_call(text, {"arguments"}).has_value()) << text;
  }
}

TEST(JsonObjectText, CompleteWhenTheBracesClose) {
  JsonObjectText object;
  for (const char c : std::string_view("\"a\": {\"}\": [1]}"))
    EXPECT_EQ(object.add(c), JsonObjectText::Step::kMore) << c;
  EXPECT_EQ(object.add('}'), JsonObjectText::Step::kComplete);
  EXPECT_EQ(object.text(), R"({"a": {"}": [1]}})");
}

TEST(JsonObjectText, BrokenAtTheFirstByteThatCannotBeACall) {
  JsonObjectText prose;
  EXPECT_EQ(prose.add(' '), JsonObjectText::Step::kMore);
  EXPECT_EQ(prose.add('x'), JsonObjectText::Step::kBroken);
  JsonObjectText empty;
  EXPECT_EQ(empty.add('}'), JsonObjectText::Step::kComplete);
  JsonObjectText mismatched;
  for (const char c : std::string_view("\"a\": [")) mismatched.add(c);
  EXPECT_EQ(mismatched.add('}'), JsonObjectText::Step::kBroken);
}

}  // namespace
}  // namespace serverd::parsers
