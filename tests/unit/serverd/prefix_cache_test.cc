// The prefix cache: chained keys, hits and misses, reference counts, eviction order, and a forced key
// collision that the token check refuses.
#include "serverd/scheduler/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace serverd::scheduler {
namespace {

constexpr std::size_t kBlock = 4;

std::vector<std::int32_t> tokens_from(std::int32_t first, std::size_t count) {
  std::vector<std::int32_t> t(count);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Allocates blocks for `tokens`, caches them all (as the scheduler does once they are computed) and gives
// the sequence's own references back, so that only the cache holds them.
std::vector<std::int32_t> cache_prompt(PrefixCache& cache, engine::runtime::BlockPool& pool,
                                       const std::vector<std::int32_t>& tokens) {
  const auto keys = cache.block_keys(tokens);
  std::vector<std::int32_t> table;
  EXPECT_TRUE(cache.allocate(keys.size(), table));
  for (std::size_t b = 0; b < keys.size(); ++b) cache.insert(tokens, keys, b, table[b]);
  pool.release(table);
  return table;
}

TEST(PrefixCache, KeysChainOverEveryEarlierToken) {
  engine::runtime::BlockPool pool(8);
  PrefixCache cache(pool, kBlock);
  const auto a = cache.block_keys(tokens_from(0, 9));  // two full blocks; the ninth token makes none
  ASSERT_EQ(a.size(), 2u);
  auto changed = tokens_from(0, 8);
  changed[0] = 99;  // the first block differs, so the second block's key does too
  const auto b = cache.block_keys(changed);
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
  EXPECT_EQ(cache.block_keys(tokens_from(0, 8)), a);
  // Another cache draws another key: nothing outside the process can predict a block's key.
  PrefixCache other(pool, kBlock);
  EXPECT_NE(other.block_keys(tokens_from(0, 8)), a);
}

TEST(PrefixCache, HitsRetainAndMissesStopTheMatch) {
  engine::runtime::BlockPool pool(8);
  PrefixCache cache(pool, kBlock);
  const auto prompt = tokens_from(0, 12);
  const auto blocks = cache_prompt(cache, pool, prompt);
  EXPECT_EQ(cache.cached_blocks(), 3u);

  std::vector<std::int32_t> table;
  EXPECT_EQ(cache.match(prompt, cache.block_keys(prompt), 2, table), 2u);  // max_blocks bounds it
  EXPECT_EQ(table, (std::vector<std::int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(pool.ref_count(blocks[0]), 2u);  // the cache and the new holder
  pool.release(table);

  auto diverging = prompt;
  diverging[5] = -1;  // the second block differs: one hit
  table.clear();
  EXPECT_EQ(cache.match(diverging, cache.block_keys(diverging), 3, table), 1u);
  pool.release(table);
  EXPECT_EQ(cache.collisions(), 0u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedBlocksNobodyHolds) {
  engine::runtime::BlockPool pool(4);
  PrefixCache cache(pool, kBlock);
  const auto old_prompt = tokens_from(0, 4);
  const auto new_prompt = tokens_from(100, 4);
  const auto held_prompt = tokens_from(200, 4);
  cache_prompt(cache, pool, old_prompt);
  cache_prompt(cache, pool, new_prompt);
  cache_prompt(cache, pool, held_prompt);
  std::vector<std::int32_t> held;
  ASSERT_EQ(cache.match(held_prompt, cache.block_keys(held_prompt), 1, held), 1u);  // a running sequence
  EXPECT_EQ(pool.num_free(), 1u);
  EXPECT_EQ(cache.available(), 3u);  // the free block and the two cached blocks nobody else holds

  std::vector<std::int32_t> table;
  ASSERT_TRUE(cache.allocate(2, table));  // takes the free block, then evicts the oldest: old_prompt's
  std::vector<std::int32_t> probe;
  EXPECT_EQ(cache.match(old_prompt, cache.block_keys(old_prompt), 1, probe), 0u);
  EXPECT_EQ(cache.match(new_prompt, cache.block_keys(new_prompt), 1, probe), 1u);
  EXPECT_EQ(cache.match(held_prompt, cache.block_keys(held_prompt), 1, probe), 1u);
  EXPECT_FALSE(cache.allocate(1, table));  // the rest are held
  pool.release(probe);
  pool.release(held);
  pool.release(table);
}

// A hasher that gives every block the same key stands for a forged or colliding key: the stored parent and
// tokens are compared on every hit, so another prompt's keys and values are never served.
TEST(PrefixCache, AForcedKeyCollisionIsRefusedByTheTokenCheck) {
  engine::runtime::BlockPool pool(8);
  PrefixCache cache(pool, kBlock, [](const BlockKey&, std::span<const std::int32_t>) { return BlockKey{1}; });
  const auto victim = tokens_from(0, 8);
  const auto attacker = tokens_from(50, 8);
  cache_prompt(cache, pool, victim);
  EXPECT_EQ(cache.cached_blocks(), 1u);  // the second block's key collided with the first: not stored
  ASSERT_EQ(cache.block_keys(attacker), cache.block_keys(victim));

  std::vector<std::int32_t> table;
  EXPECT_EQ(cache.match(attacker, cache.block_keys(attacker), 2, table), 0u);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(cache.collisions(), 1u);
  // The same key for the victim's own second block: its parent differs from the stored one, so it misses
  // too, and the first block still hits.
  EXPECT_EQ(cache.match(victim, cache.block_keys(victim), 2, table), 1u);
  EXPECT_EQ(cache.collisions(), 2u);
  pool.release(table);
}

}  // namespace
}  // namespace serverd::scheduler
