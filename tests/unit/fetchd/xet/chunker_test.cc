// chunker and gear_table: content-defined chunking against the protocol notes' vectors (spec/xet.md) and the
// byte-by-byte rule, the streaming content hasher, and hashing a file on disk.

#include "fetchd/xet/chunker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/gear_table.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_chunk.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fetchd/xet/xet_test_data.h"

namespace fetchd::xet {
namespace {

// ---- Helpers -----------------------------------------------------------------------------------------------

std::vector<MerkleLeaf> leaves_of(std::span<const std::byte> data, const std::vector<std::uint64_t>& ends) {
  std::vector<MerkleLeaf> leaves;
  std::uint64_t start = 0;
  for (const auto end : ends) {
    leaves.emplace_back(chunk_hash(data.subspan(start, end - start)), end - start);
    start = end;
  }
  return leaves;
}

// The chunking rule exactly as the protocol notes state it: every byte hashed, every position checked.
std::vector<std::uint64_t> reference_boundaries(std::span<const std::byte> data) {
  std::vector<std::uint64_t> ends;
  std::uint64_t hash = 0;
  std::uint64_t start = 0;
  for (std::uint64_t i = 0; i < data.size(); ++i) {
    hash = (hash << 1) + kGearTable[std::to_integer<std::uint8_t>(data[i])];
    const std::uint64_t size = i + 1 - start;
    if (size >= kMinChunkSize && (size >= kMaxChunkSize || (hash & kChunkCutMask) == 0)) {
      ends.push_back(i + 1);
      start = i + 1;
      hash = 0;
    }
  }
  if (start < data.size()) ends.push_back(data.size());
  return ends;
}

// ---- Chunking ----------------------------------------------------------------------------------------------

TEST(XetChunking, SplitMix64Vector) {
  const Bytes data = splitmix64_bytes(1000000, 0);
  ASSERT_EQ(std::to_integer<int>(data[0]), 175);
  ASSERT_EQ(std::to_integer<int>(data[127]), 132);
  ASSERT_EQ(std::to_integer<int>(data[111111]), 118);
  const std::vector<std::uint64_t> expected = {84493,  134421, 144853, 243318, 271793, 336457, 467529,
                                               494581, 582000, 596735, 616815, 653164, 678202, 724510,
                                               815591, 827760, 958832, 991092, 1000000};
  const auto ends = chunk_boundaries(data);
  EXPECT_EQ(ends, expected);
  EXPECT_EQ(reference_boundaries(data), expected);
  const auto leaves = leaves_of(data, ends);
  EXPECT_EQ(to_hex(leaves.front().first), "6eca1e7dadaf08cca5d82d318c800f07c2ddcec115a7e8627e5edd9605b94b8d");
  EXPECT_EQ(to_hex(leaves.back().first), "03e5b5f5a088269ec4b329f1e04debfac4cb54b9c0facf038f7e8e0f054be7e2");
}

struct PatternVector {
  unsigned multiplier;
  unsigned offset;
  std::size_t size;
  std::size_t chunks;
  std::string xorb_hash;
  std::string file_hash;
};

TEST(XetChunking, DataPatternVectors) {
  const std::vector<PatternVector> vectors = {
      {7, 13, 200000, 2, "f0755d96ee199d4f01e83da9fe2c38353de7fd38fb79a320a7d50be510026f74",
       "d88d9e0b760f32c90b7c6592b4cb85251c01bb797371e3c637087b96ac578723"},
      {13, 37, 1000000, 8, "7be289d851485c40dcde52dbcf37a7823a5ef0bfcdf1ca1c5a32ad9594c71571",
       "041a50f3639f4a080a89237025d643e2a3e22935ca5d7dbc1a38f5c1e859f859"},
  };
  testing_support::TempDir dir;
  for (const auto& vector : vectors) {
    SCOPED_TRACE("data[i] = (i*" + std::to_string(vector.multiplier) + "+" + std::to_string(vector.offset) + ")");
    const Bytes data = linear_pattern(vector.size, vector.multiplier, vector.offset);
    const auto ends = chunk_boundaries(data);
    EXPECT_EQ(ends.size(), vector.chunks);
    EXPECT_EQ(ends, reference_boundaries(data));
    const auto leaves = leaves_of(data, ends);
    EXPECT_EQ(to_hex(xorb_hash(leaves)), vector.xorb_hash);
    EXPECT_EQ(to_hex(file_hash(leaves)), vector.file_hash);

    // The same through the streaming hasher, a file on disk, and a xorb built from the chunks.
    ContentHasher stream;
    stream.update(data);
    EXPECT_EQ(to_hex(stream.finish()), vector.file_hash);
    EXPECT_EQ(stream.chunk_count(), vector.chunks);
    const auto path = dir / ("pattern-" + std::to_string(vector.multiplier));
    testing_support::write_file(path, data);
    EXPECT_EQ(to_hex(hash_file_by_chunks(path)), vector.file_hash);

    std::vector<std::span<const std::byte>> chunks;
    std::uint64_t start = 0;
    for (const auto end : ends) {
      chunks.push_back(std::span(data).subspan(start, end - start));
      start = end;
    }
    EXPECT_EQ(to_hex(encode_xorb(chunks).hash), vector.xorb_hash);
  }
}

TEST(XetChunking, SkippingEqualsByteByByteRule) {
  // Data kinds that cut at the minimum, in between, and at the maximum size.
  std::vector<Bytes> inputs;
  inputs.push_back(splitmix64_bytes(3'000'000, 11));
  inputs.push_back(Bytes(700'000, std::byte{0}));
  inputs.push_back(Bytes(500'000, std::byte{0xff}));
  inputs.push_back(linear_pattern(900'000, 7, 13));
  inputs.push_back(text_like(600'000, 5));
  inputs.push_back(u32_counters(800'000));
  for (const std::size_t size : {0, 1, 8127, 8128, 8191, 8192, 8193, 131071, 131072, 131073, 139264}) {
    inputs.push_back(splitmix64_bytes(size, size));
    inputs.push_back(Bytes(size, std::byte{0}));
  }
  for (const auto& data : inputs) {
    const auto ends = chunk_boundaries(data);
    ASSERT_EQ(ends, reference_boundaries(data)) << data.size() << " bytes";
    std::uint64_t start = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
      const std::uint64_t size = ends[i] - start;
      EXPECT_LE(size, kMaxChunkSize);
      if (i + 1 < ends.size()) {
        EXPECT_GE(size, kMinChunkSize);
      }
      start = ends[i];
    }
  }
}

// 64 bytes whose gear hash, started from 0, has the cut bits clear, and whose first byte still sets the top
// bit of that hash: a chunk ending with them is cut at exactly the minimum size only if the skipped prefix
// ends exactly 64 bytes before the first check.
Bytes minimum_size_cut_window() {
  std::mt19937_64 random(2024);
  Bytes window(64);
  for (;;) {
    for (auto& b : window) b = static_cast<std::byte>(random());
    if (kGearTable[std::to_integer<std::uint8_t>(window[0])] % 2 == 0) continue;
    std::uint64_t hash = 0;
    for (const auto b : window) hash = (hash << 1) + kGearTable[std::to_integer<std::uint8_t>(b)];
    if ((hash & kChunkCutMask) == 0) return window;
  }
}

TEST(XetChunking, CutsAtExactlyTheMinimumSize) {
  const Bytes window = minimum_size_cut_window();
  Bytes data = splitmix64_bytes(kMinChunkSize - window.size(), 1);
  data.insert(data.end(), window.begin(), window.end());
  const Bytes tail = splitmix64_bytes(300'000, 2);
  data.insert(data.end(), tail.begin(), tail.end());
  ASSERT_EQ(reference_boundaries(data).front(), kMinChunkSize);
  EXPECT_EQ(chunk_boundaries(data), reference_boundaries(data));
  // Fed in pieces that end inside the skipped prefix and inside the window.
  for (const std::size_t split : {std::size_t{1}, std::size_t{8127}, std::size_t{8128}, std::size_t{8129},
                                  std::size_t{8150}, std::size_t{8191}, std::size_t{8192}}) {
    Chunker chunker;
    std::vector<std::uint64_t> ends;
    chunker.update(std::span(data).first(split), ends);
    chunker.update(std::span(data).subspan(split), ends);
    if (const auto last = chunker.finish()) ends.push_back(*last);
    EXPECT_EQ(ends, reference_boundaries(data)) << "split at " << split;
  }
}

TEST(XetChunking, StreamingEqualsOneShotForRandomSplits) {
  const Bytes data = splitmix64_bytes(2'500'000, 99);
  const auto expected = chunk_boundaries(data);
  const XetHash expected_file = file_hash(leaves_of(data, expected));
  std::mt19937_64 random(1234);
  for (int round = 0; round < 40; ++round) {
    Chunker chunker;
    ContentHasher hasher;
    std::vector<std::uint64_t> ends;
    std::size_t at = 0;
    while (at < data.size()) {
      // Pieces from empty to large, often tiny, so every phase of the chunker meets a piece boundary.
      const std::size_t kinds[] = {0, 1, 7, 63, 64, 65, 4096, 8127, 8192, 70000, 200000};
      std::size_t piece = round % 3 == 0 ? random() % 300000 : kinds[random() % std::size(kinds)];
      piece = std::min(piece, data.size() - at);
      const auto bytes = std::span(data).subspan(at, piece);
      chunker.update(bytes, ends);
      hasher.update(bytes);
      at += piece;
    }
    if (const auto last = chunker.finish()) ends.push_back(*last);
    ASSERT_EQ(ends, expected) << "round " << round;
    ASSERT_EQ(hasher.finish(), expected_file) << "round " << round;
    EXPECT_EQ(hasher.size(), data.size());
    EXPECT_EQ(hasher.chunk_count(), expected.size());
  }
}

TEST(XetChunking, NextCutReportsBytesOfTheCurrentChunk) {
  const Bytes data = splitmix64_bytes(400'000, 0);
  const auto expected = chunk_boundaries(data);
  Chunker chunker;
  std::uint64_t start = 0;
  for (const auto end : expected) {
    const auto rest = std::span(data).subspan(start);
    const auto cut = chunker.next_cut(rest);
    if (end == data.size() && !cut) {
      EXPECT_EQ(chunker.finish(), end);
      break;
    }
    ASSERT_TRUE(cut);
    EXPECT_EQ(start + *cut, end);
    EXPECT_EQ(chunker.position(), end);
    EXPECT_EQ(chunker.current_chunk_size(), 0u);
    start = end;
  }
}

TEST(XetChunking, EmptyAndTinyStreams) {
  EXPECT_TRUE(chunk_boundaries({}).empty());
  Chunker chunker;
  EXPECT_FALSE(chunker.finish());
  const Bytes small = linear_pattern(100, 3, 1);
  EXPECT_EQ(chunk_boundaries(small), std::vector<std::uint64_t>{100});
  ContentHasher hasher;
  hasher.update(small);
  EXPECT_EQ(hasher.finish(), file_hash(std::vector<MerkleLeaf>{{chunk_hash(small), 100}}));
}

TEST(XetChunking, HashFileByChunksMatchesInMemory) {
  testing_support::TempDir dir;
  const Bytes data = splitmix64_bytes(9'000'123, 42);  // more than two of its read blocks
  testing_support::write_file(dir / "model.bin", data);
  EXPECT_EQ(hash_file_by_chunks(dir / "model.bin"), file_hash(leaves_of(data, chunk_boundaries(data))));
  testing_support::write_file(dir / "empty", std::string_view());
  EXPECT_EQ(hash_file_by_chunks(dir / "empty"), XetHash{});
}

TEST(XetChunking, HashFileByChunksNamesAMissingFile) {
  testing_support::TempDir dir;
  try {
    hash_file_by_chunks(dir / "absent.safetensors");
    FAIL() << "no error";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_THAT(e.what(), testing::HasSubstr("absent.safetensors"));
  }
}

}  // namespace
}  // namespace fetchd::xet
