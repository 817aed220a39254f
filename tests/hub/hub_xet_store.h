#pragma once

// Files stored the way Xet stores them: cut into content-defined chunks, each chunk compressed as real
// writers compress it, chunks packed into xorbs, and every file described by terms (runs of consecutive
// chunks of one xorb). All hashing, chunking and chunk encoding is fetchd's Xet core (fetchd/xet): the test
// hub has no second implementation to drift from it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fetchd/xet/xet_hash.h"

namespace testing_support::hub {

// One xorb: chunk records back to back. Like the byte ranges a CAS hands out, it holds records only (no
// footer), so any run of whole records is a servable range.
struct XetXorb {
  fetchd::xet::XetHash hash{};
  std::string hex;                              // the hash in the Xet hex form (URLs, JSON)
  std::shared_ptr<const std::string> bytes;     // shared: responses serve slices without copying
  std::vector<std::uint64_t> record_offsets;    // chunk i is [record_offsets[i], record_offsets[i + 1])
  std::vector<fetchd::xet::MerkleLeaf> chunks;  // each chunk's hash and uncompressed size

  std::size_t chunk_count() const { return chunks.size(); }
};

// Chunks [first_chunk, end_chunk) of one xorb, a consecutive piece of a file.
struct XetTerm {
  std::shared_ptr<const XetXorb> xorb;
  std::uint32_t first_chunk = 0;
  std::uint32_t end_chunk = 0;
  std::uint64_t unpacked_length = 0;  // the decoded size of the whole chunk range
};

struct XetFile {
  fetchd::xet::XetHash hash{};
  std::string hex;
  std::uint64_t size = 0;
  std::vector<XetTerm> terms;  // in file order
};

// How new chunks are grouped into xorbs. Real writers fill a xorb up to 64 MiB; tests ask for a few chunks
// per xorb to get files that span several.
struct XetStoreOptions {
  std::size_t max_chunks_per_xorb = 8 * 1024;
  std::size_t max_xorb_bytes = 64 * 1024 * 1024;
};

class XetStore {
 public:
  // Stores `content` as Xet and returns its description. A chunk already stored (by any earlier file, or
  // earlier in this one) is not stored again: the file's term points into the xorb that holds it, as Xet
  // deduplication does. Storing the same content twice returns the first description.
  std::shared_ptr<const XetFile> add(std::string_view content);

  void set_options(const XetStoreOptions& options);  // for files added afterwards

  // By hash in the Xet hex form; null when unknown.
  std::shared_ptr<const XetFile> file(std::string_view hex) const;
  std::shared_ptr<const XetXorb> xorb(std::string_view hex) const;

 private:
  struct ChunkLocation {
    std::shared_ptr<const XetXorb> xorb;
    std::uint32_t index = 0;
  };

  std::mutex build_mutex_;  // one file is built at a time; guards chunk_index_ and options_
  XetStoreOptions options_;
  std::map<fetchd::xet::XetHash, ChunkLocation> chunk_index_;

  mutable std::mutex mutex_;  // guards the published maps, held only briefly so requests keep flowing
  std::map<std::string, std::shared_ptr<const XetFile>, std::less<>> files_;
  std::map<std::string, std::shared_ptr<const XetXorb>, std::less<>> xorbs_;
};

// The byte range [record_offsets[first], record_offsets[end]) - 1, inclusive, of chunks [first, end).
struct XorbByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};
XorbByteRange record_byte_range(const XetXorb& xorb, std::uint32_t first_chunk, std::uint32_t end_chunk);

// The part of a file a reconstruction covers: terms narrowed to the chunks that hold the requested bytes.
struct XetReconstruction {
  std::uint64_t offset_into_first_range = 0;  // bytes of the first term's decoded data before the range
  std::vector<XetTerm> terms;
};

// The terms holding bytes [first, last] (inclusive; last is clamped to the end of the file), or the whole
// file when no range is given. nullopt when `first` is at or past the end (HTTP 416).
std::optional<XetReconstruction> plan_reconstruction(const XetFile& file,
                                                     std::optional<std::pair<std::uint64_t, std::uint64_t>> range);

// The file's bytes decoded from its xorbs with the core's ChunkReader. Throws when a record does not decode.
std::string reconstruct(const XetFile& file);

}  // namespace testing_support::hub
