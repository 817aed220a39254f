#include "serverd/scheduler/prefix_cache.h"

#include <blake3.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace serverd::scheduler {

namespace {

const BlockKey kRootParent{};

// Keyed BLAKE3 with a key of this cache's own: nobody outside the process can compute a block's key.
BlockHasher keyed_blake3() {
  std::array<std::uint8_t, BLAKE3_KEY_LEN> key{};
  std::random_device entropy;
  for (std::size_t i = 0; i < key.size(); i += 4) {
    const std::uint32_t word = entropy();
    std::memcpy(key.data() + i, &word, 4);
  }
  return [key](const BlockKey& parent, std::span<const std::int32_t> tokens) {
    blake3_hasher hasher;
    blake3_hasher_init_keyed(&hasher, key.data());
    blake3_hasher_update(&hasher, parent.data(), parent.size());
    // Tokens as little-endian 32-bit words (the in-memory form on every supported target).
    blake3_hasher_update(&hasher, tokens.data(), tokens.size_bytes());
    BlockKey out;
    blake3_hasher_finalize(&hasher, out.data(), out.size());
    return out;
  };
}

}  // namespace

std::size_t PrefixCache::KeyHash::operator()(const BlockKey& key) const {
  std::size_t h = 0;
  std::memcpy(&h, key.data(), sizeof h);  // keys are uniformly distributed
  return h;
}

PrefixCache::PrefixCache(engine::runtime::BlockPool& pool, std::size_t block_size, BlockHasher hasher)
    : pool_(pool), block_size_(block_size), hasher_(hasher ? std::move(hasher) : keyed_blake3()) {}

PrefixCache::~PrefixCache() {
  for (const auto& [key, entry] : by_key_) pool_.release(std::span(&entry.block, 1));
}

std::span<const std::int32_t> PrefixCache::block_tokens(std::span<const std::int32_t> tokens, std::size_t index) const {
  return tokens.subspan(index * block_size_, block_size_);
}

const BlockKey& PrefixCache::parent_of(std::span<const BlockKey> keys, std::size_t index) {
  return index == 0 ? kRootParent : keys[index - 1];
}

std::vector<BlockKey> PrefixCache::block_keys(std::span<const std::int32_t> tokens) const {
  std::vector<BlockKey> keys;
  keys.reserve(tokens.size() / block_size_);
  for (std::size_t i = 0; (i + 1) * block_size_ <= tokens.size(); ++i) {
    keys.push_back(hasher_(parent_of(keys, i), block_tokens(tokens, i)));
  }
  return keys;
}

std::size_t PrefixCache::match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys,
                               std::size_t max_blocks, std::vector<std::int32_t>& table) {
  std::size_t found = 0;
  for (; found < keys.size() && found < max_blocks; ++found) {
    const auto it = by_key_.find(keys[found]);
    if (it == by_key_.end()) break;
    const Entry& entry = it->second;
    const auto wanted = block_tokens(tokens, found);
    if (entry.parent != parent_of(keys, found) ||
        !std::equal(wanted.begin(), wanted.end(), entry.tokens.begin(), entry.tokens.end())) {
      ++collisions_;
      break;
    }
    pool_.retain(entry.block);
    lru_.splice(lru_.end(), lru_, entry.lru);
    table.push_back(entry.block);
  }
  return found;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys, std::size_t index,
                         std::int32_t block) {
  if (by_key_.contains(keys[index])) return;
  const auto own = block_tokens(tokens, index);
  pool_.retain(block);
  lru_.push_back(keys[index]);
  by_key_.emplace(keys[index], Entry{block, parent_of(keys, index), {own.begin(), own.end()}, std::prev(lru_.end())});
}

bool PrefixCache::allocate(std::size_t count, std::vector<std::int32_t>& table) {
  if (count > available()) return false;
  for (auto it = lru_.begin(); pool_.num_free() < count && it != lru_.end();) {
    const auto entry = by_key_.find(*it);
    if (pool_.ref_count(entry->second.block) == 1) {
      const std::int32_t block = entry->second.block;
      pool_.release(std::span(&block, 1));
      by_key_.erase(entry);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
  return pool_.allocate(count, table);
}

std::size_t PrefixCache::available() const {
  std::size_t evictable = 0;
  for (const auto& [key, entry] : by_key_) evictable += pool_.ref_count(entry.block) == 1 ? 1 : 0;
  return pool_.num_free() + evictable;
}

}  // namespace serverd::scheduler
