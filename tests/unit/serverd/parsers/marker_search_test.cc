// Markers found in text that arrives in pieces.
#include "serverd/parsers/marker_search.h"

#include <gtest/gtest.h>

namespace serverd::parsers {
namespace {

TEST(MarkerSearch, HoldsBackOnlyWhatMayStartTheMarker) {
  EXPECT_EQ(partial_marker_length("text <tool_", "<tool_call>"), 6u);
  EXPECT_EQ(partial_marker_length("text <", "<tool_call>"), 1u);
  EXPECT_EQ(partial_marker_length("text <tool_call", "<tool_call>"), 10u);
  EXPECT_EQ(partial_marker_length("text <tool_call>", "<tool_call>"), 0u);  // whole: not partial
  EXPECT_EQ(partial_marker_length("text <tool>", "<tool_call>"), 0u);
  EXPECT_EQ(partial_marker_length("", "<tool_call>"), 0u);
  EXPECT_EQ(partial_marker_length("<<", "<<x"), 2u);
}

TEST(MarkerSearch, FindsTheFirstWholeMarker) {
  const MarkerSearch found = search_marker("a <tool_call> b <tool_call>", "<tool_call>");
  EXPECT_TRUE(found.found);
  EXPECT_EQ(found.end, 2u);
  const MarkerSearch partial = search_marker("a <tool", "<tool_call>");
  EXPECT_FALSE(partial.found);
  EXPECT_EQ(partial.end, 2u);
}

}  // namespace
}  // namespace serverd::parsers
