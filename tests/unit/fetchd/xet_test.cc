// The Xet core: every test vector of the protocol notes (spec/xet.md), cross-checks against the b3sum tool
// and liblz4's own frame code, and the chunk codec's refusals of malformed records.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lz4frame.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/splitmix64.h"
#include "fetchd/client/fetch_error.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/gear_table.h"
#include "fetchd/xet/lz4_frame.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_chunk.h"
#include "tests/support/temp_dir.h"

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

using Bytes = std::vector<std::byte>;

XetHash hash_of(std::string_view xet_hex) {
  const auto hash = parse_hex(xet_hex);
  EXPECT_TRUE(hash.has_value()) << xet_hex;
  return hash.value_or(XetHash{});
}

// Plain hex of the raw bytes in order, as b3sum prints a hash.
std::string raw_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const auto b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0x0f];
  }
  return hex;
}

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

Bytes linear_pattern(std::size_t size, unsigned multiplier, unsigned offset) {
  Bytes data(size);
  for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<std::byte>((i * multiplier + offset) & 0xff);
  return data;
}

// SplitMix64 output, each u64 written little-endian (the protocol notes' chunking vector).
Bytes splitmix64_bytes(std::size_t size, std::uint64_t seed) {
  Bytes data(size);
  base::SplitMix64(seed).fill(data);
  return data;
}

// Bytes that LZ4 shrinks somewhat but not trivially: words from a small vocabulary with random spacing.
Bytes text_like(std::size_t size, std::uint64_t seed) {
  static constexpr std::string_view kWords[] = {"tensor ", "weight ",  "layer.", "attention ", "bias\n",
                                                "0.0125 ", "-3.5e-2 ", "model ", "norm ",      "q_proj "};
  std::mt19937_64 random(seed);
  std::string text;
  while (text.size() < size) text += kWords[random() % std::size(kWords)];
  text.resize(size);
  const auto view = as_bytes(text);
  return Bytes(view.begin(), view.end());
}

// Little-endian u32 counters: byte grouping turns them into runs LZ4 crushes, plain LZ4 barely helps.
Bytes u32_counters(std::size_t size) {
  Bytes data(size);
  for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<std::byte>((i / 4) >> (8 * (i % 4)));
  return data;
}

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

std::string b3sum_keyed(const XetHash& key, std::span<const std::byte> input) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "key", std::as_bytes(std::span(key)));
  testing_support::write_file(dir / "input", input);
  std::string output;
  const int status = testing_support::run_command(
      "b3sum --keyed --no-names '" + (dir / "input").string() + "' < '" + (dir / "key").string() + "'", output);
  EXPECT_EQ(status, 0) << "b3sum (Debian package b3sum) failed: " << output;
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  return output;
}

std::string node_text(std::span<const MerkleLeaf> children) {
  std::string text;
  for (const auto& [hash, size] : children) text += to_hex(hash) + " : " + std::to_string(size) + "\n";
  return text;
}

Bytes decode_record(std::span<const std::byte> record) {
  Bytes out;
  EXPECT_EQ(decode_chunk(record, out), record.size());
  return out;
}

Bytes header_bytes(std::uint8_t version, std::uint32_t payload, std::uint8_t scheme, std::uint32_t uncompressed) {
  Bytes header(kChunkHeaderSize);
  ChunkHeader fields;
  fields.version = version;
  fields.payload_size = payload;
  fields.scheme = scheme;
  fields.uncompressed_size = uncompressed;
  write_chunk_header(fields, std::span(header).first<kChunkHeaderSize>());
  return header;
}

Bytes concat(std::span<const std::byte> a, std::span<const std::byte> b) {
  Bytes joined(a.begin(), a.end());
  joined.insert(joined.end(), b.begin(), b.end());
  return joined;
}

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

