#pragma once

// The adaptive token mask cache (the idea xgrammar publishes): for every automaton node a matcher
// position can have on top, which tokens are accepted or rejected whatever the stack below holds
// ("context-independent"), computed at compile time by walking the sorted vocabulary from that node alone
// (copies of a node in a counted repetition share the walk of one copy, see NodeTokenMask::base).
// Only the rest ("uncertain": tokens that would leave the node's rule into the unknown context, with a
// byte that may follow the rule) are checked against the real stack when a mask is filled. Each node's
// set is stored as whichever is smallest: the accepted ids, the rejected ids, or a bitmask. Some copies are
// computed at their first use instead (CompileBudget::deferred_live_tokens).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <vector>

#include "engine/grammar/automaton_walker.h"
#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/class_run_lengths.h"
#include "engine/grammar/sorted_vocabulary.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {

struct NodeTokenMask {
  enum class Form : std::uint8_t { Accepted, Rejected, Bitmask };
  static constexpr std::uint32_t kSelf = UINT32_MAX;
  Form form = Form::Accepted;
  std::uint32_t begin = 0;  // Accepted / Rejected: token ids from ids(); Bitmask: words from words()
  std::uint32_t count = 0;
  std::uint32_t uncertain_begin = 0;  // sorted-vocabulary indices, ascending
  std::uint32_t uncertain_count = 0;
  // A copy in a counted repetition may be stored as a difference from another copy of its group: start
  // from node `base`'s accepted set (and walk its uncertain tokens), allow the set ids, forbid the cleared
  // ones and walk the extra uncertain tokens too (only tokens longer than the copies agree on differ); see
  // TokenMaskCache::difference.
  std::uint32_t base = kSelf;
  std::uint32_t set_begin = 0, set_count = 0;                          // token ids, into ids()
  std::uint32_t clear_begin = 0, clear_count = 0;                      // token ids, into ids()
  std::uint32_t extra_uncertain_begin = 0, extra_uncertain_count = 0;  // sorted indices, ascending
  std::uint32_t deferred = kSelf;  // else: computed at first use, into TokenMaskCache's deferred slots
};

class TokenMaskCache {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws GrammarError when `deadline` passes first (`budget.time` is named in the message).
  TokenMaskCache(const AutomatonWalker& walker, const SortedVocabulary& vocabulary, Clock::time_point deadline,
                 const CompileBudget& budget);

  // For nodes with byte edges (the only ones on top of a position).
  const NodeTokenMask& at(std::uint32_t node) const { return masks_[node]; }
  std::span<const std::int32_t> ids(const NodeTokenMask& mask) const { return {ids_.data() + mask.begin, mask.count}; }
  std::span<const std::uint32_t> words(const NodeTokenMask& mask) const {
    return {words_.data() + mask.begin, mask.count};
  }
  std::span<const std::uint32_t> uncertain(const NodeTokenMask& mask) const {
    return {uncertain_.data() + mask.uncertain_begin, mask.uncertain_count};
  }

  // How a copy stored as a difference (mask.base != kSelf) differs from its base; a deferred copy's
  // difference is computed by the first call (thread-safe: matchers of one grammar share it).
  struct Difference {
    std::uint32_t base = 0;
    std::span<const std::int32_t> set_ids, clear_ids;  // token ids
    std::span<const std::uint32_t> extra_uncertain;    // sorted indices, ascending
  };
  Difference difference(const NodeTokenMask& mask) const;
  // Computes every deferred copy not computed yet, until `stop` is requested (CompiledGrammar runs it on a
  // thread of its own right after compiling, so that most are ready before a generation gets there).
  void complete_deferred(std::stop_token stop) const;
  bool has_deferred() const { return !deferred_.empty(); }

  struct Stats {
    std::size_t positions = 0;         // nodes with a cached mask
    std::size_t walks = 0;             // of them, computed by a walk of the vocabulary at compile time
    std::size_t deferred = 0;          // of them, left to their first use
    std::size_t uncertain_tokens = 0;  // summed over them
    std::size_t bytes = 0;             // storage
  };
  Stats stats() const;

 private:
  void store(std::uint32_t node, const std::vector<std::uint32_t>& accepted,
             const std::vector<std::uint32_t>& uncertain, const SortedVocabulary& vocabulary);
  void defer(std::uint32_t node, std::uint32_t base, std::shared_ptr<const std::vector<std::uint8_t>> base_class);
  void store_difference(std::uint32_t node, std::uint32_t base, const std::vector<std::int32_t>& set,
                        const std::vector<std::int32_t>& clear, const std::vector<std::uint32_t>& extra_uncertain);

  class JobRunner;
  // A deferred copy: what computing it needs, and once computed, its difference.
  struct DeferredSlot {
    std::uint32_t node = 0;
    std::shared_ptr<const std::vector<std::uint8_t>> base_class;  // per sorted token: 0 rejected, 1, 2
    mutable std::once_flag once;
    mutable std::vector<std::int32_t> set, clear;
    mutable std::vector<std::uint32_t> extra_uncertain;
  };
  void compute_deferred(const DeferredSlot& slot) const;

  const AutomatonWalker& walker_;
  const SortedVocabulary& vocabulary_;
  const ByteAutomaton& automaton_;
  ClassRunLengths runs_;  // shared by every walk
  std::size_t positions_ = 0;
  std::size_t walks_ = 0;
  std::vector<NodeTokenMask> masks_;  // per automaton node
  std::vector<std::int32_t> ids_;
  std::vector<std::uint32_t> words_;
  std::vector<std::uint32_t> uncertain_;
  std::vector<std::unique_ptr<DeferredSlot>> deferred_;
};

}  // namespace engine::grammar
