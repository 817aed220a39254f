#include "fetchd/transfer/partial_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fetchd/request/fetch_error.h"

namespace fetchd::transfer {

PartialFile::PartialFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("open");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("stat");
  size_ = static_cast<std::uint64_t>(st.st_size);
}

PartialFile::~PartialFile() {
  if (fd_ >= 0) ::close(fd_);
}

void PartialFile::write_at(std::uint64_t offset, std::span<const std::byte> bytes) const {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    offset += static_cast<std::uint64_t>(n);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void PartialFile::resize(std::uint64_t size) {
  if (size != size_ && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("resize");
  size_ = size;
}

void PartialFile::sync() const {
  if (::fsync(fd_) != 0) fail("sync");
}

void PartialFile::fail(const char* what) const {
  throw FetchError(ErrorKind::Internal, "cannot " + std::string(what) + " " + path_.string() + ": " +
                                            std::strerror(errno) + " (check free space and permissions)");
}

}  // namespace fetchd::transfer
