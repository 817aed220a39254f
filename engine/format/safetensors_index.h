#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine::format {

// model.safetensors.index.json: which shard holds each tensor of a sharded checkpoint.
struct SafetensorsIndex {
  std::optional<std::uint64_t> total_size;        // metadata.total_size: bytes of tensor data, all shards
  std::map<std::string, std::string> weight_map;  // tensor name → repository-relative shard path

  // The distinct shard paths, sorted.
  std::vector<std::string> shard_files() const;
};

inline constexpr std::size_t kMaxSafetensorsIndexBytes = 64u << 20;

// True for a relative path made of plain components: no "..", ".", empty component, leading '/',
// backslash or NUL. Every path read from a hub or an index passes this before it touches a disk.
bool is_safe_relative_path(std::string_view path);

// Throws FormatError naming `name` when the JSON is malformed, weight_map is missing or not a map of
// strings, a shard path is unsafe or not a .safetensors file, or total_size is not a non-negative integer.
SafetensorsIndex parse_safetensors_index(std::string_view json, std::string_view name);
SafetensorsIndex read_safetensors_index(const std::filesystem::path& path);

}  // namespace engine::format
