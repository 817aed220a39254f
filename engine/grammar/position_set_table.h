#pragma once

// Position sets over an unknown context, interned, with their byte steps memoized: a lazily built DFA over
// the pushdown automaton's reachable configurations. The mask cache walks the whole vocabulary trie from
// every node at compile time; most trie nodes lead to a position set some other trie node reached already, so a step is
// one hash lookup instead of closures, frame interning and a sort (about 300 ns a trie node otherwise, which made a
// string position's walk cost ~30 ms on Qwen3).

#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar/automaton_walker.h"
#include "engine/grammar/stack_pool.h"

namespace engine::grammar {

class PositionSetTable {
 public:
  struct Step {
    std::uint32_t next = 0;  // the position set reached
    std::uint32_t ends = 0;  // what else the step found, into ends()
  };

  // Interns stack frames in `pool` when one is given (the matcher's, whose positions a walk starts from),
  // else in a pool of its own.
  explicit PositionSetTable(const AutomatonWalker& walker, StackPool* pool = nullptr);
  PositionSetTable(const PositionSetTable&) = delete;
  PositionSetTable& operator=(const PositionSetTable&) = delete;

  // The set holding `node` alone over the unknown context.
  std::uint32_t start(std::uint32_t node);
  // The set of `positions` (sorted by key, unique; their frames from this table's pool).
  std::uint32_t start(std::span<const StackElement> positions) { return intern(positions); }
  // Reads `byte` from set `set`; memoized.
  Step step(std::uint32_t set, std::uint8_t byte) {
    if (set < dense_rows_.size() && dense_rows_[set] != kNoRow) {  // (empty unless use_dense_rows_)
      const Step& known = dense_[std::size_t{dense_rows_[set]} * 256 + byte];
      if (known.next != kUnknownStep) return known;
    }
    return step_slow(set, byte);
  }

  bool empty(std::uint32_t set) const { return set_begin_[set + 1] == set_begin_[set]; }
  // The positions in `set`, sorted by key.
  std::span<const StackElement> positions(std::uint32_t set) const {
    return {elements_.data() + set_begin_[set], elements_.data() + set_begin_[set + 1]};
  }
  const StepEnds& ends(std::uint32_t id) const { return ends_[id]; }
  // Interned sets.
  std::size_t sets() const { return set_begin_.size() - 1; }
  // Forgets every set and step (and the frames, when the pool is the table's own).
  void clear();

 private:
  Step step_slow(std::uint32_t set, std::uint8_t byte);
  std::uint32_t intern(std::span<const StackElement> set);
  std::uint32_t intern_ends(const StepEnds& ends);
  static std::uint64_t hash(std::span<const StackElement> set);

  const AutomatonWalker& walker_;
  StackPool own_pool_;
  StackPool& pool_;
  std::vector<StackElement> elements_;    // every set's positions, sorted and unique within a set
  std::vector<std::uint32_t> set_begin_;  // set s: elements_[set_begin_[s], set_begin_[s + 1])
  std::vector<std::uint64_t> set_hash_;
  std::vector<std::uint32_t> set_slots_;  // open addressing over set ids
  std::vector<StepEnds> ends_;            // distinct step ends; few (ends of rules and of the grammar)
  // Memoized steps: open addressing, keyed by set * 256 + byte (kNoKey: empty slot).
  static constexpr std::uint64_t kNoKey = UINT64_MAX;
  std::vector<std::uint64_t> step_keys_;
  std::vector<Step> step_values_;
  std::size_t steps_ = 0;
  // In a table with its own pool (a compile-time walk of the whole vocabulary), the first kDenseSets sets
  // that take a step get a row of 256 steps (most of a walk's steps come from few sets): an array load
  // instead of a probe. Later sets, and a matcher's table (cleared for every mask, where a row would cost
  // more to fill than it saves), use the hash table alone.
  bool use_dense_rows_ = false;
  static constexpr std::uint32_t kDenseSets = 512;
  static constexpr std::uint32_t kNoRow = UINT32_MAX;
  static constexpr std::uint32_t kUnknownStep = UINT32_MAX;
  std::vector<std::uint32_t> dense_rows_;  // per set id: its row, or kNoRow
  std::vector<Step> dense_;
  std::vector<StackElement> scratch_;
};

}  // namespace engine::grammar
