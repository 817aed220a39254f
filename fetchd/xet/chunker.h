#pragma once

// Xet content-defined chunking: where a byte stream is cut into chunks, and the Xet file hash of a stream
// or a file on disk computed from those chunks.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fetchd/xet/xet_hash.h"

namespace fetchd::xet {

inline constexpr std::size_t kMinChunkSize = 8 * 1024;
inline constexpr std::size_t kMaxChunkSize = 128 * 1024;
// A chunk ends after a byte whose gear hash has none of these bits set (once the chunk is kMinChunkSize).
inline constexpr std::uint64_t kChunkCutMask = 0xFFFF000000000000;

// Finds chunk boundaries in a stream fed in pieces of any size. The gear hash runs per byte,
// h = (h << 1) + kGearTable[byte], restarting at 0 after every cut; a chunk ends after the byte at which it
// is at least kMinChunkSize long and either reaches kMaxChunkSize or (h & kChunkCutMask) == 0.
//
// Speed: a byte's contribution leaves the 64-bit hash after 64 more shifts, so the first
// kMinChunkSize - 64 bytes of every chunk cannot affect any cut decision and are skipped unread. The hashes
// at every checked position are exactly the spec's (a test compares against the byte-by-byte rule).
class Chunker {
 public:
  // Scans the stream's next bytes. Returns how many of them finish the current chunk (the chunk ends after
  // that many; call again with the bytes after them), or nullopt when all of them belong to a chunk that
  // goes on.
  std::optional<std::size_t> next_cut(std::span<const std::byte> bytes);

  // Feeds the stream's next bytes, appending to `chunk_ends` the end offset (from the start of the stream)
  // of every chunk they complete.
  void update(std::span<const std::byte> bytes, std::vector<std::uint64_t>& chunk_ends);

  // End of the stream: the end offset of the last chunk when bytes after the last cut remain (nullopt for
  // an empty stream or one that ended on a cut). The chunker is then ready for a new stream.
  std::optional<std::uint64_t> finish();

  std::uint64_t position() const { return position_; }              // bytes fed so far
  std::uint64_t current_chunk_size() const { return chunk_size_; }  // bytes since the last cut

 private:
  std::uint64_t hash_ = 0;
  std::uint64_t chunk_size_ = 0;
  std::uint64_t position_ = 0;
};

// The end offset of every chunk of `bytes` (the last one is bytes.size(); none for no bytes).
std::vector<std::uint64_t> chunk_boundaries(std::span<const std::byte> bytes);

// The Xet file hash of a byte stream fed in pieces of any size: chunks it, hashes each chunk while its
// bytes pass (nothing is buffered), and builds the merkle tree as chunk hashes appear. Memory is constant.
class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(ContentHasher&&) noexcept;
  ContentHasher& operator=(ContentHasher&&) noexcept;

  void update(std::span<const std::byte> bytes);
  // Ends the stream and returns its Xet file hash (all zeros for no bytes). Call once.
  XetHash finish();

  std::uint64_t size() const;         // bytes fed so far
  std::uint64_t chunk_count() const;  // chunks completed so far (after finish(): all of them)

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The Xet file hash of the file at `path`, read once in large blocks (for `fetchd verify`). Throws
// FetchError (Internal) naming the file when it cannot be read.
XetHash hash_file_by_chunks(const std::filesystem::path& path);

}  // namespace fetchd::xet
