#include "engine/runtime/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace {

using engine::runtime::BlockPool;

TEST(BlockPool, AllocatesDistinctBlocksAllOrNothing) {
  BlockPool pool(4);
  std::vector<std::int32_t> a, b;
  ASSERT_TRUE(pool.allocate(3, a));
  EXPECT_EQ(pool.num_free(), 1u);
  EXPECT_EQ(std::set<std::int32_t>(a.begin(), a.end()).size(), 3u);
  EXPECT_FALSE(pool.allocate(2, b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free(), 1u);
  ASSERT_TRUE(pool.allocate(1, b));
  EXPECT_EQ(std::count(a.begin(), a.end(), b[0]), 0);
}

TEST(BlockPool, SharedBlocksReturnWhenTheLastHolderReleases) {
  BlockPool pool(2);
  std::vector<std::int32_t> a;
  ASSERT_TRUE(pool.allocate(1, a));
  pool.retain(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 2u);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 1u);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2u);
  EXPECT_THROW(pool.release(a), std::logic_error);
  EXPECT_THROW(pool.retain(a[0]), std::logic_error);
  EXPECT_THROW(pool.retain(2), std::out_of_range);
}

TEST(BlockPool, RecentlyFreedBlocksAreReusedFirst) {
  BlockPool pool(8);
  std::vector<std::int32_t> a;
  ASSERT_TRUE(pool.allocate(3, a));
  pool.release(std::span(a).subspan(1, 1));
  std::vector<std::int32_t> b;
  ASSERT_TRUE(pool.allocate(1, b));
  EXPECT_EQ(b[0], a[1]);
}

// Blocks the prefix cache keeps are released last-in-line: every other free block is handed out first, and
// among them the oldest release goes first.
TEST(BlockPool, BlocksReleasedLastAreReusedAfterEveryOther) {
  BlockPool pool(4);
  std::vector<std::int32_t> a;
  ASSERT_TRUE(pool.allocate(4, a));
  pool.release_last(a[0]);
  pool.release_last(a[1]);
  pool.release(std::span(a).subspan(2, 1));
  std::vector<std::int32_t> b;
  ASSERT_TRUE(pool.allocate(3, b));
  EXPECT_EQ(b, (std::vector<std::int32_t>{a[2], a[0], a[1]}));
}

// A free block found again (a prefix-cache hit nobody held) leaves the free list with one holder.
TEST(BlockPool, ReviveTakesAFreeBlockBackOutOfTheFreeList) {
  BlockPool pool(3);
  std::vector<std::int32_t> a;
  ASSERT_TRUE(pool.allocate(2, a));
  pool.release_last(a[0]);
  EXPECT_EQ(pool.num_free(), 2u);
  pool.revive(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 1u);
  EXPECT_EQ(pool.num_free(), 1u);
  EXPECT_THROW(pool.revive(a[0]), std::logic_error);  // held
  std::vector<std::int32_t> b;
  ASSERT_TRUE(pool.allocate(1, b));
  EXPECT_NE(b[0], a[0]);
  EXPECT_NE(b[0], a[1]);
  pool.release_last(a[1]);
  EXPECT_THROW(pool.release_last(a[1]), std::logic_error);  // already free
}

}  // namespace
