// Tool-call ids in vLLM's forms, from an injected random source.
#include "serverd/parsers/call_ids.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <vector>

namespace serverd::parsers {
namespace {

// A source that gives back `values` in turn.
RandomBits scripted(std::vector<std::uint64_t> values) {
  auto next = std::make_shared<std::size_t>(0);
  return [values, next] { return values[(*next)++ % values.size()]; };
}

TEST(CallIds, VllmIdsAreChatcmplToolAnd32Hex) {
  CallIds ids(CallIdStyle::kVllm, scripted({0x0123456789abcdefull, 0xfedcba9876543210ull}));
  EXPECT_EQ(ids.next(), "chatcmpl-tool-0123456789abcdeffedcba9876543210");
}

// Bytes from 248 up would favour the first letters of the 62; they are skipped.
TEST(CallIds, MistralIdsAreNineAlphanumericsWithoutBias) {
  CallIds ids(CallIdStyle::kMistral, scripted({0x0807060504030201ull, 0x3DF9FFull}));
  // Bytes low first: 1..8 -> b..i; then 0xFF and 0xF9 are skipped and 0x3D (61) gives the ninth, 9.
  EXPECT_EQ(ids.next(), "bcdefghi9");
}

TEST(CallIds, DefaultSourceGivesWellFormedDistinctIds) {
  CallIds vllm(CallIdStyle::kVllm, {});
  CallIds mistral(CallIdStyle::kMistral, {});
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string a = vllm.next();
    const std::string b = mistral.next();
    EXPECT_TRUE(std::regex_match(a, std::regex("chatcmpl-tool-[0-9a-f]{32}"))) << a;
    EXPECT_TRUE(std::regex_match(b, std::regex("[A-Za-z0-9]{9}"))) << b;
    seen.insert(a);
    seen.insert(b);
  }
  EXPECT_EQ(seen.size(), 200u);
}

}  // namespace
}  // namespace serverd::parsers
