#include "engine/runtime/kv_cache_manager.h"

#include <blake3.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace engine::runtime {

namespace {

const BlockKey kRootParent{};

// Keyed BLAKE3 with a key of this manager's own: nobody outside the process can compute a block's key.
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

// ---- BlockTable ------------------------------------------------------------------------------------------

BlockTable::BlockTable(BlockTable&& other) noexcept
    : manager_(std::exchange(other.manager_, nullptr)), blocks_(std::move(other.blocks_)) {
  other.blocks_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    clear();
    manager_ = std::exchange(other.manager_, nullptr);
    blocks_ = std::move(other.blocks_);
    other.blocks_.clear();
  }
  return *this;
}

void BlockTable::clear() {
  if (manager_ != nullptr && !blocks_.empty()) manager_->release(blocks_);
  blocks_.clear();
}

// ---- KvCacheManager --------------------------------------------------------------------------------------

std::size_t KvCacheManager::KeyHash::operator()(const BlockKey& key) const {
  std::size_t h = 0;
  std::memcpy(&h, key.data(), sizeof h);  // keys are uniformly distributed
  return h;
}

KvCacheManager::KvCacheManager(std::size_t num_blocks, std::size_t block_size, BlockHasher hasher)
    : block_size_(block_size),
      pool_(num_blocks),
      hasher_(hasher ? std::move(hasher) : keyed_blake3()),
      key_of_(num_blocks) {
  if (block_size == 0) throw std::invalid_argument("KV cache: the block size must be at least 1");
}

double KvCacheManager::usage() const {
  const std::size_t total = num_blocks();
  return total == 0 ? 0.0 : 1.0 - static_cast<double>(pool_.num_free()) / static_cast<double>(total);
}

bool KvCacheManager::reserve(BlockTable& table, std::size_t positions) {
  if (table.manager_ != nullptr && table.manager_ != this) {
    throw std::logic_error("KV cache: a block table of another cache manager");
  }
  const std::size_t needed = (positions + block_size_ - 1) / block_size_;
  if (needed <= table.blocks_.size()) return true;
  const std::size_t first_new = table.blocks_.size();
  if (!pool_.allocate(needed - first_new, table.blocks_)) return false;
  table.manager_ = this;
  // A block handed out again loses the cache entry it had.
  for (std::size_t i = first_new; i < table.blocks_.size(); ++i) {
    auto& key = key_of_[static_cast<std::size_t>(table.blocks_[i])];
    if (key) {
      by_key_.erase(*key);
      key.reset();
    }
  }
  return true;
}

void KvCacheManager::release(std::span<const std::int32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (key_of_[static_cast<std::size_t>(*it)]) {
      pool_.release_last(*it);
    } else {
      pool_.release(std::span(&*it, 1));
    }
  }
}

std::span<const std::int32_t> KvCacheManager::block_tokens(std::span<const std::int32_t> tokens,
                                                           std::size_t index) const {
  return tokens.subspan(index * block_size_, block_size_);
}

const BlockKey& KvCacheManager::parent_of(std::span<const BlockKey> keys, std::size_t index) {
  return index == 0 ? kRootParent : keys[index - 1];
}

void KvCacheManager::extend_keys(std::span<const std::int32_t> tokens, std::vector<BlockKey>& keys) const {
  for (std::size_t i = keys.size(); (i + 1) * block_size_ <= tokens.size(); ++i) {
    keys.push_back(hasher_(parent_of(keys, i), block_tokens(tokens, i)));
  }
}

std::size_t KvCacheManager::match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys,
                                  std::size_t max_blocks, BlockTable& table) {
  if (!table.empty()) throw std::logic_error("KV cache: a prefix is matched into an empty block table only");
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
    if (pool_.ref_count(entry.block) == 0) {
      pool_.revive(entry.block);
    } else {
      pool_.retain(entry.block);
    }
    table.blocks_.push_back(entry.block);
  }
  if (found > 0) table.manager_ = this;
  return found;
}

void KvCacheManager::cache_blocks(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys,
                                  const BlockTable& table, std::size_t first, std::size_t last) {
  if (last > table.size() || last > keys.size() || last * block_size_ > tokens.size()) {
    throw std::logic_error("KV cache: caching block " + std::to_string(last) + " of a table of " +
                           std::to_string(table.size()) + " blocks and " + std::to_string(keys.size()) + " keys");
  }
  for (std::size_t b = first; b < last; ++b) {
    const std::int32_t block = table[b];
    auto& key = key_of_[static_cast<std::size_t>(block)];
    if (key || by_key_.contains(keys[b])) continue;  // cached already, as this block or another
    const auto own = block_tokens(tokens, b);
    by_key_.emplace(keys[b], Entry{block, parent_of(keys, b), {own.begin(), own.end()}});
    key = keys[b];
  }
}

}  // namespace engine::runtime
