#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/format/gguf.h"

namespace engine::format {

// Builds a GGUF v3 (or v2) file: metadata and tensors in the order added, each tensor's data padded to
// the alignment, as llama.cpp's writers do.
class GgufWriter {
 public:
  explicit GgufWriter(std::uint32_t version = 3, std::uint32_t alignment = 32);

  void add_metadata(std::string key, GgufValue value);
  // Throws std::invalid_argument when the data size disagrees with dims and type.
  void add_tensor(std::string name, std::vector<std::uint64_t> dims, const GgmlTypeInfo& type,
                  std::vector<std::byte> data);

  std::vector<std::byte> serialize() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    const GgmlTypeInfo* type;
    std::vector<std::byte> data;
  };

  std::uint32_t version_;
  std::uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace engine::format
