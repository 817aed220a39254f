#include "engine/grammar/position_set_table.h"

#include <algorithm>

namespace engine::grammar {
namespace {

constexpr std::size_t kInitialSlots = 1024;

std::size_t slot_of(std::uint64_t hash, std::size_t slots) {
  return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> 32) & (slots - 1);
}

bool same_ends(const StepEnds& a, const StepEnds& b) {
  return a.grammar_ended == b.grammar_ended && a.left_frame == b.left_frame &&
         a.exit_follow.words == b.exit_follow.words;
}

}  // namespace

PositionSetTable::PositionSetTable(const AutomatonWalker& walker, StackPool* pool)
    : walker_(walker), pool_(pool ? *pool : own_pool_), use_dense_rows_(pool == nullptr) {
  clear();
}

void PositionSetTable::clear() {
  own_pool_.clear();
  elements_.clear();
  set_begin_.assign(1, 0);
  set_hash_.clear();
  set_slots_.assign(kInitialSlots, UINT32_MAX);
  ends_.clear();
  step_keys_.assign(kInitialSlots, kNoKey);
  step_values_.assign(kInitialSlots, Step{});
  steps_ = 0;
  dense_rows_.clear();
  dense_.clear();
}

std::uint64_t PositionSetTable::hash(std::span<const StackElement> set) {
  std::uint64_t h = 0x84222325CBF29CE4ull ^ set.size();
  for (const StackElement& e : set) h = (h ^ e.key()) * 0x100000001B3ull + (h >> 29);
  return h;
}

std::uint32_t PositionSetTable::intern(std::span<const StackElement> set) {
  const std::uint64_t h = hash(set);
  for (std::size_t slot = slot_of(h, set_slots_.size());; slot = (slot + 1) & (set_slots_.size() - 1)) {
    const std::uint32_t id = set_slots_[slot];
    if (id == UINT32_MAX) break;
    if (set_hash_[id] == h && std::ranges::equal(positions(id), set)) return id;
  }
  const auto id = static_cast<std::uint32_t>(sets());
  elements_.insert(elements_.end(), set.begin(), set.end());
  set_begin_.push_back(static_cast<std::uint32_t>(elements_.size()));
  set_hash_.push_back(h);
  if (set_hash_.size() * 2 > set_slots_.size()) {
    set_slots_.assign(set_slots_.size() * 2, UINT32_MAX);
    for (std::uint32_t s = 0; s < set_hash_.size(); ++s) {
      std::size_t slot = slot_of(set_hash_[s], set_slots_.size());
      while (set_slots_[slot] != UINT32_MAX) slot = (slot + 1) & (set_slots_.size() - 1);
      set_slots_[slot] = s;
    }
  } else {
    std::size_t slot = slot_of(h, set_slots_.size());
    while (set_slots_[slot] != UINT32_MAX) slot = (slot + 1) & (set_slots_.size() - 1);
    set_slots_[slot] = id;
  }
  return id;
}

std::uint32_t PositionSetTable::intern_ends(const StepEnds& ends) {
  for (std::size_t i = 0; i < ends_.size(); ++i) {
    if (same_ends(ends_[i], ends)) return static_cast<std::uint32_t>(i);
  }
  ends_.push_back(ends);
  return static_cast<std::uint32_t>(ends_.size() - 1);
}

std::uint32_t PositionSetTable::start(std::uint32_t node) {
  const StackElement element{node, StackPool::kUnknown};
  return intern({&element, 1});
}

PositionSetTable::Step PositionSetTable::step_slow(std::uint32_t set, std::uint8_t byte) {
  const auto remember = [&](const Step& result) {
    if (!use_dense_rows_) return;
    if (set >= dense_rows_.size()) dense_rows_.resize(std::size_t{set} + 1, kNoRow);
    if (dense_rows_[set] == kNoRow) {
      if (dense_.size() >= std::size_t{kDenseSets} * 256) return;
      dense_rows_[set] = static_cast<std::uint32_t>(dense_.size() / 256);
      dense_.resize(dense_.size() + 256, Step{kUnknownStep, 0});
    }
    dense_[std::size_t{dense_rows_[set]} * 256 + byte] = result;
  };
  const std::uint64_t key = std::uint64_t{set} << 8 | byte;
  std::size_t slot = slot_of(key, step_keys_.size());
  for (; step_keys_[slot] != kNoKey; slot = (slot + 1) & (step_keys_.size() - 1)) {
    if (step_keys_[slot] == key) {
      remember(step_values_[slot]);
      return step_values_[slot];
    }
  }
  scratch_.clear();
  StepEnds ends;
  // step() reads its input while appending to scratch_: the input lives in elements_, which it leaves alone.
  walker_.step(positions(set), byte, scratch_, pool_, ends);
  const Step result{intern(scratch_), intern_ends(ends)};
  if ((steps_ + 1) * 2 > step_keys_.size()) {
    std::vector<std::uint64_t> keys(step_keys_.size() * 2, kNoKey);
    std::vector<Step> values(keys.size());
    for (std::size_t s = 0; s < step_keys_.size(); ++s) {
      if (step_keys_[s] == kNoKey) continue;
      std::size_t to = slot_of(step_keys_[s], keys.size());
      while (keys[to] != kNoKey) to = (to + 1) & (keys.size() - 1);
      keys[to] = step_keys_[s];
      values[to] = step_values_[s];
    }
    step_keys_ = std::move(keys);
    step_values_ = std::move(values);
    slot = slot_of(key, step_keys_.size());
    while (step_keys_[slot] != kNoKey) slot = (slot + 1) & (step_keys_.size() - 1);
  }
  step_keys_[slot] = key;
  step_values_[slot] = result;
  ++steps_;
  remember(result);
  return result;
}

}  // namespace engine::grammar
