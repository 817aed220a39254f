#pragma once

// The one owner of the KV cache's blocks: allocation, reference counts, prefix caching and eviction (the
// roles vLLM splits between its kv_cache_manager and block_pool). Sequences hold their blocks in a
// BlockTable, which gives them back when it is cleared or dropped, so no block can leak on an error path.
//
// Prefix caching: every full block a sequence has computed (prompt or generated tokens) stays cached after
// the sequence lets it go, found again by a key chained over every token up to the block's end, so a later
// sequence with the same beginning skips computing it. A cached block nobody holds is free: it is handed
// out (and its entry evicted) only after every free block without an entry, least recently released
// first, and a sequence's later blocks before its earlier ones.
//
// Sequences come from every client, so a key must not be forgeable: keys are keyed BLAKE3 (a random key
// per manager) over the parent block's key and the block's tokens, and every hit compares the stored parent
// key and tokens, so even a collision serves nothing.
//
// One table per sequence covers every layer today. Layers that keep different positions (sliding-window
// attention) would each get a group with its own tables and eviction rule; the group is the unit a table
// belongs to, and this class is its first and only kind so far.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/runtime/block_pool.h"

namespace engine::runtime {

// The block size when nothing else is asked for (vLLM's default --block-size).
inline constexpr std::size_t kDefaultBlockSize = 16;

using BlockKey = std::array<std::uint8_t, 32>;
// A block's key from its parent's key (all zeros for the first block) and its tokens.
using BlockHasher = std::function<BlockKey(const BlockKey& parent, std::span<const std::int32_t> tokens)>;

class KvCacheManager;

// A sequence's blocks, in position order. Move-only; clearing or dropping it gives every block back.
class BlockTable {
 public:
  BlockTable() = default;
  ~BlockTable() { clear(); }
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  std::span<const std::int32_t> ids() const { return blocks_; }
  std::size_t size() const { return blocks_.size(); }
  bool empty() const { return blocks_.empty(); }
  std::int32_t operator[](std::size_t i) const { return blocks_[i]; }
  void clear();

 private:
  friend class KvCacheManager;
  KvCacheManager* manager_ = nullptr;
  std::vector<std::int32_t> blocks_;
};

class KvCacheManager {
 public:
  // `hasher` replaces the keyed BLAKE3 chain (a test hook: a weak hasher forces collisions).
  KvCacheManager(std::size_t num_blocks, std::size_t block_size, BlockHasher hasher = {});
  // Every table must be empty (or gone) by then.
  ~KvCacheManager() = default;
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  std::size_t block_size() const { return block_size_; }
  std::size_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks nobody holds (cached ones included): what reserve() can still hand out.
  std::size_t num_free() const { return pool_.num_free(); }
  // The share of blocks held by sequences (vllm:kv_cache_usage_perc).
  double usage() const;

  // Grows `table` to hold `positions` positions, evicting cached blocks nobody holds (least recently used
  // first) when too few are free. False, and nothing taken, when even that is not enough.
  bool reserve(BlockTable& table, std::size_t positions);

  // ---- prefix caching ----

  // Extends `keys` with the chained key of each further full block of `tokens` (keys[i] covers tokens
  // [0, (i + 1) * block_size)); the keys already there are kept, so a growing sequence extends its own.
  void extend_keys(std::span<const std::int32_t> tokens, std::vector<BlockKey>& keys) const;
  // Puts into the empty `table` the cached blocks that begin `tokens` (keys from extend_keys), at most
  // `max_blocks`, each now held by the table too; returns how many. A block whose key matches but whose
  // parent or tokens differ is a miss (counted in collisions()).
  std::size_t match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, std::size_t max_blocks,
                    BlockTable& table);
  // Caches the table's blocks [first, last) as holding those blocks of `tokens`; a block whose key is
  // known already is left as it is.
  void cache_blocks(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, const BlockTable& table,
                    std::size_t first, std::size_t last);

  std::size_t cached_blocks() const { return by_key_.size(); }
  // Lookups whose key matched a cached block holding other tokens.
  std::size_t collisions() const { return collisions_; }
  // The tables holding a block (for tests).
  std::uint32_t ref_count(std::int32_t block) const { return pool_.ref_count(block); }

 private:
  friend class BlockTable;
  struct KeyHash {
    std::size_t operator()(const BlockKey& key) const;
  };
  struct Entry {
    std::int32_t block;
    BlockKey parent;
    std::vector<std::int32_t> tokens;
  };

  // A table's blocks, last first, so that a prefix outlives its continuations in the cache.
  void release(std::span<const std::int32_t> blocks);
  std::span<const std::int32_t> block_tokens(std::span<const std::int32_t> tokens, std::size_t index) const;
  static const BlockKey& parent_of(std::span<const BlockKey> keys, std::size_t index);

  std::size_t block_size_;
  BlockPool pool_;
  BlockHasher hasher_;
  std::unordered_map<BlockKey, Entry, KeyHash> by_key_;
  std::vector<std::optional<BlockKey>> key_of_;  // per block: its cache entry's key, if it has one
  std::size_t collisions_ = 0;
};

}  // namespace engine::runtime
