// How layers are shared out among KV cache groups, and what a sequence costs in blocks under that split.
#include "engine/runtime/kv_cache_groups.h"

#include <gtest/gtest.h>

namespace engine::runtime {
namespace {

// A plan whose layer i slides with windows[i] (0: full attention).
backend::AttentionPlan plan_of(const std::vector<std::size_t>& windows) {
  backend::AttentionPlan plan;
  for (const auto w : windows) plan.layers.push_back({.sliding_window = w});
  return plan;
}

std::vector<std::size_t> layers_of(const backend::KvCacheGroup& g) {
  return g.layers;
}

TEST(KvCacheGroups, OneKindIsOneGroup) {
  const auto groups = kv_cache_groups(plan_of({0, 0, 0}));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].sliding_window, 0u);
  EXPECT_EQ(layers_of(groups[0]), (std::vector<std::size_t>{0, 1, 2}));
  const auto mistral = kv_cache_groups(plan_of({4096, 4096}));
  ASSERT_EQ(mistral.size(), 1u);
  EXPECT_EQ(mistral[0].sliding_window, 4096u);
}

// Gemma 3 1B: 26 layers, every sixth full. Four full layers and 22 sliding ones: groups of four, the last
// sliding group holding two; full attention first.
TEST(KvCacheGroups, GemmaThreeSplitsIntoGroupsOfTheFewerKind) {
  std::vector<std::size_t> windows(26, 512);
  for (std::size_t layer = 5; layer < 26; layer += 6) windows[layer] = 0;
  const auto groups = kv_cache_groups(plan_of(windows));
  ASSERT_EQ(groups.size(), 7u);
  EXPECT_EQ(groups[0].sliding_window, 0u);
  EXPECT_EQ(layers_of(groups[0]), (std::vector<std::size_t>{5, 11, 17, 23}));
  EXPECT_EQ(groups[1].sliding_window, 512u);
  EXPECT_EQ(layers_of(groups[1]), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(layers_of(groups[2]), (std::vector<std::size_t>{4, 6, 7, 8}));
  EXPECT_EQ(layers_of(groups[6]), (std::vector<std::size_t>{24, 25}));
  backend::KvCacheShape shape;
  shape.num_layers = 26;
  shape.groups = groups;
  EXPECT_EQ(shape.layers_per_block(), 4u);
  EXPECT_EQ(shape.place(11).group, 0u);
  EXPECT_EQ(shape.place(11).slot, 1u);
}

// Kinds of nearly equal size take the larger's count, so no group is left with a lone layer or two.
TEST(KvCacheGroups, NearlyEqualKindsShareTheLargerCount) {
  const auto alternating = kv_cache_groups(plan_of({4, 0, 4, 0}));  // Gemma 2's pattern
  ASSERT_EQ(alternating.size(), 2u);
  EXPECT_EQ(layers_of(alternating[0]), (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(layers_of(alternating[1]), (std::vector<std::size_t>{0, 2}));
  // 4 and 5: five is a quarter more than four, so groups of four.
  const auto close = kv_cache_groups(plan_of({0, 0, 0, 0, 8, 8, 8, 8, 8}));
  ASSERT_EQ(close.size(), 3u);
  EXPECT_EQ(close[2].layers.size(), 1u);
  const auto closer = kv_cache_groups(plan_of({0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8}));  // 5 and 6: groups of six
  ASSERT_EQ(closer.size(), 2u);
  EXPECT_EQ(closer[0].layers.size(), 5u);
  EXPECT_EQ(closer[1].layers.size(), 6u);
}

// A full group holds every block of a sequence; a sliding one what its window and a step's tokens reach.
TEST(KvCacheGroups, ASequenceCostsItsWindowInASlidingGroup) {
  const std::vector<backend::KvCacheGroup> groups = {{0, {0}}, {8, {1}}}, full = {{0, {0}}, {0, {1}}};
  EXPECT_EQ(blocks_for_sequence(full, 4, 20, 1), 10u);
  // Decoding: a window of 8 from an unaligned position spans three blocks of 4.
  EXPECT_EQ(blocks_for_sequence(groups, 4, 20, 1), 5u + 3u);
  // The whole prompt in one step keeps every block until the step is done.
  EXPECT_EQ(blocks_for_sequence(groups, 4, 20, 0), 10u);
  EXPECT_EQ(blocks_for_sequence(groups, 4, 2, 1), 2u);  // shorter than the window
  // The longest sequence in 8 blocks: 20 positions with the window, 16 without; bounded by the limit.
  EXPECT_EQ(positions_in_blocks(groups, 4, 8, 1, 1000), 20u);
  EXPECT_EQ(positions_in_blocks(full, 4, 8, 1, 1000), 16u);
  EXPECT_EQ(positions_in_blocks(groups, 4, 8, 1, 10), 10u);
  EXPECT_EQ(positions_in_blocks(groups, 4, 1, 1, 1000), 0u);
  EXPECT_EQ(group_windows(groups), (std::vector<std::size_t>{0, 8}));
}

}  // namespace
}  // namespace engine::runtime
