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
// Groups (the hybrid allocator): layers that keep the same positions share a group (kv_cache_groups.h), and a
// sequence's table has a row of blocks per group, all drawing on the one pool. A sliding-window group gives
// back the blocks its window no longer reaches as the sequence advances, their entries becoming the null
// block (backend::kNullBlock, taken out of the pool for good); a prefix hit needs, in such a group, only the
// blocks within the window of the first position left to compute.

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

// A sequence's blocks, in position order, a row per cache group. Move-only; clearing or dropping it gives every
// block back.
class BlockTable {
 public:
  BlockTable() = default;
  ~BlockTable() { clear(); }
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  std::size_t num_groups() const { return groups_.size(); }
  // Group `group`'s blocks (none before the first reserve or match).
  std::span<const std::int32_t> ids(std::size_t group = 0) const {
    return group < groups_.size() ? std::span<const std::int32_t>(groups_[group].blocks)
                                  : std::span<const std::int32_t>{};
  }
  // Blocks of positions the table covers (each group's row is that long).
  std::size_t size() const { return groups_.empty() ? 0 : groups_.front().blocks.size(); }
  bool empty() const { return size() == 0; }
  void clear();

 private:
  friend class KvCacheManager;
  struct Row {
    std::vector<std::int32_t> blocks;
    std::size_t first_held = 0;  // entries before it are the null block (a sliding group's)
  };
  KvCacheManager* manager_ = nullptr;
  std::vector<Row> groups_;
};

class KvCacheManager {
 public:
  // One group per entry of `group_windows`: its sliding window, 0 for full attention. `hasher` replaces the keyed
  // BLAKE3 chain (a test hook: a weak hasher forces collisions).
  KvCacheManager(std::size_t num_blocks, std::size_t block_size, std::vector<std::size_t> group_windows = {0},
                 BlockHasher hasher = {});
  // Every table must be empty (or gone) by then.
  ~KvCacheManager() = default;
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  std::size_t block_size() const { return block_size_; }
  std::size_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks a sequence can be given: all but the null block, where a group slides.
  std::size_t num_usable() const { return num_blocks() - (has_null_block_ ? 1 : 0); }
  std::size_t num_groups() const { return windows_.size(); }
  // Blocks nobody holds (cached ones included): what reserve() can still hand out.
  std::size_t num_free() const { return pool_.num_free(); }
  // The share of blocks held by sequences (vllm:kv_cache_usage_perc).
  double usage() const;

  // Grows `table` to hold `positions` positions for a step whose first query is at `first_query`, evicting
  // cached blocks nobody holds (least recently used first) when too few are free. A sliding group first gives
  // back the blocks before that query's window (none of the sequence's later queries reads them) and takes
  // none for them. False, and nothing more taken, when even that is not enough.
  bool reserve(BlockTable& table, std::size_t positions, std::size_t first_query = 0);

  // ---- prefix caching ----

  // Extends `keys` with the chained key of each further full block of `tokens` (keys[i] covers tokens
  // [0, (i + 1) * block_size)); the keys already there are kept, so a growing sequence extends its own.
  void extend_keys(std::span<const std::int32_t> tokens, std::vector<BlockKey>& keys) const;
  // Puts into the empty `table` the cached blocks that begin `tokens` (keys from extend_keys), at most
  // `max_blocks`, each now held by the table too; returns how many blocks of positions that covers: the most
  // for which every full group has each block cached and every sliding group the blocks within the window of
  // the position after them. A block whose key matches but whose parent or tokens differ is a miss (counted in
  // collisions()).
  std::size_t match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, std::size_t max_blocks,
                    BlockTable& table);
  // Caches the table's blocks [first, last) of every group as holding those blocks of `tokens`; a block whose
  // key is known already in its group is left as it is, as is an entry given back.
  void cache_blocks(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, const BlockTable& table,
                    std::size_t first, std::size_t last);

  std::size_t cached_blocks() const;
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
  struct CachedAs {
    std::size_t group;
    BlockKey key;
  };

  // A table's blocks, last first, so that a prefix outlives its continuations in the cache.
  void release(std::span<const std::int32_t> blocks);
  void release(std::int32_t block);
  // The block group `group` caches for block `index` of `tokens`, if its entry holds those tokens.
  std::optional<std::int32_t> lookup(std::size_t group, std::span<const std::int32_t> tokens,
                                     std::span<const BlockKey> keys, std::size_t index);
  // The first block a sliding group keeps for a query at `position` (0 for a full group).
  std::size_t first_kept(std::size_t group, std::size_t position) const;
  std::span<const std::int32_t> block_tokens(std::span<const std::int32_t> tokens, std::size_t index) const;
  static const BlockKey& parent_of(std::span<const BlockKey> keys, std::size_t index);

  std::size_t block_size_;
  std::vector<std::size_t> windows_;  // by group
  bool has_null_block_;
  BlockPool pool_;
  BlockHasher hasher_;
  std::vector<std::unordered_map<BlockKey, Entry, KeyHash>> by_key_;  // by group
  std::vector<std::optional<CachedAs>> cached_as_;                    // per block: its cache entry, if it has one
  std::size_t collisions_ = 0;
};

}  // namespace engine::runtime
