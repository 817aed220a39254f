#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace fetchd::proof {

// Streaming hashers for the content ids the hub publishes. Fed while bytes arrive, so proving a file
// costs no second read.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(std::span<const std::byte> bytes);
  std::string hex_digest();  // finishes the hash; lower-case hex

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Git's blob id: SHA-1 over "blob {size}\0" followed by the bytes. The size must be known up front.
class GitBlobSha1 {
 public:
  explicit GitBlobSha1(std::uint64_t size);
  ~GitBlobSha1();
  GitBlobSha1(GitBlobSha1&&) noexcept;
  GitBlobSha1& operator=(GitBlobSha1&&) noexcept;

  void update(std::span<const std::byte> bytes);
  std::string hex_digest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::span<const std::byte> bytes);
std::string git_blob_sha1_hex(std::span<const std::byte> bytes);

// Hashes a file's bytes from disk in large reads (used to resume a hash over a partial download and by
// `fetchd verify`). Throws FetchError(Internal) when the file cannot be read.
void hash_file_prefix(const std::filesystem::path& path, std::uint64_t length,
                      const std::function<void(std::span<const std::byte>)>& consume);

}  // namespace fetchd::proof