// An LZ4 frame written by liblz4's streaming API with exactly these settings.
Bytes lz4f_frame(std::span<const std::byte> data, LZ4F_blockSizeID_t block_size, LZ4F_blockMode_t mode,
                 bool block_checksums, bool content_checksum, bool content_size) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.blockSizeID = block_size;
  prefs.frameInfo.blockMode = mode;
  prefs.frameInfo.blockChecksumFlag = block_checksums ? LZ4F_blockChecksumEnabled : LZ4F_noBlockChecksum;
  prefs.frameInfo.contentChecksumFlag = content_checksum ? LZ4F_contentChecksumEnabled : LZ4F_noContentChecksum;
  prefs.frameInfo.contentSize = content_size ? data.size() : 0;
  LZ4F_cctx* context = nullptr;
  EXPECT_FALSE(LZ4F_isError(LZ4F_createCompressionContext(&context, LZ4F_VERSION)));
  Bytes frame(LZ4F_compressBound(data.size(), &prefs) + LZ4F_HEADER_SIZE_MAX + 64);
  std::size_t at = LZ4F_compressBegin(context, frame.data(), frame.size(), &prefs);
  at += LZ4F_compressUpdate(context, frame.data() + at, frame.size() - at, data.data(), data.size(), nullptr);
  at += LZ4F_compressEnd(context, frame.data() + at, frame.size() - at, nullptr);
  LZ4F_freeCompressionContext(context);
  frame.resize(at);
  return frame;
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

// ---- Hex form ----------------------------------------------------------------------------------------------

