#pragma once

// Prefix caching: full KV blocks of prompts stay in the cache after their sequence ends, found again by a
// key chained over every token up to the block's end, so a later prompt with the same beginning (a shared
// system prompt, the earlier turns of a chat) skips computing it. The cache holds one reference to each
// block it knows; blocks nobody else holds are evicted, least recently used first, when the pool runs short.
//
// Prompts come from every client, so a key must not be forgeable: one client must never be served another
// client's keys and values by crafting tokens whose key matches theirs. Keys are keyed BLAKE3 over the
// parent block's key and the block's tokens, with a key drawn at random for each cache, and every hit is
// confirmed by comparing the stored parent key and tokens, so even a collision serves nothing.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/runtime/block_pool.h"

namespace serverd::scheduler {

using BlockKey = std::array<std::uint8_t, 32>;

// A block's key from its parent's key (all zeros for the first block) and its tokens.
using BlockHasher = std::function<BlockKey(const BlockKey& parent, std::span<const std::int32_t> tokens)>;

class PrefixCache {
 public:
  // `hasher` replaces the keyed BLAKE3 chain (a test hook: a weak hasher forces collisions).
  PrefixCache(engine::runtime::BlockPool& pool, std::size_t block_size, BlockHasher hasher = {});
  ~PrefixCache();  // returns its references to the pool
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The chained key of each full block of `tokens` (block i's key covers tokens [0, (i + 1) * block_size)).
  std::vector<BlockKey> block_keys(std::span<const std::int32_t> tokens) const;

  // Appends to `table` the cached blocks that begin `tokens` (whose keys are `keys`), at most `max_blocks`,
  // each retained for the caller; returns how many. A block whose key matches but whose parent or tokens
  // differ is a miss (counted in collisions()).
  std::size_t match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, std::size_t max_blocks,
                    std::vector<std::int32_t>& table);

  // Remembers `block` as holding block `index` of `tokens` (keys from block_keys); a no-op when that key is
  // known already.
  void insert(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, std::size_t index,
              std::int32_t block);

  // Allocates like BlockPool::allocate, evicting unused cached blocks when too few are free.
  bool allocate(std::size_t count, std::vector<std::int32_t>& table);

  // Blocks free or held only by the cache (what allocate can still hand out).
  std::size_t available() const;
  std::size_t cached_blocks() const { return by_key_.size(); }
  // Lookups whose key matched a cached block holding other tokens.
  std::size_t collisions() const { return collisions_; }

 private:
  struct KeyHash {
    std::size_t operator()(const BlockKey& key) const;
  };
  struct Entry {
    std::int32_t block;
    BlockKey parent;
    std::vector<std::int32_t> tokens;
    std::list<BlockKey>::iterator lru;
  };

  std::span<const std::int32_t> block_tokens(std::span<const std::int32_t> tokens, std::size_t index) const;
  static const BlockKey& parent_of(std::span<const BlockKey> keys, std::size_t index);

  engine::runtime::BlockPool& pool_;
  std::size_t block_size_;
  BlockHasher hasher_;
  std::unordered_map<BlockKey, Entry, KeyHash> by_key_;
  std::list<BlockKey> lru_;  // front: least recently used
  std::size_t collisions_ = 0;
};

}  // namespace serverd::scheduler
