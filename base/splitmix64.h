#pragma once

// SplitMix64 (Steele, Lea and Flood, 2014): a seeded stream of 64-bit values that is the same on every
// platform, unlike std's distributions, for random test models, test data and benchmark inputs. It is
// predictable by design: never a source of keys or anything else an attacker must not guess.

#include <cstddef>
#include <cstdint>
#include <span>

namespace base {

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) : state_(seed) {}

  constexpr std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Fills `out` with successive values, each written little-endian; a last partial value gives its low
  // bytes.
  void fill(std::span<std::byte> out) {
    for (std::size_t at = 0; at < out.size(); at += 8) {
      const std::uint64_t z = next();
      for (std::size_t i = 0; i < 8 && at + i < out.size(); ++i) out[at + i] = static_cast<std::byte>(z >> (8 * i));
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace base
