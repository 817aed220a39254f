#pragma once

// Prefix caching: full KV blocks of prompts stay in the cache after their sequence ends, found again by a
// hash of every token up to the block's end, so a later prompt with the same beginning (a shared system
// prompt, the earlier turns of a chat) skips computing it. The cache holds one reference to each block it
// knows; blocks nobody else holds are evicted, least recently used first, when the pool runs short.

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/runtime/block_pool.h"

namespace serverd::scheduler {

class PrefixCache {
 public:
  PrefixCache(engine::runtime::BlockPool& pool, std::size_t block_size) : pool_(pool), block_size_(block_size) {}
  ~PrefixCache();  // returns its references to the pool
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The chain hash of each full block of `tokens` (block i's hash covers tokens [0, (i + 1) * block_size)).
  std::vector<std::uint64_t> block_hashes(std::span<const std::int32_t> tokens) const;

  // Appends to `table` the cached blocks that begin `hashes`, at most `max_blocks`, each retained for the
  // caller; returns how many.
  std::size_t match(std::span<const std::uint64_t> hashes, std::size_t max_blocks, std::vector<std::int32_t>& table);

  // Remembers `block` as holding the prefix that ends with `hash` (a no-op when that prefix is known).
  void insert(std::uint64_t hash, std::int32_t block);

  // Allocates like BlockPool::allocate, evicting unused cached blocks when too few are free.
  bool allocate(std::size_t count, std::vector<std::int32_t>& table);

  // Blocks free or held only by the cache (what allocate can still hand out).
  std::size_t available() const;
  std::size_t cached_blocks() const { return by_hash_.size(); }

 private:
  struct Entry {
    std::int32_t block;
    std::list<std::uint64_t>::iterator lru;
  };

  engine::runtime::BlockPool& pool_;
  std::size_t block_size_;
  std::unordered_map<std::uint64_t, Entry> by_hash_;
  std::list<std::uint64_t> lru_;  // front: least recently used
};

}  // namespace serverd::scheduler
