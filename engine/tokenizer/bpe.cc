#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>

#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

// A per-process seed, so that a crafted vocabulary cannot pick keys that collide in the maps built from it.
std::uint64_t process_seed() {
  static const std::uint64_t seed = []() -> std::uint64_t {
    try {
      std::random_device device;
      return (std::uint64_t{device()} << 32) ^ device();
    } catch (const std::exception&) {
      // No entropy source: the address of this code still varies with ASLR.
      return reinterpret_cast<std::uintptr_t>(&process_seed) * 0x9E3779B97F4A7C15ull;
    }
  }();
  return seed;
}

}  // namespace

std::uint64_t hash_bytes(std::string_view text) noexcept {
  constexpr std::uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;
  static const std::uint64_t seed = process_seed();
  std::uint64_t hash = (seed ^ text.size()) * kMultiplier;
  std::size_t pos = 0;
  for (; pos + 8 <= text.size(); pos += 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + pos, 8);
    hash = (hash ^ word) * kMultiplier;
    hash ^= hash >> 29;
  }
  if (pos < text.size()) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + pos, text.size() - pos);
    hash = (hash ^ word) * kMultiplier;
    hash ^= hash >> 29;
  }
  hash *= kMultiplier;
  return hash ^ (hash >> 32);
}

// Merges keyed by the ids of the pair: open addressing with linear probing, because this lookup is the
// inner loop of BPE and std::unordered_map's node hops cost more than the merge itself.
struct BpeModel::MergeTable {
  struct Merge {
    std::int32_t rank;
    std::int32_t new_id;
  };
  // Key and value side by side, so a probe touches one cache line.
  struct Slot {
    std::uint64_t key;
    Merge merge;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  explicit MergeTable(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < count + count / 2) capacity *= 2;
    slots.assign(capacity, Slot{kEmpty, {0, 0}});
    mask = capacity - 1;
  }

  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return std::uint64_t{static_cast<std::uint32_t>(left)} << 32 | static_cast<std::uint32_t>(right);
  }
  static std::size_t slot(std::uint64_t key) {
    key ^= key >> 33;  // a 64-bit mix (murmur3's finalizer)
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return static_cast<std::size_t>(key);
  }

  // Later merges of the same pair replace earlier ones, as in the reference's HashMap.
  void insert(std::int32_t left, std::int32_t right, Merge merge) {
    const std::uint64_t k = key(left, right);
    for (std::size_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = {k, merge};
        return;
      }
    }
  }

  void prefetch(std::int32_t left, std::int32_t right) const {
    __builtin_prefetch(&slots[slot(key(left, right)) & mask]);
  }

  const Merge* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t k = key(left, right);
    for (std::size_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i].merge;
      if (slots[i].key == kEmpty) return nullptr;
    }
  }

  std::vector<Slot> slots;
  std::size_t mask = 0;
};

// Ids of recently seen words, one cache per thread and model, so lookups take no lock. Direct-mapped, with
// words and ids stored in the entry (no allocation after the first use): a word evicts whatever shared
// its slot. The cache never changes results, only skips merge_word.
class BpeModel::WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 22;
  static constexpr std::size_t kMaxIds = 8;

  // The calling thread's cache for the model numbered `owner`. A thread keeps caches for a few models;
  // owner numbers are never reused, so a cache cannot outlive its model's identity.
  static WordCache& for_thread(std::uint64_t owner) {
    struct Slot {
      std::uint64_t owner = 0;
      std::uint64_t last_use = 0;
      std::unique_ptr<WordCache> cache;
    };
    thread_local std::array<Slot, 4> slots;
    thread_local std::uint64_t clock = 0;
    ++clock;
    Slot* victim = &slots[0];
    for (auto& slot : slots) {
      if (slot.owner == owner) {
        slot.last_use = clock;
        return *slot.cache;
      }
      if (slot.last_use < victim->last_use) victim = &slot;
    }
    victim->owner = owner;
    victim->last_use = clock;
    victim->cache = std::make_unique<WordCache>();
    return *victim->cache;
  }

  bool find(std::string_view word, std::uint64_t hash, std::vector<std::int32_t>& ids) const {
    const Entry& entry = entries_[hash & kMask];
    if (entry.hash != hash || entry.length != word.size() || std::memcmp(entry.word, word.data(), word.size()) != 0) {
      return false;
    }
    ids.insert(ids.end(), entry.ids, entry.ids + entry.count);
    return true;
  }

  void insert(std::string_view word, std::uint64_t hash, std::span<const std::int32_t> ids) {
    if (ids.size() > kMaxIds) return;
    Entry& entry = entries_[hash & kMask];
    entry.hash = hash;
    entry.length = static_cast<std::uint8_t>(word.size());
    entry.count = static_cast<std::uint8_t>(ids.size());
    std::memcpy(entry.word, word.data(), word.size());
    std::copy(ids.begin(), ids.end(), entry.ids);
  }

 private:
  static constexpr std::size_t kEntries = 8192;  // 512 KiB
  static constexpr std::size_t kMask = kEntries - 1;
  struct Entry {
    std::uint64_t hash = 0;
    std::uint8_t length = 0;  // 0: empty (empty words are never tokenized)
    std::uint8_t count = 0;
    char word[kMaxWordBytes];
    std::int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  std::vector<Entry> entries_ = std::vector<Entry>(kEntries);
};

