#pragma once

// A GGUF model stored whole or split into parts, as llama.cpp's gguf-split writes them:
// "{prefix}-00001-of-00003.gguf", ..., each part a valid GGUF file. Every part holds `split.no` (0-based),
// `split.count` and `split.tensors.count`; the first part holds the model's metadata; each tensor lives in
// exactly one part.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/format/gguf.h"

namespace engine::format {

class GgufParts {
 public:
  // Opens `path`; when it is the first part of a split, every other part beside it too. Throws FormatError
  // naming a missing part, a part that belongs to another split, a tensor held twice, or a tensor count
  // that disagrees with `split.tensors.count`; opening a later part names the first one to open instead.
  static GgufParts open(const std::filesystem::path& path);

  // The first part's layout: the model's metadata (its tensors are only those the first part holds).
  const GgufLayout& layout() const { return parts_.front().layout(); }
  std::size_t part_count() const { return parts_.size(); }

  struct Tensor {
    const GgufTensor* info;
    std::span<const std::byte> data;
    const std::filesystem::path* file;  // the part that holds it
  };
  std::optional<Tensor> find_tensor(std::string_view name) const;

 private:
  explicit GgufParts(std::vector<GgufFile> parts);

  std::vector<GgufFile> parts_;
  std::unordered_map<std::string, std::pair<std::size_t, std::size_t>> where_;  // name: part, tensor
};

// The file name of part `number` (1-based) of `count` for a split named "{prefix}-…-of-….gguf".
std::string gguf_split_part_name(std::string_view prefix, std::uint32_t number, std::uint32_t count);

// Writes `whole`'s tensors into parts of at most `max_tensors` each, beside `prefix` ("{prefix}-00001-of-
// 0000N.gguf"), as gguf-split does: all metadata in the first part, split keys in every part, tensor data
// unchanged. Returns the parts' paths in order. Throws std::invalid_argument for max_tensors 0.
std::vector<std::filesystem::path> write_gguf_split(const GgufFile& whole, const std::filesystem::path& prefix,
                                                    std::size_t max_tensors);

}  // namespace engine::format
