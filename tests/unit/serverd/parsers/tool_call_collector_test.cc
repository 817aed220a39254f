// Streamed tool-call deltas gathered into the whole response, with vLLM's null content.
#include <gtest/gtest.h>

#include <stdexcept>

#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {
namespace {

TEST(ToolCallCollector, JoinsContentAndArgumentFragments) {
  ToolCallCollector collector;
  collector.add({"Hel", {}});
  collector.add({"lo", {{0, "id-a", "f", ""}, {0, "", "", "{\"a\": "}}});
  collector.add({"", {{0, "", "", "1}"}, {1, "id-b", "g", ""}, {1, "", "", "{}"}}});
  EXPECT_EQ(collector.result(), (ToolParserResult{"Hello", {{"id-a", "f", R"({"a": 1})"}, {"id-b", "g", "{}"}}}));
}

// vLLM: content is null when the response made calls and wrote nothing else; without calls it is the
// text, even empty.
TEST(ToolCallCollector, ContentIsNullOnlyBesideCalls) {
  ToolCallCollector calls;
  calls.add({"", {{0, "id", "f", ""}, {0, "", "", "{}"}}});
  EXPECT_EQ(calls.result().content, std::nullopt);
  EXPECT_EQ(ToolCallCollector().result(), (ToolParserResult{"", {}}));
}

TEST(ToolCallCollector, RefusesPiecesOutOfOrder) {
  ToolCallCollector skipped;
  EXPECT_THROW(skipped.add({"", {{1, "id", "f", ""}}}), std::logic_error);
  ToolCallCollector orphan;
  EXPECT_THROW(orphan.add({"", {{0, "", "", "{}"}}}), std::logic_error);
  ToolCallCollector stale;
  stale.add({"", {{0, "a", "f", ""}, {1, "b", "g", ""}}});
  EXPECT_THROW(stale.add({"", {{0, "", "", "{}"}}}), std::logic_error);
}

}  // namespace
}  // namespace serverd::parsers
