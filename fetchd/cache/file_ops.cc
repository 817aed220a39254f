#include "fetchd/cache/file_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

namespace fetchd::cache::detail {

std::string errno_name(int err) {
  switch (err) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EROFS: return "EROFS";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case EIO: return "EIO";
    case ENOSYS: return "ENOSYS";
    case ENOLCK: return "ENOLCK";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EINVAL: return "EINVAL";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ESTALE: return "ESTALE";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    default: return "errno " + std::to_string(err);
  }
}

std::string errno_advice(int err) {
  switch (err) {
    case EROFS:
      return "The cache volume is mounted read-only: mount it read-write, or point HF_HUB_CACHE at a writable "
             "directory.";
    case EACCES:
    case EPERM:
      return "This user (uid " + std::to_string(::getuid()) +
             ") may not change it: fix the ownership or permissions of the cache directory (for a cache shared "
             "between users, give them one group and a group-writable umask).";
    case ENOSPC:
    case EDQUOT: return "The volume is full or over quota: free space, or point HF_HUB_CACHE at a larger volume.";
    case ENOTDIR:
      return "Something that should be a directory is a file: remove the stray file, or the repository's cache "
             "folder, and fetch again.";
    case EXDEV: return "Both paths must be on one filesystem: keep blobs and their temporary files in one cache.";
    case EIO:
    case ESTALE: return "The storage reported an I/O error: check the volume (and its network mount) and retry.";
    default: return "";
  }
}

FetchError io_error(std::string_view operation, const std::filesystem::path& path, int err) {
  std::string message = "cannot " + std::string(operation) + " " + path.string() + ": " + std::strerror(err) + " (" +
                        errno_name(err) + ").";
  if (const auto advice = errno_advice(err); !advice.empty()) message += " " + advice;
  return FetchError(ErrorKind::Internal, message);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string random_token() {
  // One generator per thread, seeded from the OS: tokens must differ across processes and hosts that share
  // a volume, which a time- or pid-based seed would not guarantee.
  thread_local std::mt19937_64 generator{(static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                                         std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t value = generator();
  std::string token(16, '0');
  for (auto& c : token) {
    c = kHex[value & 0xf];
    value >>= 4;
  }
  return token;
}

std::filesystem::path temp_sibling(const std::filesystem::path& target) {
  return target.parent_path() / ("." + target.filename().string() + ".fetchd-tmp-" + random_token());
}

int try_make_directories(const std::filesystem::path& dir, std::filesystem::path* failed_dir) {
  const auto fail = [&](const std::filesystem::path& at, int err) {
    if (failed_dir != nullptr) *failed_dir = at;
    return err;
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : fail(dir, ENOTDIR);
  if (errno != ENOENT) return fail(dir, errno);
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (const int err = try_make_directories(dir.parent_path(), failed_dir); err != 0) return err;
  }
  // 0777 and the umask decide, as huggingface_hub's os.makedirs does: a shared cache depends on it.
  if (::mkdir(dir.c_str(), 0777) == 0) return 0;
  if (errno == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return 0;  // a racing creator
  return fail(dir, errno);
}

void make_directories(const std::filesystem::path& dir) {
  std::filesystem::path failed;
  if (const int err = try_make_directories(dir, &failed); err != 0) throw io_error("create directory", failed, err);
}

namespace {

int write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

int try_write_file_atomically(const std::filesystem::path& target, std::string_view content, bool durable) {
  std::filesystem::path temp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && !fd; ++attempt) {
    temp = temp_sibling(target);
    fd = UniqueFd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (!fd && errno != EEXIST) return errno;
  }
  if (!fd) return EEXIST;
  int err = write_all(fd.get(), content);
  if (err == 0 && durable && ::fsync(fd.get()) != 0) err = errno;
  // close() reports deferred write errors on NFS; it must succeed before the rename publishes the file.
  if (err == 0 && ::close(fd.release()) != 0) err = errno;
  if (err == 0 && ::rename(temp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return err;
  }
  if (durable) sync_directory(target.parent_path());
  return 0;
}

void write_file_atomically(const std::filesystem::path& target, std::string_view content, bool durable) {
  if (const int err = try_write_file_atomically(target, content, durable); err != 0) {
    throw io_error("write", target, err);
  }
}

std::optional<std::string> read_small_file(const std::filesystem::path& path, std::size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw io_error("open", path, errno);
  }
  std::string content(limit + 1, '\0');
  std::size_t filled = 0;
  while (filled < content.size()) {
    const ssize_t n = ::read(fd.get(), content.data() + filled, content.size() - filled);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EISDIR) return std::nullopt;  // a directory where a file was expected: no such file
      throw io_error("read", path, errno);
    }
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  content.resize(filled);
  return content;
}

namespace {

std::optional<mode_t> stat_mode(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return st.st_mode;
  // ELOOP: a symlink cycle is as unusable as a dangling link; a fetch replaces either.
  if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return std::nullopt;
  throw io_error("inspect", path, errno);
}

}  // namespace

bool is_regular_file_at(const std::filesystem::path& path) {
  const auto mode = stat_mode(path);
  return mode && S_ISREG(*mode);
}

bool is_directory_at(const std::filesystem::path& path) {
  const auto mode = stat_mode(path);
  return mode && S_ISDIR(*mode);
}

void sync_directory(const std::filesystem::path& dir) noexcept {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

}  // namespace fetchd::cache::detail
