#include "fetchd/xet/xet_hash.h"

#include <blake3.h>

#include <charconv>
#include <cstring>

namespace fetchd::xet {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Writes the 64-character Xet hex form of `hash` at `out`.
void write_hex(const XetHash& hash, char* out) {
  for (std::size_t word = 0; word < 4; ++word) {
    for (std::size_t i = 0; i < 8; ++i) {
      const std::uint8_t byte = hash[word * 8 + (7 - i)];  // most significant byte of the LE word first
      *out++ = kHexDigits[byte >> 4];
      *out++ = kHexDigits[byte & 0x0f];
    }
  }
}

class KeyedBlake3 {
 public:
  explicit KeyedBlake3(const XetHash& key) { blake3_hasher_init_keyed(&state_, key.data()); }
  void update(const void* data, std::size_t size) { blake3_hasher_update(&state_, data, size); }
  XetHash finish() {
    XetHash out;
    blake3_hasher_finalize(&state_, out.data(), out.size());
    return out;
  }

 private:
  blake3_hasher state_;
};

bool ends_merkle_group(const XetHash& hash) {
  std::uint64_t last_word = 0;
  for (std::size_t i = 0; i < 8; ++i) last_word |= std::uint64_t{hash[24 + i]} << (8 * i);
  return last_word % 4 == 0;
}

constexpr std::size_t kMaxMerkleGroup = 9;

XetHash file_hash_from_root(const XetHash& root, bool empty) {
  if (empty) return XetHash{};
  return keyed_hash(kZeroKey, std::as_bytes(std::span(root)));
}

}  // namespace

std::string to_hex(const XetHash& hash) {
  std::string hex(64, '\0');
  write_hex(hash, hex.data());
  return hex;
}

std::optional<XetHash> parse_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  XetHash hash{};
  for (std::size_t word = 0; word < 4; ++word) {
    for (std::size_t i = 0; i < 8; ++i) {
      const int high = hex_value(hex[word * 16 + i * 2]);
      const int low = hex_value(hex[word * 16 + i * 2 + 1]);
      if (high < 0 || low < 0) return std::nullopt;
      hash[word * 8 + (7 - i)] = static_cast<std::uint8_t>(high << 4 | low);
    }
  }
  return hash;
}

XetHash keyed_hash(const XetHash& key, std::span<const std::byte> bytes) {
  KeyedBlake3 hasher(key);
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish();
}

XetHash chunk_hash(std::span<const std::byte> bytes) {
  return keyed_hash(kDataKey, bytes);
}

XetHash internal_node_hash(std::span<const MerkleLeaf> children) {
  KeyedBlake3 hasher(kInternalNodeKey);
  // "{64 hex} : {decimal size}\n": at most 64 + 3 + 20 + 1 characters.
  std::array<char, 96> line{};
  for (const auto& [hash, size] : children) {
    write_hex(hash, line.data());
    std::memcpy(line.data() + 64, " : ", 3);
    char* end = std::to_chars(line.data() + 67, line.data() + line.size() - 1, size).ptr;
    *end++ = '\n';
    hasher.update(line.data(), static_cast<std::size_t>(end - line.data()));
  }
  return hasher.finish();
}

namespace {
// The node a group of nodes becomes: its hash over theirs, and the bytes under all of them.
MerkleLeaf merkle_parent(std::span<const MerkleLeaf> group) {
  std::uint64_t size = 0;
  for (const auto& node : group) size += node.second;
  return {internal_node_hash(group), size};
}
}  // namespace

std::size_t next_merkle_group_size(std::span<const MerkleLeaf> nodes) {
  if (nodes.size() <= 2) return nodes.size();
  const std::size_t limit = std::min(kMaxMerkleGroup, nodes.size());
  for (std::size_t k = 2; k < limit; ++k) {
    if (ends_merkle_group(nodes[k].first)) return k + 1;
  }
  return limit;
}

