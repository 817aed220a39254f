#pragma once

// The Xet protocol's hashes: chunk hashes, the merkle tree that turns chunk hashes into xorb and file
// hashes, and the range (verification) hash. All are 32-byte keyed BLAKE3 hashes; see docs/xet spec.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fetchd::xet {

using XetHash = std::array<std::uint8_t, 32>;

// A merkle leaf (or node): a hash and the number of content bytes under it.
using MerkleLeaf = std::pair<XetHash, std::uint64_t>;

// BLAKE3 keys, raw bytes, in the order the protocol lists them.
inline constexpr XetHash kDataKey = {0x66, 0x97, 0xf5, 0x77, 0x5b, 0x95, 0x50, 0xde, 0x31, 0x35, 0xcb,
                                     0xac, 0xa5, 0x97, 0x18, 0x1c, 0x9d, 0xe4, 0x21, 0x10, 0x9b, 0xeb,
                                     0x2b, 0x58, 0xb4, 0xd0, 0xb0, 0x4b, 0x93, 0xad, 0xf2, 0x29};
inline constexpr XetHash kInternalNodeKey = {0x01, 0x7e, 0xc5, 0xc7, 0xa5, 0x47, 0x29, 0x96, 0xfd, 0x94, 0x66,
                                             0x66, 0xb4, 0x8a, 0x02, 0xe6, 0x5d, 0xdd, 0x53, 0x6f, 0x37, 0xc7,
                                             0x6d, 0xd2, 0xf8, 0x63, 0x52, 0xe6, 0x4a, 0x53, 0x71, 0x3f};
inline constexpr XetHash kVerificationKey = {0x7f, 0x18, 0x57, 0xd6, 0xce, 0x56, 0xed, 0x66, 0x12, 0x7f, 0xf9,
                                             0x13, 0xe7, 0xa5, 0xc3, 0xf3, 0xa4, 0xcd, 0x26, 0xd5, 0xb5, 0xdb,
                                             0x49, 0xe6, 0x41, 0x24, 0x98, 0x7f, 0x28, 0xfb, 0x94, 0xc3};
inline constexpr XetHash kZeroKey = {};

// The Xet hex form: four little-endian u64 words, each printed as %016x, so the bytes of every 8-byte
// group appear reversed. It is the only form the protocol uses (URLs, JSON, headers, merkle node text).
std::string to_hex(const XetHash& hash);
// Parses the Xet hex form; nullopt unless `hex` is exactly 64 hex digits (either case).
std::optional<XetHash> parse_hex(std::string_view hex);

// keyed BLAKE3 of `bytes`.
XetHash keyed_hash(const XetHash& key, std::span<const std::byte> bytes);

// The hash of one chunk: keyed BLAKE3 (kDataKey) of its uncompressed bytes.
XetHash chunk_hash(std::span<const std::byte> bytes);

// One merkle node over `children`: keyed BLAKE3 (kInternalNodeKey) of the lines "{hex} : {size}\n".
XetHash internal_node_hash(std::span<const MerkleLeaf> children);

// How many of `nodes` (from the front) form the next merkle group: all when 2 or fewer remain, else the first
// k in 2..min(9, n)-1 whose node hash has u64_le(hash[24..32]) % 4 == 0 ends the group (k+1 nodes), else
// min(9, n).
std::size_t next_merkle_group_size(std::span<const MerkleLeaf> nodes);

// The root of the Xet merkle tree over `leaves`: all zeros for none, the leaf's own hash for one.
XetHash merkle_root(std::span<const MerkleLeaf> leaves);
// The xorb hash: the merkle root over the xorb's chunks.
XetHash xorb_hash(std::span<const MerkleLeaf> leaves);
// The file hash: keyed BLAKE3 (all-zero key) of the raw 32 bytes of the merkle root over the file's chunks;
// all zeros for an empty file.
XetHash file_hash(std::span<const MerkleLeaf> leaves);
// The range (verification) hash: keyed BLAKE3 (kVerificationKey) of the raw chunk hashes, concatenated.
XetHash range_hash(std::span<const XetHash> chunk_hashes);

// The merkle root computed as leaves arrive, holding at most a few nodes per tree level (never the whole
// leaf list), so a file of any size is hashed in constant memory. Equal to merkle_root() over the same leaves.
class MerkleBuilder {
 public:
  void add(const XetHash& hash, std::uint64_t size);
  void add(const MerkleLeaf& leaf) { add(leaf.first, leaf.second); }

  std::uint64_t leaf_count() const { return leaf_count_; }
  std::uint64_t total_size() const { return total_size_; }

  // The root over every leaf added so far. The builder is unchanged and can take more leaves.
  XetHash root() const;

 private:
  struct Level {
    std::vector<MerkleLeaf> pending;  // nodes not yet grouped into a parent; at most 9
    bool emitted_parent = false;      // some group of this level already became a parent node
  };
  // Moves the groups of `level` that no later node can change into the level above.
  void settle(std::size_t level);

  std::vector<Level> levels_;
  std::uint64_t leaf_count_ = 0;
  std::uint64_t total_size_ = 0;
};

// A file's Xet hash from its chunk hashes and sizes, in file order, as they are produced.
class FileHasher {
 public:
  void add_chunk(const XetHash& chunk, std::uint64_t size) { tree_.add(chunk, size); }
  std::uint64_t chunk_count() const { return tree_.leaf_count(); }
  std::uint64_t file_size() const { return tree_.total_size(); }
  XetHash file_hash() const;

 private:
  MerkleBuilder tree_;
};

}  // namespace fetchd::xet
