#include "serverd/scheduler/prefix_cache.h"

namespace serverd::scheduler {

namespace {

// 64-bit mixing (splitmix64's finaliser): hashes of different prefixes collide with negligible probability.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

PrefixCache::~PrefixCache() {
  for (const auto& [hash, entry] : by_hash_) pool_.release(std::span(&entry.block, 1));
}

std::vector<std::uint64_t> PrefixCache::block_hashes(std::span<const std::int32_t> tokens) const {
  std::vector<std::uint64_t> hashes;
  std::uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (std::size_t i = 0; i + block_size_ <= tokens.size(); i += block_size_) {
    for (std::size_t j = i; j < i + block_size_; ++j) h = mix(h ^ (static_cast<std::uint64_t>(tokens[j]) + 1));
    hashes.push_back(h);
  }
  return hashes;
}

std::size_t PrefixCache::match(std::span<const std::uint64_t> hashes, std::size_t max_blocks,
                               std::vector<std::int32_t>& table) {
  std::size_t found = 0;
  for (; found < hashes.size() && found < max_blocks; ++found) {
    const auto it = by_hash_.find(hashes[found]);
    if (it == by_hash_.end()) break;
    pool_.retain(it->second.block);
    lru_.splice(lru_.end(), lru_, it->second.lru);
    table.push_back(it->second.block);
  }
  return found;
}

void PrefixCache::insert(std::uint64_t hash, std::int32_t block) {
  if (by_hash_.contains(hash)) return;
  pool_.retain(block);
  lru_.push_back(hash);
  by_hash_.emplace(hash, Entry{block, std::prev(lru_.end())});
}

bool PrefixCache::allocate(std::size_t count, std::vector<std::int32_t>& table) {
  if (count > available()) return false;
  for (auto it = lru_.begin(); pool_.num_free() < count && it != lru_.end();) {
    const auto entry = by_hash_.find(*it);
    if (pool_.ref_count(entry->second.block) == 1) {
      const std::int32_t block = entry->second.block;
      pool_.release(std::span(&block, 1));
      by_hash_.erase(entry);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
  return pool_.allocate(count, table);
}

std::size_t PrefixCache::available() const {
  std::size_t evictable = 0;
  for (const auto& [hash, entry] : by_hash_) evictable += pool_.ref_count(entry.block) == 1 ? 1 : 0;
  return pool_.num_free() + evictable;
}

}  // namespace serverd::scheduler