XetHash merkle_root(std::span<const MerkleLeaf> leaves) {
  if (leaves.empty()) return XetHash{};
  std::vector<MerkleLeaf> level(leaves.begin(), leaves.end());
  while (level.size() > 1) {
    std::vector<MerkleLeaf> parents;
    parents.reserve(level.size() / 2 + 1);
    for (std::size_t at = 0; at < level.size();) {
      const auto group = std::span(level).subspan(at, next_merkle_group_size(std::span(level).subspan(at)));
      parents.push_back(merkle_parent(group));
      at += group.size();
    }
    level = std::move(parents);
  }
  return level.front().first;
}

XetHash xorb_hash(std::span<const MerkleLeaf> leaves) {
  return merkle_root(leaves);
}

XetHash file_hash(std::span<const MerkleLeaf> leaves) {
  return file_hash_from_root(merkle_root(leaves), leaves.empty());
}

XetHash range_hash(std::span<const XetHash> chunk_hashes) {
  KeyedBlake3 hasher(kVerificationKey);
  for (const auto& hash : chunk_hashes) hasher.update(hash.data(), hash.size());
  return hasher.finish();
}

// A group can be cut before the level is complete once later nodes cannot change it: a qualifying node at
// index k >= 2 ends it whatever follows, and nine nodes with none qualifying end it at nine. Groups cut
// early are therefore exactly the groups merkle_root() cuts, and each level keeps at most nine nodes.
void MerkleBuilder::settle(std::size_t level) {
  for (std::size_t at = level; at < levels_.size(); ++at) {
    std::vector<MerkleLeaf> parents;
    std::size_t consumed = 0;
    const auto pending = std::span<const MerkleLeaf>(levels_[at].pending);
    while (pending.size() - consumed >= 3) {
      const auto rest = pending.subspan(consumed);
      const std::size_t group = next_merkle_group_size(rest);
      // A group of the whole rest (fewer than nine, none qualifying) may still grow.
      if (group == rest.size() && group < kMaxMerkleGroup && !ends_merkle_group(rest[group - 1].first)) break;
      parents.push_back(merkle_parent(rest.first(group)));
      consumed += group;
    }
    if (consumed == 0) return;  // nothing reached the level above, which was already settled
    auto& nodes = levels_[at].pending;
    nodes.erase(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(consumed));
    levels_[at].emitted_parent = true;
    if (at + 1 == levels_.size()) levels_.emplace_back();
    auto& above = levels_[at + 1].pending;
    above.insert(above.end(), parents.begin(), parents.end());
  }
}

void MerkleBuilder::add(const XetHash& hash, std::uint64_t size) {
  if (levels_.empty()) levels_.emplace_back();
  levels_.front().pending.emplace_back(hash, size);
  ++leaf_count_;
  total_size_ += size;
  settle(0);
}

XetHash MerkleBuilder::root() const {
  if (leaf_count_ == 0) return XetHash{};
  // Finish a copy: each level's remaining nodes are grouped with the whole-level rule, bottom up, until a
  // level holds a single node that no group was ever cut from.
  std::vector<Level> levels = levels_;
  for (std::size_t at = 0;; ++at) {
    // A level that never emitted a parent has nothing above it.
    if (levels[at].pending.size() == 1 && !levels[at].emitted_parent) {
      return levels[at].pending.front().first;
    }
    if (at + 1 == levels.size()) levels.emplace_back();
    const std::vector<MerkleLeaf> rest = std::move(levels[at].pending);
    for (std::size_t from = 0; from < rest.size();) {
      const auto group = std::span(rest).subspan(from, next_merkle_group_size(std::span(rest).subspan(from)));
      levels[at + 1].pending.push_back(merkle_parent(group));
      from += group.size();
    }
    levels[at].emitted_parent = true;
  }
}

XetHash FileHasher::file_hash() const {
  return file_hash_from_root(tree_.root(), tree_.leaf_count() == 0);
}

}  // namespace fetchd::xet