TEST(XetHex, PrintsLittleEndianWords) {
  XetHash counting;
  for (std::size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(to_hex(counting), "07060504030201000f0e0d0c0b0a090817161514131211101f1e1d1c1b1a1918");
  EXPECT_EQ(parse_hex(to_hex(counting)), counting);
}

TEST(XetHex, RoundTripVector) {
  const XetHash raw = {22,  175, 58, 132, 4,   75,  131, 214, 190, 153, 138, 66,  226, 3,   153, 242,
                       204, 86,  80, 234, 249, 153, 80,  99,  159, 80,  65,  138, 236, 231, 149, 78};
  const std::string hex = "d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f";
  EXPECT_EQ(to_hex(raw), hex);
  EXPECT_EQ(parse_hex(hex), raw);
}

TEST(XetHex, ParseAcceptsUpperCase) {
  EXPECT_EQ(parse_hex("D6834B04843AAF16F29903E2428A99BE635099F9EA5056CC4E95E7EC8A41509F"),
            parse_hex("d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f"));
}

TEST(XetHex, ParseRefusesWrongLengthAndNonHex) {
  const std::string good = "d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f";
  EXPECT_FALSE(parse_hex(""));
  EXPECT_FALSE(parse_hex(good.substr(0, 63)));
  EXPECT_FALSE(parse_hex(good + "0"));
  EXPECT_FALSE(parse_hex(good.substr(0, 62)));
  for (const char bad : {'g', 'G', ' ', '-', 'x', '\0', ':'}) {
    for (const std::size_t at : {std::size_t{0}, std::size_t{31}, std::size_t{63}}) {
      std::string text = good;
      text[at] = bad;
      EXPECT_FALSE(parse_hex(text)) << "'" << bad << "' at " << at;
    }
  }
}

// ---- Hashes and the merkle tree ---------------------------------------------------------------------------

std::vector<MerkleLeaf> three_leaves() {
  return {{hash_of("cfc5d07f6f03c29bbf424132963fe08d19a37d5757aaf520bf08119f05cd56d6"), 100},
          {hash_of("c3e67584b5c4fc2a89837ec39e40f2c8a6bb0b2987ac94cd4b31e5fbdd210a72"), 200},
          {hash_of("0d2beb91b9196929a5ddec9f6e306924ddf4a24268e3e59fd8464738d525af37"), 300}};
}

TEST(XetMerkle, ThreeLeavesVector) {
  const auto leaves = three_leaves();
  EXPECT_EQ(to_hex(merkle_root(leaves)), "71ec1275fca074724e2dd666921b3277c7cee603e4d025bcab2d4050015be2bc");
  EXPECT_EQ(to_hex(xorb_hash(leaves)), "71ec1275fca074724e2dd666921b3277c7cee603e4d025bcab2d4050015be2bc");
  EXPECT_EQ(to_hex(file_hash(leaves)), "54e55dccc6653c612bdb5576c5d3cb34bb31bc4e100248abccf4c908b3ef7715");
}

TEST(XetMerkle, OneLeafVector) {
  const std::vector<MerkleLeaf> leaf = {{XetHash{}, 0}};
  EXPECT_EQ(merkle_root(leaf), XetHash{}) << "one chunk: the root is the chunk's own hash";
  EXPECT_EQ(to_hex(file_hash(leaf)), "638a6bc391964a85939d48f008e8bdbae6a7975e7ca2d87a3ce2492f4e4d8a4c");

  const auto leaves = three_leaves();
  EXPECT_EQ(merkle_root(std::span(leaves).first(1)), leaves[0].first);
}

TEST(XetMerkle, EmptyIsAllZeros) {
  EXPECT_EQ(merkle_root({}), XetHash{});
  EXPECT_EQ(file_hash({}), XetHash{});
  EXPECT_EQ(FileHasher().file_hash(), XetHash{});
  EXPECT_EQ(MerkleBuilder().root(), XetHash{});
  ContentHasher empty;
  EXPECT_EQ(empty.finish(), XetHash{});
}

TEST(XetMerkle, RangeHashVector) {
  const std::vector<XetHash> chunks = {hash_of("118bbac5c38b2bca9c2b7ae8307786de066696b91b2b5ccb7dbbd4608c966882"),
                                       hash_of("7884d4de4bcc904767362a91e97eb6c2b6bc5f3a61b640d0cad8bb1129ff0827")};
  EXPECT_EQ(to_hex(range_hash(chunks)), "82d580dd3896919ef870af78b2c7bd21e67e79777922bbc8cef1fc21630c308c");
}

TEST(XetMerkle, GroupCuttingRule) {
  // Node hashes whose last word is (or is not) a multiple of 4 end (or do not end) a group.
  const auto node = [](bool ends_group) {
    XetHash hash{};
    hash[24] = ends_group ? 4 : 5;
    return MerkleLeaf{hash, 1};
  };
  std::vector<MerkleLeaf> nodes(20, node(false));
  EXPECT_EQ(next_merkle_group_size(std::span(nodes).first(0)), 0u);
  EXPECT_EQ(next_merkle_group_size(std::span(nodes).first(1)), 1u);
  EXPECT_EQ(next_merkle_group_size(std::span(nodes).first(2)), 2u);
  EXPECT_EQ(next_merkle_group_size(std::span(nodes).first(5)), 5u);
  EXPECT_EQ(next_merkle_group_size(nodes), 9u);
  nodes[0] = node(true);
  nodes[1] = node(true);
  EXPECT_EQ(next_merkle_group_size(nodes), 9u) << "indexes 0 and 1 never end a group";
  nodes[6] = node(true);
  EXPECT_EQ(next_merkle_group_size(nodes), 7u);
  nodes[2] = node(true);
  EXPECT_EQ(next_merkle_group_size(nodes), 3u);
  nodes[2] = node(false);
  nodes[6] = node(false);
  nodes[9] = node(true);
  EXPECT_EQ(next_merkle_group_size(nodes), 9u) << "index 9 is past the largest group";
  nodes[8] = node(true);
  EXPECT_EQ(next_merkle_group_size(nodes), 9u);
}

TEST(XetMerkle, IncrementalBuilderEqualsWholeTree) {
  std::mt19937_64 random(7);
  const auto random_leaves = [&](std::size_t count, int end_group_percent) {
    std::vector<MerkleLeaf> leaves(count);
    for (auto& [hash, size] : leaves) {
      for (auto& b : hash) b = static_cast<std::uint8_t>(random());
      // Control how often a node ends a group, to reach both short and nine-wide groups.
      const bool ends = static_cast<int>(random() % 100) < end_group_percent;
      hash[24] = static_cast<std::uint8_t>((hash[24] & ~3u) | (ends ? 0u : 1u + random() % 3));
      size = random() % 200000;
    }
    return leaves;
  };
  std::vector<std::size_t> counts;
  for (std::size_t n = 0; n <= 120; ++n) counts.push_back(n);
  for (const std::size_t n : {729u, 730u, 1000u, 6561u, 7000u}) counts.push_back(n);
  for (const int percent : {0, 25, 100}) {
    for (const std::size_t count : counts) {
      const auto leaves = random_leaves(count, percent);
      MerkleBuilder builder;
      FileHasher file;
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        builder.add(leaves[i]);
        file.add_chunk(leaves[i].first, leaves[i].second);
        if (i % 97 == 0) {  // root() in the middle changes nothing
          ASSERT_EQ(builder.root(), merkle_root(std::span(leaves).first(i + 1))) << count << " leaves, at " << i;
        }
      }
      ASSERT_EQ(builder.root(), merkle_root(leaves)) << count << " leaves, " << percent << "% group ends";
      ASSERT_EQ(file.file_hash(), file_hash(leaves)) << count << " leaves";
      EXPECT_EQ(builder.leaf_count(), count);
    }
  }
}

