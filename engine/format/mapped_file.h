#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace engine::format {

// A read-only memory mapping of a whole file. Weights are used in place from it, so the mapping lives as
// long as any tensor view taken from it.
class MappedFile {
 public:
  // Throws FormatError naming the path when the file cannot be opened or mapped.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace engine::format