namespace {
std::atomic<std::uint64_t> next_model_number{1};
}

BpeModel::BpeModel(const std::vector<std::pair<std::string, std::int32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   std::span<const std::int32_t> ranks)
    : options_(options), merges_(std::make_unique<MergeTable>(merges.size())), number_(next_model_number++) {
  // The vocabulary as the merges name tokens (their text) and, when a word may be looked up whole, as words
  // contain them (bytes, for byte-level models). Where two tokens share a text, the first one stands.
  token_ids_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) token_ids_.try_emplace(token, id);
  if (!options_.byte_level) {
    words_ = &token_ids_;
  } else if (options_.ignore_merges) {
    // Tokens with characters outside the alphabet cannot come out of a word; only the text index keeps them.
    byte_words_.reserve(vocab.size());
    for (const auto& [token, id] : vocab) {
      if (auto bytes = unicode::byte_level_to_bytes(token)) byte_words_.try_emplace(std::move(*bytes), id);
    }
    words_ = &byte_words_;
  }
  const auto& by_text = token_ids_;

  const auto& alphabet = unicode::byte_level_alphabet();
  byte_ids_.fill(-1);
  fallback_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (options_.byte_level) {
      if (const auto it = by_text.find(alphabet.byte_to_utf8[b]); it != by_text.end()) byte_ids_[b] = it->second;
    }
    if (options_.byte_fallback) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (const auto it = by_text.find(std::string_view(name)); it != by_text.end()) fallback_[b] = it->second;
    }
  }

  if (!ranks.empty() && ranks.size() != merges.size()) {
    throw std::invalid_argument(std::to_string(ranks.size()) + " ranks for " + std::to_string(merges.size()) +
                                " merges");
  }
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto find = [&](const std::string& token) {
      const auto it = by_text.find(token);
      if (it == by_text.end()) {
        throw std::invalid_argument("merge " + std::to_string(rank) + " (\"" + left + " " + right + "\"): \"" + token +
                                    "\" is not in the vocabulary");
      }
      return it->second;
    };
    const std::int32_t left_id = find(left);
    const std::int32_t right_id = find(right);
    const std::int32_t new_id = find(left + right);
    const auto rank_of = ranks.empty() ? static_cast<std::int32_t>(rank) : ranks[rank];
    merges_->insert(left_id, right_id, {rank_of, new_id});
  }
}

BpeModel::~BpeModel() = default;

std::optional<std::int32_t> BpeModel::lookup(std::string_view word) const {
  const auto it = words_->find(word);
  if (it == words_->end()) return std::nullopt;
  return it->second;
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = token_ids_.find(token);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = lookup(word)) {
      ids.push_back(*id);
      return;
    }
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    merge_word(word, ids);
    return;
  }
  WordCache& cache = WordCache::for_thread(number_);
  const std::uint64_t hash = StringHash{}(word);
  if (cache.find(word, hash, ids)) return;
  const std::size_t first = ids.size();
  merge_word(word, ids);
  cache.insert(word, hash, std::span<const std::int32_t>(ids).subspan(first));
}

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev;
  std::int32_t next;
  std::uint32_t length;  // bytes of the word it covers; 0 once merged into its left neighbour
};

