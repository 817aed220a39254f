#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/mapped_file.h"

namespace engine::format {

enum class SafetensorsDType {
  Bool,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64,
};

std::string_view dtype_name(SafetensorsDType dtype);
std::size_t dtype_size(SafetensorsDType dtype);
std::optional<SafetensorsDType> parse_dtype(std::string_view name);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the data section, end exclusive
  std::uint64_t end = 0;

  std::uint64_t byte_size() const { return end - begin; }
};

// The parsed and fully validated layout of a safetensors file.
struct SafetensorsLayout {
  std::uint64_t header_length = 0;              // N, the JSON header's length in bytes
  std::vector<SafetensorsTensor> tensors;       // ordered by data offset
  std::map<std::string, std::string> metadata;  // "__metadata__"

  std::uint64_t data_offset() const { return 8 + header_length; }
};

// Largest header this reader accepts (real headers are a few megabytes at most).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses and validates the whole file image: header length within bounds and the file, the header is
// UTF-8 JSON starting with '{' (trailing spaces allowed), known dtypes, shape × dtype size == span, no
// duplicate names, spans contiguous from 0 (no overlap, no hole), and 8 + N + max(end) == file size.
// `name` is used in error messages. Throws FormatError.
SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view name);

// A mapped, validated safetensors file whose tensor data is read in place.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const SafetensorsLayout& layout() const { return layout_; }
  const std::vector<SafetensorsTensor>& tensors() const { return layout_.tensors; }
  const SafetensorsTensor* find(std::string_view name) const;
  std::span<const std::byte> data(const SafetensorsTensor& tensor) const;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  SafetensorsFile(MappedFile file, SafetensorsLayout layout);

  MappedFile file_;
  SafetensorsLayout layout_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace engine::format
