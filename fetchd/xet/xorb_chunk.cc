#include "fetchd/xet/xorb_chunk.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/lz4_frame.h"

namespace fetchd::xet {
namespace {

std::uint32_t load_u24_le(const std::byte* p) {
  return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
         std::to_integer<std::uint32_t>(p[2]) << 16;
}

void store_u24_le(std::uint32_t value, std::byte* p) {
  p[0] = static_cast<std::byte>(value);
  p[1] = static_cast<std::byte>(value >> 8);
  p[2] = static_cast<std::byte>(value >> 16);
}

[[noreturn]] void refuse(ChunkLocation where, const std::string& what) {
  throw FetchError(ErrorKind::Integrity, "Xet xorb chunk " + std::to_string(where.index) + " (record at byte " +
                                             std::to_string(where.offset) + "): " + what);
}

// Sizes of the four byte groups of an n-byte chunk: groups before n % 4 hold one byte more.
std::array<std::size_t, 4> group_sizes(std::size_t n) {
  std::array<std::size_t, 4> sizes{};
  for (std::size_t g = 0; g < 4; ++g) sizes[g] = n / 4 + (g < n % 4 ? 1 : 0);
  return sizes;
}

// Decodes a validated record's payload into `out` (exactly header.uncompressed_size bytes). `scratch` holds
// byte-grouped bytes before they are interleaved back: it is asked for the declared size, only for scheme 2.
template <typename ScratchFor>
void decode_payload(const ChunkHeader& header, std::span<const std::byte> payload, std::span<std::byte> out,
                    ScratchFor&& scratch_for, ChunkLocation where) {
  const auto check_length = [&](std::size_t decoded) {
    if (decoded != header.uncompressed_size) {
      refuse(where, "decodes to " + std::to_string(decoded) + " bytes, the header declares " +
                        std::to_string(header.uncompressed_size));
    }
  };
  const auto decode_lz4 = [&](std::span<std::byte> into) {
    try {
      check_length(lz4::decode_frame(payload, into));
    } catch (const lz4::FrameError& e) {
      refuse(where, std::string("scheme ") + std::to_string(header.scheme) + ": " + e.what());
    }
  };
  switch (static_cast<CompressionScheme>(header.scheme)) {
    case CompressionScheme::None:
      check_length(payload.size());
      std::copy(payload.begin(), payload.end(), out.begin());
      return;
    case CompressionScheme::Lz4: decode_lz4(out); return;
    case CompressionScheme::ByteGrouping4Lz4: {
      const std::span<std::byte> grouped = scratch_for(header.uncompressed_size);
      decode_lz4(grouped);
      byte_ungroup4(grouped, out);
      return;
    }
  }
  refuse(where, "unknown compression scheme " + std::to_string(header.scheme));  // read_chunk_header stops it first
}

std::vector<std::byte> make_record(CompressionScheme scheme, std::size_t uncompressed_size,
                                   std::span<const std::byte> payload) {
  std::vector<std::byte> record(kChunkHeaderSize + payload.size());
  ChunkHeader header;
  header.payload_size = static_cast<std::uint32_t>(payload.size());
  header.scheme = static_cast<std::uint8_t>(scheme);
  header.uncompressed_size = static_cast<std::uint32_t>(uncompressed_size);
  write_chunk_header(header, std::span(record).first<kChunkHeaderSize>());
  std::copy(payload.begin(), payload.end(), record.begin() + kChunkHeaderSize);
  return record;
}

void require_chunk_size(std::size_t size) {
  if (size > kMaxUncompressedChunkSize) {
    throw FetchError(ErrorKind::Internal, "cannot encode a Xet chunk of " + std::to_string(size) + " bytes: at most " +
                                              std::to_string(kMaxUncompressedChunkSize) + " fit in one chunk");
  }
}

void require_same_size(std::size_t in, std::size_t out) {
  if (in != out) {
    throw FetchError(ErrorKind::Internal, "byte grouping needs equal input and output lengths, not " +
                                              std::to_string(in) + " and " + std::to_string(out));
  }
}

std::vector<std::byte> grouped_lz4_frame(std::span<const std::byte> bytes) {
  std::vector<std::byte> grouped(bytes.size());
  byte_group4(bytes, grouped);
  return lz4::encode_frame(grouped);
}

}  // namespace

ChunkHeader read_chunk_header(std::span<const std::byte> bytes, ChunkLocation where) {
  if (bytes.size() < kChunkHeaderSize) {
    refuse(where, "only " + std::to_string(bytes.size()) + " bytes remain, less than the 8-byte chunk header");
  }
  ChunkHeader header;
  header.version = std::to_integer<std::uint8_t>(bytes[0]);
  header.payload_size = load_u24_le(bytes.data() + 1);
  header.scheme = std::to_integer<std::uint8_t>(bytes[4]);
  header.uncompressed_size = load_u24_le(bytes.data() + 5);
  if (header.version > kChunkFormatVersion) {
    refuse(where, "chunk format version " + std::to_string(header.version) + ", only version 0 is known");
  }
  if (header.scheme > static_cast<std::uint8_t>(CompressionScheme::ByteGrouping4Lz4)) {
    refuse(where, "unknown compression scheme " + std::to_string(header.scheme) +
                      " (known: 0 none, 1 LZ4, 2 byte "
                      "grouping + LZ4)");
  }
  if (header.uncompressed_size > kMaxUncompressedChunkSize) {
    refuse(where, "the header declares " + std::to_string(header.uncompressed_size) + " uncompressed bytes, over the " +
                      std::to_string(kMaxUncompressedChunkSize) + "-byte limit");
  }
  if (header.payload_size > kMaxChunkPayloadSize) {
    refuse(where, "the header declares a " + std::to_string(header.payload_size) + "-byte payload, over the " +
                      std::to_string(kMaxChunkPayloadSize) + "-byte limit");
  }
  if (header.payload_size > bytes.size() - kChunkHeaderSize) {
    refuse(where, "the " + std::to_string(header.payload_size) +
                      "-byte payload runs past the end of the given bytes (" +
                      std::to_string(bytes.size() - kChunkHeaderSize) + " bytes follow the header)");
  }
  return header;
}

void write_chunk_header(const ChunkHeader& header, std::span<std::byte, kChunkHeaderSize> out) {
  out[0] = static_cast<std::byte>(header.version);
  store_u24_le(header.payload_size, out.data() + 1);
  out[4] = static_cast<std::byte>(header.scheme);
  store_u24_le(header.uncompressed_size, out.data() + 5);
}

std::size_t decode_chunk(std::span<const std::byte> record_bytes, std::vector<std::byte>& out, ChunkLocation where) {
  const ChunkHeader header = read_chunk_header(record_bytes, where);
  const auto payload = record_bytes.subspan(kChunkHeaderSize, header.payload_size);
  const std::size_t old_size = out.size();
  out.resize(old_size + header.uncompressed_size);  // validated: at most kMaxUncompressedChunkSize more
  try {
    std::vector<std::byte> scratch;
    const auto scratch_for = [&scratch](std::size_t size) {
      scratch.resize(size);
      return std::span(scratch);
    };
    decode_payload(header, payload, std::span(out).subspan(old_size), scratch_for, where);
  } catch (...) {
    out.resize(old_size);
    throw;
  }
  return header.record_size();
}

void byte_group4(std::span<const std::byte> in, std::span<std::byte> out) {
  require_same_size(in.size(), out.size());
  const std::size_t n = in.size();
  const auto sizes = group_sizes(n);
  std::byte* g0 = out.data();
  std::byte* g1 = g0 + sizes[0];
  std::byte* g2 = g1 + sizes[1];
  std::byte* g3 = g2 + sizes[2];
  const std::size_t whole = n / 4;
  for (std::size_t i = 0; i < whole; ++i) {
    g0[i] = in[4 * i];
    g1[i] = in[4 * i + 1];
    g2[i] = in[4 * i + 2];
    g3[i] = in[4 * i + 3];
  }
  std::byte* const groups[3] = {g0, g1, g2};
  for (std::size_t g = 0; g < n % 4; ++g) groups[g][whole] = in[4 * whole + g];
}

void byte_ungroup4(std::span<const std::byte> grouped, std::span<std::byte> out) {
  require_same_size(grouped.size(), out.size());
  const std::size_t n = grouped.size();
  const auto sizes = group_sizes(n);
  const std::byte* g0 = grouped.data();
  const std::byte* g1 = g0 + sizes[0];
  const std::byte* g2 = g1 + sizes[1];
  const std::byte* g3 = g2 + sizes[2];
  const std::size_t whole = n / 4;
  for (std::size_t i = 0; i < whole; ++i) {
    out[4 * i] = g0[i];
    out[4 * i + 1] = g1[i];
    out[4 * i + 2] = g2[i];
    out[4 * i + 3] = g3[i];
  }
  const std::byte* const groups[3] = {g0, g1, g2};
  for (std::size_t g = 0; g < n % 4; ++g) out[4 * whole + g] = groups[g][whole];
}

std::vector<std::byte> encode_chunk(std::span<const std::byte> bytes) {
  require_chunk_size(bytes.size());
  const auto lz4_frame = lz4::encode_frame(bytes);
  const auto grouped_frame = grouped_lz4_frame(bytes);
  // Smallest wins; on a tie the simpler scheme (none, then LZ4) is kept.
  if (bytes.size() <= std::min(lz4_frame.size(), grouped_frame.size())) {
    return make_record(CompressionScheme::None, bytes.size(), bytes);
  }
  if (lz4_frame.size() <= grouped_frame.size()) return make_record(CompressionScheme::Lz4, bytes.size(), lz4_frame);
  return make_record(CompressionScheme::ByteGrouping4Lz4, bytes.size(), grouped_frame);
}

std::vector<std::byte> encode_chunk(std::span<const std::byte> bytes, CompressionScheme scheme) {
  require_chunk_size(bytes.size());
  switch (scheme) {
    case CompressionScheme::None: return make_record(scheme, bytes.size(), bytes);
    case CompressionScheme::Lz4: return make_record(scheme, bytes.size(), lz4::encode_frame(bytes));
    case CompressionScheme::ByteGrouping4Lz4: return make_record(scheme, bytes.size(), grouped_lz4_frame(bytes));
  }
  throw FetchError(ErrorKind::Internal, "unknown Xet compression scheme " + std::to_string(static_cast<int>(scheme)));
}

EncodedXorb encode_xorb(std::span<const std::span<const std::byte>> chunks) {
  EncodedXorb xorb;
  xorb.record_offsets.reserve(chunks.size() + 1);
  xorb.chunks.reserve(chunks.size());
  for (const auto& chunk : chunks) {
    const auto record = encode_chunk(chunk);
    xorb.record_offsets.push_back(xorb.bytes.size());
    xorb.bytes.insert(xorb.bytes.end(), record.begin(), record.end());
    xorb.chunks.emplace_back(chunk_hash(chunk), chunk.size());
  }
  xorb.record_offsets.push_back(xorb.bytes.size());
  xorb.hash = xorb_hash(xorb.chunks);
  return xorb;
}

std::span<std::byte> ChunkReader::Storage::first(std::size_t size) {
  if (size > capacity) {
    bytes = std::make_unique_for_overwrite<std::byte[]>(size);
    capacity = size;
  }
  return {bytes.get(), size};
}

ChunkReader::ChunkReader(std::span<const std::byte> range, std::uint64_t first_chunk_index)
    : range_(range), first_chunk_index_(first_chunk_index) {}

std::optional<DecodedChunk> ChunkReader::next() {
  if (at_end()) return std::nullopt;
  const ChunkLocation where{first_chunk_index_ + chunks_read_, offset_};
  const auto rest = range_.subspan(offset_);
  const ChunkHeader header = read_chunk_header(rest, where);
  const auto chunk = chunk_.first(header.uncompressed_size);  // validated: at most kMaxUncompressedChunkSize
  const auto scratch_for = [this](std::size_t size) { return scratch_.first(size); };
  decode_payload(header, rest.subspan(kChunkHeaderSize, header.payload_size), chunk, scratch_for, where);
  const DecodedChunk decoded{where.index, where.offset, chunk};
  offset_ += header.record_size();
  ++chunks_read_;
  return decoded;
}

}  // namespace fetchd::xet
