// The --tool-call-parser names and the parsers they make.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {
namespace {

TEST(ToolCallRegistry, MakesEachKnownParser) {
  EXPECT_THAT(tool_call_parser_names(),
              ::testing::ElementsAre("hermes", "llama3_json", "mistral", "openai", "pythonic"));
  for (const std::string_view name : tool_call_parser_names()) EXPECT_EQ(make_tool_call_parser(name)->name(), name);
}

TEST(ToolCallRegistry, RefusesAnUnknownNameListingTheKnownOnes) {
  try {
    make_tool_call_parser("qwen3_coder\x1b[31m");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown tool-call parser 'qwen3_coder\\x1b[31m': choose one of hermes, llama3_json, mistral, openai, "
                 "pythonic");
  }
  EXPECT_THROW(make_tool_call_parser(""), std::invalid_argument);
  EXPECT_THROW(make_tool_call_parser("Hermes"), std::invalid_argument);
}

}  // namespace
}  // namespace serverd::parsers
