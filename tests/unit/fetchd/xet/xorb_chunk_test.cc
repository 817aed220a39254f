// xorb_chunk: byte grouping, the chunk record codec (cross-checked against liblz4's own frame code) and its
// refusals of malformed records, and xorbs read back through the range reader.

#include "fetchd/xet/xorb_chunk.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lz4frame.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/xet_hash.h"
#include "tests/unit/fetchd/xet/xet_test_data.h"

// ---- Allocation watch --------------------------------------------------------------------------------------
// The binary's operator new records the largest single allocation while a LargestAllocation is alive, so a
// test can prove that decoding a hostile record allocates no more than its header declares.
namespace {
std::atomic<bool> g_watching_allocations{false};
std::atomic<std::size_t> g_largest_allocation{0};

void* allocate(std::size_t size) {
  if (g_watching_allocations.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (size > seen && !g_largest_allocation.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) {
  return allocate(size);
}
void* operator new[](std::size_t size) {
  return allocate(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace fetchd::xet {
namespace {

class LargestAllocation {
 public:
  LargestAllocation() {
    g_largest_allocation = 0;
    g_watching_allocations = true;
  }
  ~LargestAllocation() { g_watching_allocations = false; }
  LargestAllocation(const LargestAllocation&) = delete;
  LargestAllocation& operator=(const LargestAllocation&) = delete;
  std::size_t bytes() const { return g_largest_allocation.load(); }
};

// ---- Helpers -----------------------------------------------------------------------------------------------

// Expects decoding `record` to be refused with a message holding every one of `fragments`.
void expect_refused(std::span<const std::byte> record, const std::vector<std::string>& fragments) {
  Bytes out(3, std::byte{0x5a});
  try {
    decode_chunk(record, out);
    ADD_FAILURE() << "decode_chunk accepted the record";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    for (const auto& fragment : fragments) EXPECT_THAT(e.what(), testing::HasSubstr(fragment));
  }
  EXPECT_EQ(out, Bytes(3, std::byte{0x5a})) << "a refused record must leave the output as it was";
}

// liblz4's own frame decoder, for the other direction of the interop check.
Bytes lz4f_decode(std::span<const std::byte> frame, std::size_t expected_size) {
  LZ4F_dctx* context = nullptr;
  EXPECT_FALSE(LZ4F_isError(LZ4F_createDecompressionContext(&context, LZ4F_VERSION)));
  Bytes out(expected_size + 16);
  std::size_t out_size = out.size();
  std::size_t in_size = frame.size();
  const std::size_t hint = LZ4F_decompress(context, out.data(), &out_size, frame.data(), &in_size, nullptr);
  EXPECT_EQ(hint, 0u) << "frame not complete";
  EXPECT_EQ(in_size, frame.size());
  LZ4F_freeDecompressionContext(context);
  out.resize(out_size);
  return out;
}

// ---- Byte grouping -----------------------------------------------------------------------------------------

TEST(XetByteGrouping, LengthsZeroToNine) {
  // Written out from the rule for 0..9 bytes valued 0..n-1.
  const std::vector<std::vector<int>> expected = {
      {},
      {0},
      {0, 1},
      {0, 1, 2},
      {0, 1, 2, 3},
      {0, 4, 1, 2, 3},
      {0, 4, 1, 5, 2, 3},
      {0, 4, 1, 5, 2, 6, 3},
      {0, 4, 1, 5, 2, 6, 3, 7},
      {0, 4, 8, 1, 5, 2, 6, 3, 7},
  };
  for (std::size_t n = 0; n < expected.size(); ++n) {
    Bytes in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::byte>(i);
    Bytes grouped(n);
    byte_group4(in, grouped);
    Bytes want;
    for (const int v : expected[n]) want.push_back(static_cast<std::byte>(v));
    EXPECT_EQ(grouped, want) << n << " bytes";
    Bytes back(n);
    byte_ungroup4(grouped, back);
    EXPECT_EQ(back, in) << n << " bytes";
  }
}

TEST(XetByteGrouping, RoundTripsLongOddLengths) {
  for (const std::size_t n : {1021u, 1022u, 1023u, 1024u, 131071u}) {
    const Bytes in = splitmix64_bytes(n, n);
    Bytes grouped(n), back(n);
    byte_group4(in, grouped);
    byte_ungroup4(grouped, back);
    EXPECT_EQ(back, in);
    // Group 0 is every fourth byte from byte 0.
    for (std::size_t i = 0; i < n / 4; i += 37) EXPECT_EQ(grouped[i], in[4 * i]);
  }
}

// ---- Chunk records -----------------------------------------------------------------------------------------

TEST(XetChunkCodec, RoundTripsEverySchemeOnEveryKindOfData) {
  const std::vector<std::pair<std::string, Bytes>> inputs = {
      {"empty", {}},
      {"one byte", Bytes{std::byte{42}}},
      {"compressible", text_like(100'000, 1)},
      {"counters", u32_counters(131072)},
      {"incompressible", splitmix64_bytes(65536, 2)},
      {"odd length compressible", text_like(12345, 3)},
      {"odd length incompressible", splitmix64_bytes(131071, 4)},
      {"largest chunk", splitmix64_bytes(kMaxUncompressedChunkSize, 5)},
      {"zeros", Bytes(77777, std::byte{0})},
  };
  for (const auto& [name, data] : inputs) {
    for (const auto scheme : {CompressionScheme::None, CompressionScheme::Lz4, CompressionScheme::ByteGrouping4Lz4}) {
      SCOPED_TRACE(name + ", scheme " + std::to_string(static_cast<int>(scheme)));
      const Bytes record = encode_chunk(data, scheme);
      const ChunkHeader header = read_chunk_header(record);
      EXPECT_EQ(header.version, 0);
      EXPECT_EQ(header.scheme, static_cast<std::uint8_t>(scheme));
      EXPECT_EQ(header.uncompressed_size, data.size());
      EXPECT_EQ(header.record_size(), record.size());
      EXPECT_EQ(decode_record(record), data);
      if (scheme == CompressionScheme::Lz4) {
        EXPECT_EQ(lz4f_decode(std::span(record).subspan(kChunkHeaderSize), data.size()), data)
            << "liblz4 reads our frames";
      }
    }
  }
}

TEST(XetChunkCodec, EncodeChoosesTheSmallestSchemeAndPrefersSimplerOnTies) {
  const std::vector<std::pair<Bytes, CompressionScheme>> cases = {
      {splitmix64_bytes(65536, 6), CompressionScheme::None},       {text_like(65536, 7), CompressionScheme::Lz4},
      {u32_counters(131072), CompressionScheme::ByteGrouping4Lz4}, {Bytes{}, CompressionScheme::None},
      {Bytes(3, std::byte{1}), CompressionScheme::None},
  };
  for (const auto& [data, expected] : cases) {
    const Bytes chosen = encode_chunk(data);
    EXPECT_EQ(read_chunk_header(chosen).scheme, static_cast<std::uint8_t>(expected)) << data.size() << " bytes";
    EXPECT_EQ(decode_record(chosen), data);
  }
  // On any data: the chosen record is the smallest, and no simpler scheme is as small.
  for (const auto& data :
       {text_like(30000, 8), u32_counters(4096), linear_pattern(50001, 7, 13), Bytes(20, std::byte{0})}) {
    const std::size_t sizes[] = {encode_chunk(data, CompressionScheme::None).size(),
                                 encode_chunk(data, CompressionScheme::Lz4).size(),
                                 encode_chunk(data, CompressionScheme::ByteGrouping4Lz4).size()};
    const Bytes chosen = encode_chunk(data);
    const std::size_t smallest = *std::min_element(std::begin(sizes), std::end(sizes));
    EXPECT_EQ(chosen.size(), smallest);
    const auto scheme = read_chunk_header(chosen).scheme;
    for (std::size_t simpler = 0; simpler < scheme; ++simpler) EXPECT_GT(sizes[simpler], smallest);
  }
}

TEST(XetChunkCodec, EncodeRefusesOversizedChunks) {
  const Bytes too_big(kMaxUncompressedChunkSize + 1);
  EXPECT_THROW(encode_chunk(too_big), FetchError);
  EXPECT_THROW(encode_chunk(too_big, CompressionScheme::None), FetchError);
}

TEST(XetChunkCodec, HeaderLayout) {
  const Bytes header = header_bytes(0, 0x030201, 2, 0x060504);
  const Bytes expected = {std::byte{0}, std::byte{1}, std::byte{2}, std::byte{3},
                          std::byte{2}, std::byte{4}, std::byte{5}, std::byte{6}};
  EXPECT_EQ(header, expected);
}

TEST(XetChunkCodec, RefusesNewerVersions) {
  const Bytes record = concat(header_bytes(1, 4, 0, 4), Bytes(4));
  expect_refused(record, {"chunk 0", "version 1"});
}

TEST(XetChunkCodec, RefusesUnknownSchemes) {
  expect_refused(concat(header_bytes(0, 4, 3, 4), Bytes(4)), {"compression scheme 3"});
  expect_refused(concat(header_bytes(0, 4, 255, 4), Bytes(4)), {"compression scheme 255"});
}

TEST(XetChunkCodec, RefusesOversizedDeclarationsBeforeAllocating) {
  // 131073 and 0xFFFFFF (16 MB) declared uncompressed bytes, with the payload there.
  for (const std::uint32_t declared : {131073u, 16777215u}) {
    const Bytes record = concat(header_bytes(0, 16, 1, declared), Bytes(16));
    LargestAllocation watch;
    expect_refused(record, {std::to_string(declared), "131072"});
    EXPECT_LT(watch.bytes(), 4096u);
  }
  expect_refused(header_bytes(0, 262145, 1, 1000), {"262145", "262144"});
}

TEST(XetChunkCodec, RefusesPayloadsPastTheEnd) {
  expect_refused(concat(header_bytes(0, 100, 0, 100), Bytes(50)), {"100-byte payload", "50 bytes follow"});
  expect_refused(Bytes(5), {"only 5 bytes"});
  expect_refused({}, {"only 0 bytes"});
}

TEST(XetChunkCodec, RefusesDecodedLengthsThatDifferFromTheHeader) {
  expect_refused(concat(header_bytes(0, 10, 0, 12), Bytes(10)), {"decodes to 10 bytes", "declares 12"});

  const Bytes data = text_like(1000, 9);
  const Bytes lz4 = encode_chunk(data, CompressionScheme::Lz4);
  const auto payload = std::span(lz4).subspan(kChunkHeaderSize);
  const auto with_declared = [&](std::uint32_t declared, CompressionScheme scheme) {
    return concat(
        header_bytes(0, static_cast<std::uint32_t>(payload.size()), static_cast<std::uint8_t>(scheme), declared),
        payload);
  };
  expect_refused(with_declared(1001, CompressionScheme::Lz4), {"decodes to 1000 bytes", "declares 1001"});
  expect_refused(with_declared(999, CompressionScheme::Lz4), {"past the declared length"});
  expect_refused(with_declared(0, CompressionScheme::Lz4), {"past the declared length"});
  expect_refused(with_declared(1001, CompressionScheme::ByteGrouping4Lz4), {"decodes to 1000 bytes"});
}

TEST(XetChunkCodec, RefusesMalformedLz4Frames) {
  const Bytes data = text_like(5000, 10);
  const Bytes good = encode_chunk(data, CompressionScheme::Lz4);
  const auto record_with = [&](Bytes payload) {
    return concat(header_bytes(0, static_cast<std::uint32_t>(payload.size()), 1, 5000), payload);
  };
  Bytes payload(good.begin() + kChunkHeaderSize, good.end());

  Bytes bad_magic = payload;
  bad_magic[0] = std::byte{0x05};
  expect_refused(record_with(bad_magic), {"magic 0x184d2204"});

  expect_refused(record_with(Bytes(payload.begin(), payload.end() - 3)), {"ends inside"});

  Bytes trailing = payload;
  trailing.push_back(std::byte{0});
  expect_refused(record_with(trailing), {"1 bytes follow the end of the LZ4 frame"});

  Bytes bad_descriptor_checksum = payload;
  bad_descriptor_checksum[6] ^= std::byte{0xff};
  expect_refused(record_with(bad_descriptor_checksum), {"descriptor checksum"});

  Bytes reserved = payload;
  reserved[5] |= std::byte{0x01};
  expect_refused(record_with(reserved), {"reserved bits"});

  Bytes corrupt = payload;
  for (std::size_t i = 11; i < corrupt.size() - 4; i += 5) corrupt[i] = std::byte{0xff};
  expect_refused(record_with(corrupt), {"chunk 0"});

  // With block and content checksums, a flipped byte is caught by the checksum.
  const Bytes checked = lz4f_frame(data, LZ4F_max64KB, LZ4F_blockIndependent, true, true, false);
  Bytes flipped = checked;
  flipped[flipped.size() / 2] ^= std::byte{0x01};
  expect_refused(record_with(flipped), {"checksum"});
  EXPECT_EQ(decode_record(record_with(checked)), data);
}

TEST(XetChunkCodec, HostileFrameAllocatesNoMoreThanDeclared) {
  // A frame declaring 4 MiB blocks, then a stored block far larger than the 100 bytes the header declares.
  const Bytes data = splitmix64_bytes(200'000, 12);
  Bytes frame = lz4f_frame(data, LZ4F_max4MB, LZ4F_blockIndependent, false, false, false);
  const Bytes record = concat(header_bytes(0, static_cast<std::uint32_t>(frame.size()), 1, 100), frame);
  LargestAllocation watch;
  expect_refused(record, {"declared length"});
  EXPECT_LE(watch.bytes(), 4096u);
}

TEST(XetChunkCodec, DecodingAllocatesAtMostTheDeclaredSize) {
  for (const auto scheme : {CompressionScheme::None, CompressionScheme::Lz4, CompressionScheme::ByteGrouping4Lz4}) {
    const Bytes data = u32_counters(kMaxUncompressedChunkSize);
    const Bytes record = encode_chunk(data, scheme);
    LargestAllocation watch;
    Bytes out;
    decode_chunk(record, out);
    ChunkReader reader(record);
    EXPECT_TRUE(reader.next());
    EXPECT_EQ(watch.bytes(), kMaxUncompressedChunkSize)
        << "scheme " << static_cast<int>(scheme) << ": the watch sees the output buffer and nothing larger";
  }
}

// ---- Xorbs and the range reader ----------------------------------------------------------------------------

struct SampleXorb {
  std::vector<Bytes> chunks;
  EncodedXorb xorb;
};

SampleXorb sample_xorb() {
  SampleXorb sample;
  sample.chunks = {text_like(70000, 20),      splitmix64_bytes(131072, 21), u32_counters(40000), Bytes{},
                   Bytes(9000, std::byte{7}), splitmix64_bytes(8193, 22)};
  std::vector<std::span<const std::byte>> views(sample.chunks.begin(), sample.chunks.end());
  sample.xorb = encode_xorb(views);
  return sample;
}

TEST(XetXorb, LaysRecordsBackToBackWithOffsets) {
  const auto [chunks, xorb] = sample_xorb();
  ASSERT_EQ(xorb.record_offsets.size(), chunks.size() + 1);
  EXPECT_EQ(xorb.record_offsets.front(), 0u);
  EXPECT_EQ(xorb.record_offsets.back(), xorb.bytes.size());
  std::vector<MerkleLeaf> leaves;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const auto record = std::span(xorb.bytes).subspan(xorb.record_offsets[i]);
    EXPECT_EQ(read_chunk_header(record).record_size(), xorb.record_offsets[i + 1] - xorb.record_offsets[i]);
    leaves.emplace_back(chunk_hash(chunks[i]), chunks[i].size());
  }
  EXPECT_EQ(xorb.chunks, leaves);
  EXPECT_EQ(xorb.hash, xorb_hash(leaves));
  // The scheme follows the data: stored, LZ4, byte grouping.
  EXPECT_EQ(read_chunk_header(std::span(xorb.bytes).subspan(xorb.record_offsets[1])).scheme, 0);
  EXPECT_EQ(read_chunk_header(std::span(xorb.bytes).subspan(xorb.record_offsets[0])).scheme, 1);
  EXPECT_EQ(read_chunk_header(std::span(xorb.bytes).subspan(xorb.record_offsets[2])).scheme, 2);
}

TEST(XetXorb, ReaderDecodesEveryRangeOfWholeRecords) {
  const auto [chunks, xorb] = sample_xorb();
  for (std::size_t first = 0; first <= chunks.size(); ++first) {
    for (std::size_t end = first; end <= chunks.size(); ++end) {
      const auto range =
          std::span(xorb.bytes)
              .subspan(xorb.record_offsets[first], xorb.record_offsets[end] - xorb.record_offsets[first]);
      ChunkReader reader(range, first);
      for (std::size_t i = first; i < end; ++i) {
        const auto chunk = reader.next();
        ASSERT_TRUE(chunk);
        EXPECT_EQ(chunk->index, i);
        EXPECT_EQ(chunk->record_offset, xorb.record_offsets[i] - xorb.record_offsets[first]);
        EXPECT_TRUE(std::equal(chunk->bytes.begin(), chunk->bytes.end(), chunks[i].begin(), chunks[i].end()));
      }
      EXPECT_FALSE(reader.next());
      EXPECT_TRUE(reader.at_end());
      EXPECT_EQ(reader.chunks_read(), end - first);
    }
  }
}

TEST(XetXorb, ReaderNamesTheBadChunkAndItsOffset) {
  const auto [chunks, xorb] = sample_xorb();
  // Chunks 2..5 of the xorb, with chunk 4's header claiming a newer version.
  const std::size_t first = 2;
  Bytes range(xorb.bytes.begin() + static_cast<std::ptrdiff_t>(xorb.record_offsets[first]), xorb.bytes.end());
  const std::uint64_t bad_offset = xorb.record_offsets[4] - xorb.record_offsets[first];
  range[bad_offset] = std::byte{1};
  ChunkReader reader(range, first);
  ASSERT_TRUE(reader.next());
  ASSERT_TRUE(reader.next());
  try {
    reader.next();
    FAIL() << "accepted";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    EXPECT_THAT(e.what(), testing::HasSubstr("chunk 4 (record at byte " + std::to_string(bad_offset) + ")"));
  }
}

TEST(XetXorb, ReaderRefusesARangeEndingInsideARecord) {
  const auto [chunks, xorb] = sample_xorb();
  const auto cut = std::span(xorb.bytes).first(xorb.record_offsets[2] - 1);
  ChunkReader reader(cut, 0);
  ASSERT_TRUE(reader.next());
  EXPECT_THROW(reader.next(), FetchError);
  const auto header_only = std::span(xorb.bytes).first(xorb.record_offsets[1] + 3);
  ChunkReader short_header(header_only, 0);
  ASSERT_TRUE(short_header.next());
  try {
    short_header.next();
    FAIL() << "accepted";
  } catch (const FetchError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("only 3 bytes remain"));
  }
}

}  // namespace
}  // namespace fetchd::xet
