// xet_hash: the hex form, the merkle tree and every hash of the protocol notes (spec/xet.md), cross-checked
// against the b3sum tool.

#include "fetchd/xet/xet_hash.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fetchd/xet/chunker.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fetchd/xet/xet_test_data.h"

namespace fetchd::xet {
namespace {

// ---- Helpers -----------------------------------------------------------------------------------------------

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

}  // namespace
}  // namespace fetchd::xet
