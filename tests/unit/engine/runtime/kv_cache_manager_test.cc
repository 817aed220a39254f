// The KV cache manager: block tables that give their blocks back, one reservation path, chained prefix keys,
// hits and misses, reference counts under preemption, eviction order, blocks of generated tokens, and a
// forced key collision that the token check refuses.
#include "engine/runtime/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>

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
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[1], first[1]);
  EXPECT_EQ(kv.ref_count(first[0]), 2u);  // both tables hold it

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
  const std::int32_t own = preempted[2];
  EXPECT_EQ(kv.ref_count(running[0]), 2u);
  preempted.clear();  // preempted
  EXPECT_EQ(kv.ref_count(running[0]), 1u);
  EXPECT_EQ(kv.ref_count(own), 0u);
  EXPECT_EQ(kv.num_free(), 4u);
  running.clear();  // now nobody holds the prompt's blocks, but they stay cached
  EXPECT_EQ(kv.num_free(), 6u);
  EXPECT_EQ(kv.cached_blocks(), 2u);
  BlockTable readmitted;
  EXPECT_EQ(kv.match(prompt, keys_of(kv, prompt), 2, readmitted), 2u);
  EXPECT_EQ(kv.ref_count(readmitted[0]), 1u);
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
  KvCacheManager kv(8, kBlock, [](const BlockKey&, std::span<const std::int32_t>) { return BlockKey{1}; });
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

}  // namespace
}  // namespace engine::runtime
