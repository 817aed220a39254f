// The KV cache manager: block tables that give their blocks back, one reservation path, chained prefix keys,
// hits and misses, reference counts under preemption, eviction order, blocks of generated tokens, a
// forced key collision that the token check refuses, and sliding-window groups that give back what their window
// has passed and match a prefix on the blocks within it.
#include "engine/runtime/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "engine/backend/backend.h"

namespace engine::runtime {
namespace {

constexpr std::size_t kBlock = 4;

std::vector<std::int32_t> tokens_from(std::int32_t first, std::size_t count) {
  std::vector<std::int32_t> t(count);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<BlockKey> keys_of(const KvCacheManager& kv, std::span<const std::int32_t> tokens) {
  std::vector<BlockKey> keys;
  kv.extend_keys(tokens, keys);
  return keys;
}

// A sequence that computed `tokens`: its table holds a block per position block, and every full block is
// cached, as the scheduler does after each step.
BlockTable compute(KvCacheManager& kv, std::span<const std::int32_t> tokens) {
  BlockTable table;
  EXPECT_TRUE(kv.reserve(table, tokens.size()));
  const auto keys = keys_of(kv, tokens);
  kv.cache_blocks(tokens, keys, table, 0, keys.size());
  return table;
}

TEST(KvCacheManager, TablesReserveOnceAndGiveTheirBlocksBack) {
  KvCacheManager kv(4, kBlock);
  {
    BlockTable table;
    ASSERT_TRUE(kv.reserve(table, 5));  // two blocks for five positions
    EXPECT_EQ(table.size(), 2u);
    ASSERT_TRUE(kv.reserve(table, 8));  // still two
    EXPECT_EQ(table.size(), 2u);
    EXPECT_FALSE(kv.reserve(table, 17));  // five blocks: more than the cache has; nothing taken
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(kv.num_free(), 2u);
    EXPECT_DOUBLE_EQ(kv.usage(), 0.5);
    BlockTable moved = std::move(table);
    EXPECT_TRUE(table.empty());
    EXPECT_EQ(kv.num_free(), 2u);
  }
  EXPECT_EQ(kv.num_free(), 4u);  // dropped: every block is back
  EXPECT_THROW(KvCacheManager(4, 0), std::invalid_argument);
}

TEST(KvCacheManager, KeysChainOverEveryEarlierToken) {
  KvCacheManager kv(8, kBlock);
  const auto a = keys_of(kv, tokens_from(0, 9));  // two full blocks; the ninth token makes none
  ASSERT_EQ(a.size(), 2u);
  auto changed = tokens_from(0, 8);
  changed[0] = 99;  // the first block differs, so the second block's key does too
  const auto b = keys_of(kv, changed);
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
  std::vector<BlockKey> grown(a.begin(), a.begin() + 1);
  kv.extend_keys(tokens_from(0, 8), grown);  // a growing sequence extends its own keys
  EXPECT_EQ(grown, a);
  // Another manager draws another key: nothing outside the process can predict a block's key.
  KvCacheManager other(8, kBlock);
  EXPECT_NE(keys_of(other, tokens_from(0, 8)), a);
}

TEST(KvCacheManager, HitsShareBlocksAndMissesStopTheMatch) {
  KvCacheManager kv(8, kBlock);
  const auto prompt = tokens_from(0, 12);
  BlockTable first = compute(kv, prompt);
  EXPECT_EQ(kv.cached_blocks(), 3u);

  BlockTable second;
  EXPECT_EQ(kv.match(prompt, keys_of(kv, prompt), 2, second), 2u);  // max_blocks bounds it
  EXPECT_EQ(second.ids()[0], first.ids()[0]);
  EXPECT_EQ(second.ids()[1], first.ids()[1]);
  EXPECT_EQ(kv.ref_count(first.ids()[0]), 2u);  // both tables hold it

  auto diverging = prompt;
  diverging[5] = -1;  // the second block differs: one hit
  BlockTable third;
  EXPECT_EQ(kv.match(diverging, keys_of(kv, diverging), 3, third), 1u);
  EXPECT_EQ(kv.collisions(), 0u);
  EXPECT_THROW(kv.match(prompt, keys_of(kv, prompt), 1, third), std::logic_error);  // only into an empty table
}

// A preempted sequence gives its blocks up; the blocks it had filled stay cached and free, and come back
// with their contents when it is admitted again. Blocks shared with a running sequence stay held.
TEST(KvCacheManager, ReferenceCountsUnderPreemption) {
  KvCacheManager kv(6, kBlock);
  const auto prompt = tokens_from(0, 8);
  BlockTable running = compute(kv, prompt);
  BlockTable preempted;
  ASSERT_EQ(kv.match(prompt, keys_of(kv, prompt), 2, preempted), 2u);
  ASSERT_TRUE(kv.reserve(preempted, 12));  // and a block of its own
  const std::int32_t own = preempted.ids()[2];
  EXPECT_EQ(kv.ref_count(running.ids()[0]), 2u);
  preempted.clear();  // preempted
  EXPECT_EQ(kv.ref_count(running.ids()[0]), 1u);
  EXPECT_EQ(kv.ref_count(own), 0u);
  EXPECT_EQ(kv.num_free(), 4u);
  running.clear();  // now nobody holds the prompt's blocks, but they stay cached
  EXPECT_EQ(kv.num_free(), 6u);
  EXPECT_EQ(kv.cached_blocks(), 2u);
  BlockTable readmitted;
  EXPECT_EQ(kv.match(prompt, keys_of(kv, prompt), 2, readmitted), 2u);
  EXPECT_EQ(kv.ref_count(readmitted.ids()[0]), 1u);
  EXPECT_EQ(kv.num_free(), 4u);
}

// Free blocks without an entry go first; then cached blocks, least recently released first, and of one
// sequence its later blocks before its earlier ones (a prefix outlives its continuations).
TEST(KvCacheManager, EvictsCachedBlocksLastAndOldestFirst) {
  KvCacheManager kv(5, kBlock);
  const auto old_prompt = tokens_from(0, 8);    // two blocks
  const auto new_prompt = tokens_from(100, 4);  // one block
  compute(kv, old_prompt);                      // released at once: cached, free
  compute(kv, new_prompt);
  EXPECT_EQ(kv.num_free(), 5u);
  EXPECT_EQ(kv.cached_blocks(), 3u);

  BlockTable a;
  ASSERT_TRUE(kv.reserve(a, 8));  // the two blocks without an entry
  EXPECT_EQ(kv.cached_blocks(), 3u);
  BlockTable b;
  ASSERT_TRUE(kv.reserve(b, 4));  // then the oldest cached block: old_prompt's second
  EXPECT_EQ(kv.cached_blocks(), 2u);
  BlockTable probe;
  EXPECT_EQ(kv.match(old_prompt, keys_of(kv, old_prompt), 2, probe), 1u);  // its first block survived
  probe.clear();
  EXPECT_EQ(kv.match(new_prompt, keys_of(kv, new_prompt), 1, probe), 1u);
  EXPECT_FALSE(kv.reserve(probe, 12));  // two more: only one block is free
  EXPECT_EQ(probe.size(), 1u);
}

// Generated tokens are blocks like any other: once computed, they are found again.
TEST(KvCacheManager, CachesBlocksOfGeneratedTokens) {
  KvCacheManager kv(8, kBlock);
  auto tokens = tokens_from(0, 6);  // a prompt of six
  BlockTable table;
  ASSERT_TRUE(kv.reserve(table, tokens.size()));
  std::vector<BlockKey> keys;
  kv.extend_keys(tokens, keys);
  kv.cache_blocks(tokens, keys, table, 0, 1);
  for (std::int32_t t = 50; t < 53; ++t) tokens.push_back(t);  // three generated: the second block fills
  ASSERT_TRUE(kv.reserve(table, tokens.size()));
  kv.extend_keys(tokens, keys);
  kv.cache_blocks(tokens, keys, table, 1, 2);
  EXPECT_EQ(kv.cached_blocks(), 2u);
  table.clear();
  BlockTable again;
  EXPECT_EQ(kv.match(tokens, keys_of(kv, tokens), 2, again), 2u);
  EXPECT_THROW(kv.cache_blocks(tokens, keys, again, 0, 3), std::logic_error);  // past the table
}

// A hasher that gives every block the same key stands for a forged or colliding key: the stored parent and
// tokens are compared on every hit, so another prompt's keys and values are never served.
TEST(KvCacheManager, AForcedKeyCollisionIsRefusedByTheTokenCheck) {
  KvCacheManager kv(8, kBlock, {0}, [](const BlockKey&, std::span<const std::int32_t>) { return BlockKey{1}; });
  const auto victim = tokens_from(0, 8);
  const auto attacker = tokens_from(50, 8);
  BlockTable victim_table = compute(kv, victim);
  EXPECT_EQ(kv.cached_blocks(), 1u);  // the second block's key collided with the first: not stored
  ASSERT_EQ(keys_of(kv, attacker), keys_of(kv, victim));

  BlockTable table;
  EXPECT_EQ(kv.match(attacker, keys_of(kv, attacker), 2, table), 0u);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(kv.collisions(), 1u);
  // The same key for the victim's own second block: its parent differs from the stored one, so it misses
  // too, and the first block still hits.
  EXPECT_EQ(kv.match(victim, keys_of(kv, victim), 2, table), 1u);
  EXPECT_EQ(kv.collisions(), 2u);
}

// A full group and a sliding one of window 8 (two blocks of 4): decoding 20 positions one at a time holds
// five blocks in the full group and only the two the window reaches in the sliding one; the rest went back to
// the pool as the window passed them, their entries the null block. Without that, 20 positions would take 10
// of the 8 usable blocks.
TEST(KvCacheManager, ASlidingGroupGivesBackTheBlocksItsWindowHasPassed) {
  KvCacheManager kv(9, kBlock, {0, 8});
  EXPECT_EQ(kv.num_usable(), 8u);  // block 0 is the null block
  EXPECT_EQ(kv.num_free(), 8u);
  BlockTable table;
  for (std::size_t p = 0; p < 20; ++p) ASSERT_TRUE(kv.reserve(table, p + 1, p)) << "position " << p;
  EXPECT_EQ(kv.num_free(), 1u);
  ASSERT_EQ(table.num_groups(), 2u);
  ASSERT_EQ(table.ids(1).size(), 5u);
  for (std::size_t b = 0; b < 5; ++b) EXPECT_NE(table.ids(0)[b], backend::kNullBlock) << "full block " << b;
  for (std::size_t b = 0; b < 3; ++b) EXPECT_EQ(table.ids(1)[b], backend::kNullBlock) << "sliding block " << b;
  EXPECT_NE(table.ids(1)[3], backend::kNullBlock);
  EXPECT_NE(table.ids(1)[4], backend::kNullBlock);
  // A step of 8 tokens from position 20 needs two more full blocks and two sliding ones (its window starts in
  // block 3, held already with block 4): four, one free. Refused, and nothing more is taken.
  EXPECT_FALSE(kv.reserve(table, 28, 20));
  EXPECT_EQ(table.size(), 5u);
  EXPECT_EQ(kv.num_free(), 1u);
  table.clear();
  EXPECT_EQ(kv.num_free(), 8u);

  KvCacheManager every_layer(9, kBlock, {0, 0});
  BlockTable whole;
  EXPECT_FALSE(every_layer.reserve(whole, 20, 19));                        // two full groups: 10 blocks
  EXPECT_THROW(KvCacheManager(1, kBlock, {0, 8}), std::invalid_argument);  // the null block and nothing else
}

// A prefix hit needs, in a sliding group, only the blocks within the window of the first position left to
// compute: the earlier ones may have been evicted. A shorter prefix whose window reaches an evicted block
// finds nothing.
TEST(KvCacheManager, ASlidingGroupMatchesOnTheBlocksWithinItsWindow) {
  KvCacheManager kv(9, kBlock, {0, 8});
  const auto prompt = tokens_from(0, 16);
  const auto keys = keys_of(kv, prompt);
  {
    BlockTable table;  // computed a position at a time, each block cached as it fills
    for (std::size_t p = 0; p < prompt.size(); ++p) {
      ASSERT_TRUE(kv.reserve(table, p + 1, p));
      if ((p + 1) % kBlock == 0) kv.cache_blocks(prompt, keys, table, p / kBlock, p / kBlock + 1);
    }
  }
  EXPECT_EQ(kv.cached_blocks(), 8u);  // four per group: all eight usable blocks, all free
  EXPECT_EQ(kv.num_free(), 8u);
  BlockTable other;
  ASSERT_TRUE(kv.reserve(other, 4));  // a block per group: evicts the oldest, the sliding group's first two
  EXPECT_EQ(kv.cached_blocks(), 6u);

  BlockTable hit;
  ASSERT_EQ(kv.match(prompt, keys, 4, hit), 4u);
  EXPECT_EQ(hit.ids(1)[0], backend::kNullBlock);
  EXPECT_EQ(hit.ids(1)[1], backend::kNullBlock);
  EXPECT_NE(hit.ids(1)[2], backend::kNullBlock);
  EXPECT_EQ(kv.ref_count(hit.ids(1)[3]), 1u);
  EXPECT_EQ(kv.num_free(), 0u);  // four full blocks and two sliding ones now held
  hit.clear();
  BlockTable shorter;
  EXPECT_EQ(kv.match(prompt, keys, 3, shorter), 0u);  // position 12's window reaches block 1
  EXPECT_TRUE(shorter.empty());
}

}  // namespace
}  // namespace engine::runtime
