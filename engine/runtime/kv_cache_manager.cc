#include "engine/runtime/kv_cache_manager.h"

#include <blake3.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/backend/backend.h"

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
    : manager_(std::exchange(other.manager_, nullptr)), groups_(std::move(other.groups_)) {
  other.groups_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    clear();
    manager_ = std::exchange(other.manager_, nullptr);
    groups_ = std::move(other.groups_);
    other.groups_.clear();
  }
  return *this;
}

void BlockTable::clear() {
  if (manager_ != nullptr) {
    for (const auto& row : groups_) manager_->release(std::span(row.blocks).subspan(row.first_held));
  }
  groups_.clear();
}

// ---- KvCacheManager --------------------------------------------------------------------------------------

std::size_t KvCacheManager::KeyHash::operator()(const BlockKey& key) const {
  std::size_t h = 0;
  std::memcpy(&h, key.data(), sizeof h);  // keys are uniformly distributed
  return h;
}

KvCacheManager::KvCacheManager(std::size_t num_blocks, std::size_t block_size, std::vector<std::size_t> group_windows,
                               BlockHasher hasher)
    : block_size_(block_size),
      windows_(std::move(group_windows)),
      has_null_block_(std::any_of(windows_.begin(), windows_.end(), [](std::size_t w) { return w != 0; })),
      pool_(num_blocks),
      hasher_(hasher ? std::move(hasher) : keyed_blake3()),
      by_key_(windows_.size()),
      cached_as_(num_blocks) {
  if (block_size == 0) throw std::invalid_argument("KV cache: the block size must be at least 1");
  if (windows_.empty()) throw std::invalid_argument("KV cache: at least one group of layers");
  if (has_null_block_) {
    if (num_blocks < 2) {
      throw std::invalid_argument("KV cache: " + std::to_string(num_blocks) +
                                  " blocks; a sliding window needs a null block and at least one other");
    }
    pool_.revive(backend::kNullBlock);  // held for good: never handed out, never written
  }
}

double KvCacheManager::usage() const {
  const std::size_t total = num_usable();
  return total == 0 ? 0.0 : 1.0 - static_cast<double>(pool_.num_free()) / static_cast<double>(total);
}

std::size_t KvCacheManager::cached_blocks() const {
  std::size_t n = 0;
  for (const auto& map : by_key_) n += map.size();
  return n;
}

std::size_t KvCacheManager::first_kept(std::size_t group, std::size_t position) const {
  const std::size_t window = windows_[group];
  return window == 0 || position + 1 <= window ? 0 : (position + 1 - window) / block_size_;
}

bool KvCacheManager::reserve(BlockTable& table, std::size_t positions, std::size_t first_query) {
  if (table.manager_ != nullptr && table.manager_ != this) {
    throw std::logic_error("KV cache: a block table of another cache manager");
  }
  if (table.groups_.empty()) table.groups_.resize(windows_.size());
  table.manager_ = this;
  const std::size_t needed = (positions + block_size_ - 1) / block_size_;
  // Blocks behind a sliding window go back first (they may be what the new ones are made of).
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    auto& row = table.groups_[g];
    const std::size_t keep = std::min(first_kept(g, first_query), row.blocks.size());
    for (; row.first_held < keep; ++row.first_held) {
      release(std::exchange(row.blocks[row.first_held], backend::kNullBlock));
    }
  }
  if (needed <= table.size()) return true;
  std::size_t count = 0;
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    const std::size_t from = std::max(table.size(), first_kept(g, first_query));
    if (needed > from) count += needed - from;
  }
  std::vector<std::int32_t> fresh;
  if (!pool_.allocate(count, fresh)) return false;
  // A block handed out again loses the cache entry it had.
  for (const auto block : fresh) {
    if (auto& cached = cached_as_[static_cast<std::size_t>(block)]) {
      by_key_[cached->group].erase(cached->key);
      cached.reset();
    }
  }
  auto next = fresh.begin();
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    auto& row = table.groups_[g];
    const std::size_t kept = first_kept(g, first_query);
    while (row.blocks.size() < needed) {
      row.blocks.push_back(row.blocks.size() < kept ? backend::kNullBlock : *next++);
    }
    row.first_held = std::max(row.first_held, std::min(kept, needed));
  }
  return true;
}

