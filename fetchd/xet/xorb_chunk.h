#pragma once

// Xorb chunk records: [8-byte header][payload], laid back to back in a xorb. Header: byte 0 version (0);
// bytes 1-3 payload length (24-bit LE); byte 4 compression scheme; bytes 5-7 uncompressed length (24-bit LE).
//
// Decoding trusts nothing: every length is checked against the protocol's limits and the bytes actually
// given before anything is allocated, the output never grows past the header's declared uncompressed
// length, and every refusal is a FetchError (Integrity) that names the chunk and the numbers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fetchd/xet/xet_hash.h"

namespace fetchd::xet {

enum class CompressionScheme : std::uint8_t {
  None = 0,
  Lz4 = 1,               // one LZ4 frame (magic 0x184D2204)
  ByteGrouping4Lz4 = 2,  // byte grouping 4, then one LZ4 frame
};

inline constexpr std::size_t kChunkHeaderSize = 8;
inline constexpr std::uint32_t kChunkFormatVersion = 0;
inline constexpr std::size_t kMaxUncompressedChunkSize = 131072;
inline constexpr std::size_t kMaxChunkPayloadSize = 262144;

struct ChunkHeader {
  std::uint8_t version = 0;
  std::uint32_t payload_size = 0;
  std::uint8_t scheme = 0;  // raw byte: a CompressionScheme once validated
  std::uint32_t uncompressed_size = 0;

  std::size_t record_size() const { return kChunkHeaderSize + payload_size; }
};

// Where a record sits, for error messages: its chunk index within the xorb and its byte offset within the
// bytes being decoded (a whole xorb or a byte range fetched from one).
struct ChunkLocation {
  std::uint64_t index = 0;
  std::uint64_t offset = 0;
};

// Reads and validates the header at the front of `bytes` (version, scheme, both limits, and that the
// payload lies within `bytes`).
ChunkHeader read_chunk_header(std::span<const std::byte> bytes, ChunkLocation where = {});
void write_chunk_header(const ChunkHeader& header, std::span<std::byte, kChunkHeaderSize> out);

// Decodes the record at the front of `record_bytes` and appends its uncompressed bytes to `out`. Returns the
// record's length (header + payload). On a refusal `out` is left as it was.
std::size_t decode_chunk(std::span<const std::byte> record_bytes, std::vector<std::byte>& out,
                         ChunkLocation where = {});

// Byte grouping 4: with q = n / 4, r = n % 4, group g (0..3) takes bytes 4i+g for i < q, groups 0..r-1 take
// one extra byte 4q+g, and the output is group 0, 1, 2, 3 back to back. Lengths are unchanged.
void byte_group4(std::span<const std::byte> in, std::span<std::byte> out);
void byte_ungroup4(std::span<const std::byte> grouped, std::span<std::byte> out);

// One record holding `bytes` (at most kMaxUncompressedChunkSize), in the scheme that stores it smallest
// (ties go to the simpler scheme: none, then LZ4, then byte grouping + LZ4), as Xet writers do.
std::vector<std::byte> encode_chunk(std::span<const std::byte> bytes);
// One record holding `bytes` in the given scheme, even when that is larger (tests and benchmarks).
std::vector<std::byte> encode_chunk(std::span<const std::byte> bytes, CompressionScheme scheme);

// A xorb's bytes: the chunk records back to back, with no footer. record_offsets[i] is where chunk i's
// record starts and record_offsets.back() == bytes.size(), so chunks [a, b) are the bytes
// [record_offsets[a], record_offsets[b]) and a byte range of whole records decodes on its own.
struct EncodedXorb {
  std::vector<std::byte> bytes;
  std::vector<std::uint64_t> record_offsets;  // chunk count + 1 entries
  std::vector<MerkleLeaf> chunks;             // each chunk's hash and uncompressed size
  XetHash hash{};                             // the xorb hash (merkle root over `chunks`)
};
EncodedXorb encode_xorb(std::span<const std::span<const std::byte>> chunks);

// A decoded chunk; `bytes` stays valid until the reader's next call.
struct DecodedChunk {
  std::uint64_t index = 0;          // chunk index within the xorb
  std::uint64_t record_offset = 0;  // where its record starts within the reader's bytes
  std::span<const std::byte> bytes;
};

// Walks the consecutive records of a byte range fetched from a xorb (a range starts and ends on record
// boundaries), decoding one chunk at a time into a buffer it reuses. Refuses anything malformed, including a
// range that ends inside a record.
class ChunkReader {
 public:
  // `first_chunk_index` is the xorb chunk index of the range's first record (for messages and DecodedChunk).
  explicit ChunkReader(std::span<const std::byte> range, std::uint64_t first_chunk_index = 0);

  // The next chunk, or nullopt once every byte of the range has been decoded.
  std::optional<DecodedChunk> next();

  bool at_end() const { return offset_ == range_.size(); }
  std::uint64_t chunks_read() const { return chunks_read_; }

 private:
  std::span<const std::byte> range_;
  std::uint64_t first_chunk_index_;
  std::size_t offset_ = 0;
  std::uint64_t chunks_read_ = 0;
  // Grow-only storage, never zero-filled (the decoder writes every byte it hands out), sized by the largest
  // declared chunk seen so far.
  struct Storage {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t capacity = 0;
    std::span<std::byte> first(std::size_t size);
  };
  Storage chunk_;    // the last decoded chunk
  Storage scratch_;  // byte-grouped bytes before they are interleaved back
};

}  // namespace fetchd::xet
