#pragma once

// POSIX file helpers shared by the cache layout and the repository lock. They report errno precisely,
// which std::filesystem hides behind error_code in ways that lose the failing path; the messages name the
// path, the operation and the remedy, because a cache on a shared volume fails for reasons (read-only
// mounts, other users' files) that the user has to fix, not the program.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fetchd/request/fetch_error.h"

namespace fetchd::cache::detail {

// "cannot <operation> <path>: <strerror> (<ERRNO>). <what to do>" as FetchError(Internal).
FetchError io_error(std::string_view operation, const std::filesystem::path& path, int err);

// What a user can do about `err` on a cache volume, as one sentence (empty when nothing useful applies).
std::string errno_advice(int err);

// The symbolic errno name ("EROFS"), or the number where the name is not known here.
std::string errno_name(int err);

// An open file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

// 16 random lowercase hex characters: unique names for temporary files and lease holders.
std::string random_token();

// A fresh name next to `target` for a temporary that will be renamed onto it. Same directory, so the
// rename stays on one filesystem and is atomic.
std::filesystem::path temp_sibling(const std::filesystem::path& target);

// mkdir -p. Returns 0, or the errno of the first directory that could not be made (reported through
// `failed_dir` when given). Never touches a directory that already exists.
int try_make_directories(const std::filesystem::path& dir, std::filesystem::path* failed_dir = nullptr);
void make_directories(const std::filesystem::path& dir);

// Writes `content` to a temporary sibling and renames it over `target`, so a reader sees the old file or
// the whole new one, never a part. `durable` adds fsync of the file and its directory. The temporary is
// removed on failure. The try_ form returns 0 or the errno that stopped it; the other throws io_error.
int try_write_file_atomically(const std::filesystem::path& target, std::string_view content, bool durable);
void write_file_atomically(const std::filesystem::path& target, std::string_view content, bool durable);

// Reads a small file whole. nullopt when no file is there (ENOENT, ENOTDIR, a directory); throws for any
// other error. Of a file longer than `limit` bytes only the first `limit + 1` are returned, so a caller that
// validates the content sees it as too long.
std::optional<std::string> read_small_file(const std::filesystem::path& path, std::size_t limit = 4096);

// stat() that follows symlinks: false when nothing usable is there (or a dangling or looping symlink),
// throws when the
// answer cannot be known (EACCES, EIO), so a permission problem is not mistaken for a cache miss.
bool is_regular_file_at(const std::filesystem::path& path);
bool is_directory_at(const std::filesystem::path& path);

// fsync of a directory so a rename in it survives a crash; best effort (some filesystems refuse it).
void sync_directory(const std::filesystem::path& dir) noexcept;

}  // namespace fetchd::cache::detail
