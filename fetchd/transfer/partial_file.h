#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace fetchd::transfer {

// A download's `.incomplete` file, opened for writing without truncation so what an earlier run wrote is
// kept. Plain downloads append; Xet downloads write terms at their offsets into a file sized up front.
// Every failure throws FetchError(Internal) naming the path and the remedy.
class PartialFile {
 public:
  explicit PartialFile(const std::filesystem::path& path);
  ~PartialFile();
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;

  std::uint64_t size() const { return size_; }
  void append(std::span<const std::byte> bytes) {
    write_at(size_, bytes);
    size_ += bytes.size();
  }
  // Writes inside the size set by resize(); safe from several threads at once (it changes no member).
  void write_at(std::uint64_t offset, std::span<const std::byte> bytes) const;
  void resize(std::uint64_t size);
  void sync() const;

 private:
  [[noreturn]] void fail(const char* what) const;

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;  // kept by append() and resize(), which run on one thread
};

}  // namespace fetchd::transfer