TEST(XetMerkle, HashesMatchB3sum) {
  const Bytes chunk = splitmix64_bytes(70001, 3);
  EXPECT_EQ(raw_hex(chunk_hash(chunk)), b3sum_keyed(kDataKey, chunk));

  const auto leaves = three_leaves();
  const std::string text = node_text(leaves);
  EXPECT_EQ(raw_hex(internal_node_hash(leaves)), b3sum_keyed(kInternalNodeKey, as_bytes(text)));
  EXPECT_EQ(raw_hex(merkle_root(leaves)), b3sum_keyed(kInternalNodeKey, as_bytes(text)));

  const XetHash root = merkle_root(leaves);
  EXPECT_EQ(raw_hex(file_hash(leaves)), b3sum_keyed(kZeroKey, std::as_bytes(std::span(root))));

  const std::vector<XetHash> range = {leaves[0].first, leaves[1].first, leaves[2].first};
  Bytes concatenated;
  for (const auto& hash : range) {
    const auto raw = std::as_bytes(std::span(hash));
    concatenated.insert(concatenated.end(), raw.begin(), raw.end());
  }
  EXPECT_EQ(raw_hex(range_hash(range)), b3sum_keyed(kVerificationKey, concatenated));
}

TEST(XetMerkle, NodeTextHasLargeSizesInDecimal) {
  const std::vector<MerkleLeaf> children = {{three_leaves()[0].first, 0},
                                            {three_leaves()[1].first, 18446744073709551615ull}};
  const std::string text = node_text(children);
  EXPECT_THAT(text, testing::HasSubstr(" : 18446744073709551615\n"));
  EXPECT_EQ(internal_node_hash(children), keyed_hash(kInternalNodeKey, as_bytes(text)));
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

TEST(XetChunkCodec, DecodesEveryLz4FrameVariant) {
  const Bytes data = text_like(131072, 13);
  for (const auto block_size : {LZ4F_max64KB, LZ4F_max256KB, LZ4F_max1MB, LZ4F_max4MB}) {
    for (const auto mode : {LZ4F_blockLinked, LZ4F_blockIndependent}) {
      for (const bool checksums : {false, true}) {
        for (const bool content_size : {false, true}) {
          SCOPED_TRACE(testing::Message() << "block size id " << block_size << ", linked " << (mode == LZ4F_blockLinked)
                                          << ", checksums " << checksums << ", content size " << content_size);
          const Bytes frame = lz4f_frame(data, block_size, mode, checksums, checksums, content_size);
          Bytes out(data.size());
          EXPECT_EQ(lz4::decode_frame(frame, out), data.size());
          EXPECT_EQ(out, data);
          // Through the record decoder too, under both compressed schemes' framing.
          EXPECT_EQ(decode_record(concat(header_bytes(0, static_cast<std::uint32_t>(frame.size()), 1, 131072), frame)),
                    data);
        }
      }
    }
  }
  // A frame declaring a content size other than the header's is refused.
  const Bytes sized = lz4f_frame(data, LZ4F_max64KB, LZ4F_blockIndependent, false, false, true);
  Bytes small(data.size() - 1);
  EXPECT_THROW(lz4::decode_frame(sized, small), lz4::FrameError);
}

TEST(XetChunkCodec, Xxh32KnownValues) {
  EXPECT_EQ(lz4::xxh32({}, 0), 0x02CC5D05u);
  EXPECT_EQ(lz4::xxh32(as_bytes("a"), 0), 0x550D7456u);
  EXPECT_EQ(lz4::xxh32(as_bytes("abc"), 0), 0x32D153FFu);
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