void KvCacheManager::release(std::int32_t block) {
  if (cached_as_[static_cast<std::size_t>(block)]) {
    pool_.release_last(block);
  } else {
    pool_.release(std::span(&block, 1));
  }
}

void KvCacheManager::release(std::span<const std::int32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) release(*it);
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

std::optional<std::int32_t> KvCacheManager::lookup(std::size_t group, std::span<const std::int32_t> tokens,
                                                   std::span<const BlockKey> keys, std::size_t index) {
  const auto it = by_key_[group].find(keys[index]);
  if (it == by_key_[group].end()) return std::nullopt;
  const Entry& entry = it->second;
  const auto wanted = block_tokens(tokens, index);
  if (entry.parent != parent_of(keys, index) ||
      !std::equal(wanted.begin(), wanted.end(), entry.tokens.begin(), entry.tokens.end())) {
    ++collisions_;
    return std::nullopt;
  }
  return entry.block;
}

std::size_t KvCacheManager::match(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys,
                                  std::size_t max_blocks, BlockTable& table) {
  if (!table.empty()) throw std::logic_error("KV cache: a prefix is matched into an empty block table only");
  const std::size_t groups = windows_.size();
  const std::size_t most = std::min(keys.size(), max_blocks);
  // found[g][i]: group g's cached block for block i. Full groups: while every one has its block.
  std::vector<std::vector<std::optional<std::int32_t>>> found(groups);
  std::size_t length = 0;
  for (bool all = true; all && length < most;) {
    for (std::size_t g = 0; g < groups && all; ++g) {
      if (windows_[g] == 0) all = found[g].emplace_back(lookup(g, tokens, keys, length)).has_value();
    }
    if (all) ++length;
  }
  // Sliding groups: the longest prefix, no longer than that, whose last blocks within the window of the
  // position after it are all cached.
  std::vector<std::vector<std::size_t>> run(groups);  // run[g][i]: cached blocks in a row ending at block i
  for (std::size_t g = 0; g < groups; ++g) {
    if (windows_[g] == 0) continue;
    for (std::size_t i = 0; i < length; ++i) {
      const bool hit = found[g].emplace_back(lookup(g, tokens, keys, i)).has_value();
      run[g].push_back(hit ? (i == 0 ? 1 : run[g][i - 1] + 1) : 0);
    }
  }
  const auto covered = [&](std::size_t n) {
    for (std::size_t g = 0; g < groups; ++g) {
      if (windows_[g] != 0 && n > 0 && run[g][n - 1] < n - first_kept(g, n * block_size_)) return false;
    }
    return true;
  };
  while (length > 0 && !covered(length)) --length;
  if (length == 0) return 0;
  table.groups_.resize(groups);
  table.manager_ = this;
  for (std::size_t g = 0; g < groups; ++g) {
    auto& row = table.groups_[g];
    row.first_held = first_kept(g, length * block_size_);
    for (std::size_t i = 0; i < length; ++i) {
      if (i < row.first_held) {
        row.blocks.push_back(backend::kNullBlock);
        continue;
      }
      const std::int32_t block = *found[g][i];
      if (pool_.ref_count(block) == 0) {
        pool_.revive(block);
      } else {
        pool_.retain(block);
      }
      row.blocks.push_back(block);
    }
  }
  return length;
}

void KvCacheManager::cache_blocks(std::span<const std::int32_t> tokens, std::span<const BlockKey> keys,
                                  const BlockTable& table, std::size_t first, std::size_t last) {
  if (last > table.size() || last > keys.size() || last * block_size_ > tokens.size()) {
    throw std::logic_error("KV cache: caching block " + std::to_string(last) + " of a table of " +
                           std::to_string(table.size()) + " blocks and " + std::to_string(keys.size()) + " keys");
  }
  for (std::size_t g = 0; g < table.groups_.size(); ++g) {
    const auto& row = table.groups_[g];
    for (std::size_t b = std::max(first, row.first_held); b < last; ++b) {
      const std::int32_t block = row.blocks[b];
      auto& cached = cached_as_[static_cast<std::size_t>(block)];
      if (cached || by_key_[g].contains(keys[b])) continue;  // cached already, as this block or another
      const auto own = block_tokens(tokens, b);
      by_key_[g].emplace(keys[b], Entry{block, parent_of(keys, b), {own.begin(), own.end()}});
      cached = CachedAs{g, keys[b]};
    }
  }
}

}  // namespace engine::runtime
