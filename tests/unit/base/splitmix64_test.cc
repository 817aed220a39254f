// The seeded stream every random test model and test input comes from: its values are fixed by the
// published algorithm, so data made on one machine is the same on any other.
#include "base/splitmix64.h"

#include <gtest/gtest.h>

#include <array>

namespace base {
namespace {

TEST(SplitMix64, MatchesThePublishedSequence) {
  SplitMix64 random(0);
  EXPECT_EQ(random.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(random.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(random.next(), 0x06C45D188009454Full);
}

TEST(SplitMix64, FillWritesEachValueLittleEndian) {
  std::array<std::byte, 11> bytes{};
  SplitMix64(0).fill(bytes);
  EXPECT_EQ(bytes[0], std::byte{0xAF});  // the low byte of 0xE220A8397B1DCDAF
  EXPECT_EQ(bytes[7], std::byte{0xE2});
  EXPECT_EQ(bytes[8], std::byte{0xF4});  // the second value's low bytes end the buffer
  EXPECT_EQ(bytes[10], std::byte{0xB9});
}

}  // namespace
}  // namespace base
