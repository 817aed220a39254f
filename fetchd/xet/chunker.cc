#include "fetchd/xet/chunker.h"

#include <blake3.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/gear_table.h"

namespace fetchd::xet {
namespace {

// Bytes of a chunk before this offset shift out of the 64-bit gear hash before the first cut check (at
// size kMinChunkSize), so they need not be hashed at all.
constexpr std::uint64_t kGearWindow = 64;
constexpr std::uint64_t kFirstHashedOffset = kMinChunkSize - kGearWindow;

}  // namespace

std::optional<std::size_t> Chunker::next_cut(std::span<const std::byte> bytes) {
  const auto* const begin = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const auto* const end = begin + bytes.size();
  const auto* at = begin;
  std::uint64_t hash = hash_;
  std::uint64_t size = chunk_size_;

  // 1. Skip the bytes that cannot reach the hash at the first check (the hash stays 0 meanwhile).
  if (size < kFirstHashedOffset) {
    const auto skip = std::min<std::uint64_t>(kFirstHashedOffset - size, static_cast<std::uint64_t>(end - at));
    at += skip;
    size += skip;
  }
  // 2. Hash without checking until the chunk is one byte short of the minimum.
  while (at < end && size < kMinChunkSize - 1) {
    hash = (hash << 1) + kGearTable[*at++];
    ++size;
  }
  // 3. Hash and check every byte; the chunk is cut at the maximum size at the latest. (This simple loop runs
  // at about one byte per cycle; unrolling it to shorten the hash's dependency chain measured no faster.)
  if (at < end && size >= kMinChunkSize - 1) {
    const auto room = std::min<std::uint64_t>(kMaxChunkSize - size, static_cast<std::uint64_t>(end - at));
    const auto* const scan_start = at;
    const auto* const stop = at + room;
    bool cut = false;
    while (at < stop) {
      hash = (hash << 1) + kGearTable[*at++];
      if ((hash & kChunkCutMask) == 0) {
        cut = true;
        break;
      }
    }
    size += static_cast<std::uint64_t>(at - scan_start);
    if (cut || size == kMaxChunkSize) {
      const auto consumed = static_cast<std::size_t>(at - begin);
      position_ += consumed;
      hash_ = 0;
      chunk_size_ = 0;
      return consumed;
    }
  }
  position_ += bytes.size();
  hash_ = hash;
  chunk_size_ = size;
  return std::nullopt;
}

void Chunker::update(std::span<const std::byte> bytes, std::vector<std::uint64_t>& chunk_ends) {
  while (!bytes.empty()) {
    const auto cut = next_cut(bytes);
    if (!cut) return;
    chunk_ends.push_back(position_);
    bytes = bytes.subspan(*cut);
  }
}

std::optional<std::uint64_t> Chunker::finish() {
  const bool tail = chunk_size_ > 0;
  const std::uint64_t end = position_;
  *this = Chunker{};
  if (!tail) return std::nullopt;
  return end;
}

std::vector<std::uint64_t> chunk_boundaries(std::span<const std::byte> bytes) {
  Chunker chunker;
  std::vector<std::uint64_t> ends;
  ends.reserve(bytes.size() / (64 * 1024) + 1);
  chunker.update(bytes, ends);
  if (const auto last = chunker.finish()) ends.push_back(*last);
  return ends;
}

struct ContentHasher::State {
  Chunker chunker;
  blake3_hasher chunk;  // keyed with kDataKey, fed the current chunk's bytes
  FileHasher file;
  std::uint64_t size = 0;

  State() { blake3_hasher_init_keyed(&chunk, kDataKey.data()); }

  void end_chunk(std::uint64_t chunk_size) {
    XetHash hash;
    blake3_hasher_finalize(&chunk, hash.data(), hash.size());
    file.add_chunk(hash, chunk_size);
    blake3_hasher_init_keyed(&chunk, kDataKey.data());
  }
};

ContentHasher::ContentHasher() : state_(std::make_unique<State>()) {}
ContentHasher::~ContentHasher() = default;
ContentHasher::ContentHasher(ContentHasher&&) noexcept = default;
ContentHasher& ContentHasher::operator=(ContentHasher&&) noexcept = default;

void ContentHasher::update(std::span<const std::byte> bytes) {
  State& s = *state_;
  s.size += bytes.size();
  while (!bytes.empty()) {
    const std::uint64_t size_before = s.chunker.current_chunk_size();
    const auto cut = s.chunker.next_cut(bytes);
    const std::size_t taken = cut.value_or(bytes.size());
    blake3_hasher_update(&s.chunk, bytes.data(), taken);
    if (cut) s.end_chunk(size_before + taken);
    bytes = bytes.subspan(taken);
  }
}

XetHash ContentHasher::finish() {
  State& s = *state_;
  const std::uint64_t tail = s.chunker.current_chunk_size();
  if (s.chunker.finish()) s.end_chunk(tail);
  return s.file.file_hash();
}

std::uint64_t ContentHasher::size() const {
  return state_->size;
}
std::uint64_t ContentHasher::chunk_count() const {
  return state_->file.chunk_count();
}

namespace {

// The file descriptor of an open file, closed when it goes out of scope.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::filesystem::path& path)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail("cannot open");
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint for read-ahead; failure is harmless
  }
  ~ReadOnlyFile() { ::close(fd_); }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Reads up to buffer.size() bytes; 0 at the end of the file.
  std::size_t read(std::span<std::byte> buffer) {
    for (;;) {
      const ssize_t got = ::read(fd_, buffer.data(), buffer.size());
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) fail("cannot read");
    }
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw FetchError(ErrorKind::Internal,
                     std::string(what) + " " + path_.string() + " to compute its Xet hash: " + std::strerror(errno));
  }

  std::filesystem::path path_;
  int fd_;
};

}  // namespace

XetHash hash_file_by_chunks(const std::filesystem::path& path) {
  ReadOnlyFile file(path);
  ContentHasher hasher;
  std::vector<std::byte> buffer(4 * 1024 * 1024);  // large reads: a few system calls per chunk-size of work
  while (const std::size_t got = file.read(buffer)) hasher.update(std::span(buffer).first(got));
  return hasher.finish();
}

}  // namespace fetchd::xet
