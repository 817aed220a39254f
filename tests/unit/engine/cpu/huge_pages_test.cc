#include "engine/cpu/huge_pages.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace engine::cpu {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

bool aligned64(const std::byte* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

// Buffers follow one another in a chunk, each rounded up to whole cache lines, so that the matrices a decode
// step streams in turn lie side by side.
TEST(HugePagesArena, BuffersFollowOneAnotherInAChunk) {
  HugePagesArena arena(4 * kMiB);
  std::byte* a = arena.allocate(100);
  std::byte* b = arena.allocate(200);
  std::byte* c = arena.allocate(64);
  EXPECT_TRUE(aligned64(a));
  EXPECT_EQ(b, a + 128);
  EXPECT_EQ(c, b + 256);
  EXPECT_EQ(arena.chunks(), 1u);
  std::memset(a, 1, 100);  // the buffers are writable memory
  std::memset(b, 2, 200);
  EXPECT_EQ(a[99], std::byte{1});
  EXPECT_EQ(b[0], std::byte{2});
}

// A buffer that does not fit what is left of the chunk starts a new one; one over half a chunk gets a chunk of
// its own and the current chunk goes on after it.
TEST(HugePagesArena, ChunksAreStartedOnlyWhenNeeded) {
  HugePagesArena arena(4 * kMiB);
  std::byte* first = arena.allocate(2 * kMiB);
  std::byte* second = arena.allocate(2 * kMiB);
  EXPECT_EQ(second, first + 2 * kMiB);
  EXPECT_EQ(arena.chunks(), 1u);
  std::byte* third = arena.allocate(64);
  EXPECT_EQ(arena.chunks(), 2u);
  std::byte* large = arena.allocate(3 * kMiB);
  EXPECT_EQ(arena.chunks(), 3u);
  EXPECT_TRUE(aligned64(large));
  std::memset(large, 3, 3 * kMiB);
  EXPECT_EQ(arena.allocate(64), third + 64);
  EXPECT_EQ(arena.chunks(), 3u);
}

}  // namespace
}  // namespace engine::cpu
