#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/format/safetensors.h"

namespace engine::format {

// Builds a safetensors file: tensors in the order added, header padded with spaces to 8 bytes.
class SafetensorsWriter {
 public:
  // Throws std::invalid_argument when data.size() disagrees with shape × dtype size or the name repeats.
  void add(std::string name, SafetensorsDType dtype, std::vector<std::uint64_t> shape, std::span<const std::byte> data);
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

  std::vector<std::byte> serialize() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    SafetensorsDType dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> data;
  };
  std::string header_json() const;

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace engine::format
