#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace engine::format {

static_assert(std::endian::native == std::endian::little, "model files are little-endian; so is this reader");

// Loads a little-endian scalar from unaligned memory.
template <typename T>
requires std::is_trivially_copyable_v<T> T load_le(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
requires std::is_trivially_copyable_v<T>
void store_le(std::byte* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

}  // namespace engine::format