struct Candidate {
  std::int32_t rank;
  std::int32_t pos;
  std::int32_t new_id;
  std::int32_t left_id, right_id;  // the pair as queued
};

// std::push_heap keeps the largest on top; the best candidate is the lowest rank, then the leftmost.
struct Worse {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};
constexpr Worse worse;

struct MergeScratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> queue;
};

}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<std::int32_t>& ids) const {
  thread_local MergeScratch scratch;
  auto& symbols = scratch.symbols;
  auto& queue = scratch.queue;
  symbols.clear();
  queue.clear();

  const auto add = [&](std::int32_t id, std::size_t length) {
    const auto index = static_cast<std::int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, static_cast<std::uint32_t>(length)});
  };

  // Split into characters (bytes for byte-level), as the reference's merge_word does, unknown ones included.
  std::optional<std::pair<std::int32_t, std::size_t>> unk;
  std::size_t pos = 0;
  while (pos < word.size()) {
    const std::size_t length =
        options_.byte_level ? 1
                            : std::min(unicode::char_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
    const std::string_view piece = word.substr(pos, length);
    pos += length;
    std::int32_t id = -1;
    if (options_.byte_level) {
      id = byte_ids_[static_cast<unsigned char>(piece[0])];
    } else if (const auto found = lookup(piece)) {
      id = *found;
    }
    if (id >= 0) {
      if (unk) {
        add(unk->first, unk->second);
        unk.reset();
      }
      add(id, length);
      continue;
    }
    if (options_.byte_fallback && std::all_of(piece.begin(), piece.end(),
                                              [&](char b) { return fallback_[static_cast<unsigned char>(b)] >= 0; })) {
      for (const char b : piece) add(fallback_[static_cast<unsigned char>(b)], 1);
      continue;
    }
    if (options_.unk_id) {
      if (unk && options_.fuse_unk) {
        unk->second += length;
      } else {
        if (unk) add(unk->first, unk->second);
        unk.emplace(*options_.unk_id, length);
      }
    }
  }
  if (unk) add(unk->first, unk->second);

  // The first probes are independent: prefetch them all so the cache misses overlap.
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) merges_->prefetch(symbols[i].id, symbols[i + 1].id);
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* merge = merges_->find(symbols[i].id, symbols[i + 1].id)) {
      queue.push_back({merge->rank, static_cast<std::int32_t>(i), merge->new_id, symbols[i].id, symbols[i + 1].id});
    }
  }
  std::make_heap(queue.begin(), queue.end(), worse);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), worse);
    const Candidate top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.length == 0 || left.next < 0) continue;
    const Symbol right = symbols[static_cast<std::size_t>(left.next)];
    // A stale entry: the pair at this position changed since it was queued. The reference recognises
    // one by the id the current pair would produce, so a different pair that makes the same token counts.
    if (left.id != top.left_id || right.id != top.right_id) {
      const auto* current = merges_->find(left.id, right.id);
      if (current == nullptr || current->new_id != top.new_id) continue;
    }

    symbols[static_cast<std::size_t>(left.next)].length = 0;
    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;

    if (left.prev >= 0) {
      const Symbol& previous = symbols[static_cast<std::size_t>(left.prev)];
      if (const auto* merge = merges_->find(previous.id, left.id)) {
        queue.push_back({merge->rank, left.prev, merge->new_id, previous.id, left.id});
        std::push_heap(queue.begin(), queue.end(), worse);
      }
    }
    if (left.next >= 0) {
      const Symbol& next = symbols[static_cast<std::size_t>(left.next)];
      if (const auto* merge = merges_->find(left.id, next.id)) {
        queue.push_back({merge->rank, top.pos, merge->new_id, left.id, next.id});
        std::push_heap(queue.begin(), queue.end(), worse);
      }
    }
  }

  for (const auto& symbol : symbols) {
    if (symbol.length != 0) ids.push_back(symbol.id);
  }
}

}  // namespace engine::tokenizer
