#include "engine/grammar/token_mask_cache.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "engine/cpu/cpu_set.h"
#include "engine/grammar/class_run_lengths.h"
#include "engine/grammar/position_set_table.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

constexpr std::size_t kNodesPerThread = 64;
constexpr std::size_t kMaxThreads = 8;

// Walks every token from one node over an unknown context, sorting the tokens into accepted and
// uncertain (the rest are rejected). Steps go through a PositionSetTable, so a step some earlier trie node
// of the walk took already costs a lookup. The table starts empty for every walk: kept across walks it
// grew out of the caches and cost more than the steps it shared.
class NodeWalk {
 public:
  NodeWalk(const AutomatonWalker& walker, const SortedVocabulary& vocabulary, const ClassRunLengths& runs)
      : sets_(walker), vocabulary_(vocabulary), runs_(runs) {}

  // Only tokens longer than `min_depth` bytes are sorted (and subtrees with none are skipped).
  void run(std::uint32_t node, std::size_t min_depth, std::vector<std::uint32_t>& accepted,
           std::vector<std::uint32_t>& uncertain, const TokenMaskCache::Clock::time_point deadline,
           std::chrono::milliseconds budget) {
    accepted.clear();
    uncertain.clear();
    sets_.clear();
    // set_[d], ends_[d]: the positions after the current trie path's first d bytes, and what the step to
    // them found. maybe_[d]: a rule ended before depth d into the unknown context with a byte that may
    // follow it, so tokens through depth d may yet be accepted there.
    const std::size_t depths = vocabulary_.max_token_length() + 1;
    set_.resize(depths);
    ends_.resize(depths);
    maybe_.resize(depths);
    set_[0] = sets_.start(node);
    ends_[0] = kNoEnds;
    maybe_[0] = 0;
    const auto& trie = vocabulary_.trie();
    const std::size_t nodes = trie.size() - 1;
    std::size_t steps = 0;
    for (std::size_t i = 0; i < nodes;) {
      if ((++steps & 0xFFF) == 0 && TokenMaskCache::Clock::now() > deadline) {
        throw GrammarError("grammar: compiling took longer than the time budget of " + std::to_string(budget.count()) +
                           " ms (while precomputing token masks); simplify the grammar or raise the budget");
      }
      const SortedVocabulary::TrieNode& t = trie[i];
      if (vocabulary_.subtree_max_depth(static_cast<std::uint32_t>(i)) <= min_depth) {
        i = t.subtree_end;
        continue;
      }
      const std::size_t d = t.depth;
      const std::uint32_t before = ends_[d - 1];
      const bool maybe = maybe_[d - 1] != 0 || (before != kNoEnds && sets_.ends(before).left_frame &&
                                                sets_.ends(before).exit_follow.test(t.byte));
      const PositionSetTable::Step step = sets_.step(set_[d - 1], t.byte);
      set_[d] = step.next;
      ends_[d] = step.ends;
      maybe_[d] = maybe ? 1 : 0;
      const bool inside = !sets_.empty(step.next);
      const bool left = sets_.ends(step.ends).left_frame;
      const bool accept_here = inside || left;
      for (std::uint32_t k = t.token_begin; d > min_depth && k < t.token_begin + t.token_count; ++k) {
        if (accept_here) {
          accepted.push_back(k);
        } else if (maybe) {
          uncertain.push_back(k);
        }
      }
      // Positions sure to read more bytes of the kinds below this node than the subtree's tokens have (a
      // string's body, endlessly; a bounded string's copy, as many as copies are left) stay inside through the
      // whole subtree: every token in it is accepted, unvisited.
      const std::uint8_t below = vocabulary_.classes_below(static_cast<std::uint32_t>(i));
      if (inside && below != 0 &&
          vocabulary_.subtree_max_depth(static_cast<std::uint32_t>(i)) - d <=
              runs_.at(sets_.positions(step.next), below,
                       vocabulary_.utf8_states_below(static_cast<std::uint32_t>(i)))) {
        for (std::uint32_t k = t.token_begin + t.token_count;
             k < vocabulary_.subtree_tokens_end(static_cast<std::uint32_t>(i)); ++k) {
          if (vocabulary_.bytes(k).size() > min_depth) accepted.push_back(k);
        }
        i = t.subtree_end;
        continue;
      }
      if (!inside && !left) {
        // Nothing continues inside the rule: the subtree is uncertain or rejected as a whole.
        if (maybe) {
          for (std::uint32_t k = t.token_begin + t.token_count;
               k < vocabulary_.subtree_tokens_end(static_cast<std::uint32_t>(i)); ++k) {
            if (vocabulary_.bytes(k).size() > min_depth) uncertain.push_back(k);
          }
        }
        i = t.subtree_end;
      } else {
        ++i;
      }
    }
  }

 private:
  static constexpr std::uint32_t kNoEnds = UINT32_MAX;

  PositionSetTable sets_;
  const SortedVocabulary& vocabulary_;
  const ClassRunLengths& runs_;
  std::vector<std::uint32_t> set_, ends_;  // by depth
  std::vector<std::uint8_t> maybe_;
};

// What one thread computes at a time: a position alone, or every copy of one node in a counted repetition
// (the copy with the most copies left first; see ByteAutomaton::Node::repeat_group).
using Job = std::vector<std::uint32_t>;

std::vector<Job> plan_jobs(const ByteAutomaton& automaton) {
  std::vector<Job> jobs;
  std::map<std::uint32_t, std::size_t> group_job;
  for (std::uint32_t node = 0; node < automaton.nodes.size(); ++node) {
    if (!automaton.has_bytes(node)) continue;
    const std::uint32_t group = automaton.nodes[node].repeat_group;
    if (group == ByteAutomaton::kNoGroup) {
      jobs.push_back({node});
      continue;
    }
    const auto [it, added] = group_job.emplace(group, jobs.size());
    if (added) jobs.emplace_back();
    jobs[it->second].push_back(node);
  }
  for (Job& job : jobs) {
    std::stable_sort(job.begin(), job.end(), [&](std::uint32_t a, std::uint32_t b) {
      return automaton.nodes[a].agree_depth > automaton.nodes[b].agree_depth;
    });
  }
  return jobs;
}

// How copy `node` of a counted repetition differs from its group's base, whose class per sorted token is
// `base_class` (0 rejected, 1 accepted, 2 uncertain): tokens up to `agree` bytes are classed alike, so only
// the longer ones are walked and compared. `mark` is the vocabulary's size, all 0, and is left so.
struct CopyDifference {
  std::vector<std::int32_t> set, clear;        // token ids: accepted here and not by the base, and the reverse
  std::vector<std::uint32_t> extra_uncertain;  // sorted indices uncertain here and not for the base, ascending
};
// `base_accepted`: the base's accepted tokens, longest first (or every token, longest first).
void copy_difference(NodeWalk& walk, const SortedVocabulary& vocabulary, std::uint32_t node, std::size_t agree,
                     const std::vector<std::uint8_t>& base_class, std::span<const std::uint32_t> base_accepted,
                     std::vector<std::uint8_t>& mark, std::vector<std::uint32_t>& accepted,
                     std::vector<std::uint32_t>& uncertain, CopyDifference& out,
                     TokenMaskCache::Clock::time_point deadline, std::chrono::milliseconds budget) {
  walk.run(node, agree, accepted, uncertain, deadline, budget);
  out.set.clear();
  out.clear.clear();
  out.extra_uncertain.clear();
  for (const std::uint32_t k : accepted) {
    mark[k] = 1;
    if (base_class[k] != 1) out.set.push_back(vocabulary.id(k));
  }
  for (const std::uint32_t k : uncertain) {
    mark[k] = 2;
    if (base_class[k] != 2) out.extra_uncertain.push_back(k);
  }
  for (const std::uint32_t k : base_accepted) {
    if (vocabulary.bytes(k).size() <= agree) break;
    if (base_class[k] == 1 && mark[k] != 1) out.clear.push_back(vocabulary.id(k));
  }
  for (const std::uint32_t k : accepted) mark[k] = 0;
  for (const std::uint32_t k : uncertain) mark[k] = 0;
  std::sort(out.extra_uncertain.begin(), out.extra_uncertain.end());
}

}  // namespace

// Computes one job's masks: the first node by a whole walk, the others from it (below).
class TokenMaskCache::JobRunner {
 public:
  JobRunner(TokenMaskCache& cache, const AutomatonWalker& walker, const SortedVocabulary& vocabulary, std::mutex& mutex,
            Clock::time_point deadline, const CompileBudget& budget)
      : cache_(cache),
        walk_(walker, vocabulary, cache.runs_),
        vocabulary_(vocabulary),
        mutex_(mutex),
        deadline_(deadline),
        budget_(budget) {}

  void run(const Job& job) {
    const ByteAutomaton& automaton = cache_.automaton_;
    const std::uint32_t base = job.front();
    walk_.run(base, 0, accepted_, uncertain_, deadline_, budget_.time);
    {
      std::lock_guard lock(mutex_);
      cache_.store(base, accepted_, uncertain_, vocabulary_);
      ++cache_.walks_;
    }
    if (job.size() == 1) return;
    // The base's class per sorted token, kept by deferred copies for their first use; and how many of its
    // live tokens are longer than each length.
    auto base_class = std::make_shared<std::vector<std::uint8_t>>(vocabulary_.size(), 0);
    for (const std::uint32_t k : accepted_) (*base_class)[k] = 1;
    for (const std::uint32_t k : uncertain_) (*base_class)[k] = 2;
    live_longer_.assign(vocabulary_.max_token_length() + 2, 0);
    for (const auto* list : {&accepted_, &uncertain_}) {
      for (const std::uint32_t k : *list) ++live_longer_[vocabulary_.bytes(k).size() - 1];
    }
    for (std::size_t n = live_longer_.size() - 1; n-- > 0;) live_longer_[n] += live_longer_[n + 1];
    mark_.assign(vocabulary_.size(), 0);
    // The accepted tokens longest first, by their lengths' counts (a sort would cost more than the walk).
    by_length_.assign(vocabulary_.max_token_length() + 2, 0);
    for (const std::uint32_t k : accepted_)
      ++by_length_[vocabulary_.max_token_length() - vocabulary_.bytes(k).size() + 1];
    for (std::size_t n = 1; n < by_length_.size(); ++n) by_length_[n] += by_length_[n - 1];
    base_accepted_.resize(accepted_.size());
    for (const std::uint32_t k : accepted_) {
      base_accepted_[by_length_[vocabulary_.max_token_length() - vocabulary_.bytes(k).size()]++] = k;
    }
    const auto longest = vocabulary_.longest_first();
    for (std::size_t j = 1; j < job.size(); ++j) {
      const std::uint32_t node = job[j];
      const std::size_t agree = automaton.nodes[node].agree_depth;
      if (agree >= vocabulary_.max_token_length()) {
        // Every token is within the depth the copies agree on: the base's masks are this node's.
        std::lock_guard lock(mutex_);
        cache_.masks_[node] = cache_.masks_[base];
        continue;
      }
      const std::size_t longer = vocabulary_.longer_than(agree);
      if (longer <= budget_.uncertain_long_tokens) {
        difference_.set.clear();
        difference_.clear.clear();
        difference_.extra_uncertain.clear();
        for (const std::uint32_t k : longest.first(longer)) {
          if ((*base_class)[k] == 1) difference_.clear.push_back(vocabulary_.id(k));
          if ((*base_class)[k] != 2) difference_.extra_uncertain.push_back(k);
        }
        std::sort(difference_.extra_uncertain.begin(), difference_.extra_uncertain.end());
        std::lock_guard lock(mutex_);
        cache_.store_difference(node, base, difference_.set, difference_.clear, difference_.extra_uncertain);
        continue;
      }
      if (live_longer_[agree] > budget_.deferred_live_tokens) {
        std::lock_guard lock(mutex_);
        cache_.defer(node, base, base_class);
        continue;
      }
      copy_difference(walk_, vocabulary_, node, agree, *base_class, base_accepted_, mark_, accepted_, uncertain_,
                      difference_, deadline_, budget_.time);
      std::lock_guard lock(mutex_);
      cache_.store_difference(node, base, difference_.set, difference_.clear, difference_.extra_uncertain);
      ++cache_.walks_;
    }
  }

 private:
  TokenMaskCache& cache_;
  NodeWalk walk_;
  const SortedVocabulary& vocabulary_;
  std::mutex& mutex_;
  Clock::time_point deadline_;
  CompileBudget budget_;
  std::vector<std::uint32_t> accepted_, uncertain_, base_accepted_;
  CopyDifference difference_;
  std::vector<std::uint8_t> mark_;
  std::vector<std::size_t> live_longer_;  // [n]: the base's live tokens longer than n bytes
  std::vector<std::size_t> by_length_;
};

TokenMaskCache::TokenMaskCache(const AutomatonWalker& walker, const SortedVocabulary& vocabulary,
                               Clock::time_point deadline, const CompileBudget& budget)
    : walker_(walker),
      vocabulary_(vocabulary),
      automaton_(walker.automaton()),
      runs_(automaton_, vocabulary.max_token_length()) {
  masks_.resize(automaton_.nodes.size());
  const std::vector<Job> jobs = plan_jobs(automaton_);
  for (const Job& job : jobs) positions_ += job.size();
  // The jobs are independent: large grammars spread them over a few threads (a compilation runs off the
  // engine thread, and its positions can number in the thousands with counted repetitions), no more than the
  // CPUs this process may run on.
  const std::size_t threads = jobs.size() < kNodesPerThread
                                  ? 1
                                  : std::min<std::size_t>({std::max<std::size_t>(1, cpu::allowed_cpus().size()),
                                                           kMaxThreads, jobs.size() / kNodesPerThread});
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mutex;  // guards the stores and error
  const auto work = [&] {
    try {
      JobRunner runner(*this, walker, vocabulary, mutex, deadline, budget);
      for (std::size_t i = next++; i < jobs.size() && !failed; i = next++) runner.run(jobs[i]);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (auto& helper : helpers) helper.join();
  if (error) std::rethrow_exception(error);
}

void TokenMaskCache::defer(std::uint32_t node, std::uint32_t base,
                           std::shared_ptr<const std::vector<std::uint8_t>> base_class) {
  NodeTokenMask& mask = masks_[node];
  mask = masks_[base];
  mask.base = base;
  mask.deferred = static_cast<std::uint32_t>(deferred_.size());
  auto slot = std::make_unique<DeferredSlot>();
  slot->node = node;
  slot->base_class = std::move(base_class);
  deferred_.push_back(std::move(slot));
}

void TokenMaskCache::compute_deferred(const DeferredSlot& slot) const {
  NodeWalk walk(walker_, vocabulary_, runs_);
  std::vector<std::uint8_t> mark(vocabulary_.size(), 0);
  std::vector<std::uint32_t> accepted, uncertain;
  CopyDifference difference;
  // No deadline: the grammar was accepted at compile time, and this walk is bounded by the vocabulary.
  copy_difference(walk, vocabulary_, slot.node, automaton_.nodes[slot.node].agree_depth, *slot.base_class,
                  vocabulary_.longest_first(), mark, accepted, uncertain, difference, Clock::time_point::max(),
                  std::chrono::milliseconds{0});
  slot.set = std::move(difference.set);
  slot.clear = std::move(difference.clear);
  slot.extra_uncertain = std::move(difference.extra_uncertain);
}

void TokenMaskCache::complete_deferred(std::stop_token stop) const {
  for (const auto& slot : deferred_) {
    if (stop.stop_requested()) return;
    std::call_once(slot->once, [&] { compute_deferred(*slot); });
  }
}

TokenMaskCache::Difference TokenMaskCache::difference(const NodeTokenMask& mask) const {
  if (mask.deferred != NodeTokenMask::kSelf) {
    const DeferredSlot& slot = *deferred_[mask.deferred];
    std::call_once(slot.once, [&] { compute_deferred(slot); });
    return {mask.base, slot.set, slot.clear, slot.extra_uncertain};
  }
  return {mask.base,
          {ids_.data() + mask.set_begin, mask.set_count},
          {ids_.data() + mask.clear_begin, mask.clear_count},
          {uncertain_.data() + mask.extra_uncertain_begin, mask.extra_uncertain_count}};
}

void TokenMaskCache::store_difference(std::uint32_t node, std::uint32_t base, const std::vector<std::int32_t>& set,
                                      const std::vector<std::int32_t>& clear,
                                      const std::vector<std::uint32_t>& extra_uncertain) {
  NodeTokenMask& mask = masks_[node];
  mask = masks_[base];
  mask.base = base;
  mask.set_begin = static_cast<std::uint32_t>(ids_.size());
  mask.set_count = static_cast<std::uint32_t>(set.size());
  ids_.insert(ids_.end(), set.begin(), set.end());
  mask.clear_begin = static_cast<std::uint32_t>(ids_.size());
  mask.clear_count = static_cast<std::uint32_t>(clear.size());
  ids_.insert(ids_.end(), clear.begin(), clear.end());
  mask.extra_uncertain_begin = static_cast<std::uint32_t>(uncertain_.size());
  mask.extra_uncertain_count = static_cast<std::uint32_t>(extra_uncertain.size());
  uncertain_.insert(uncertain_.end(), extra_uncertain.begin(), extra_uncertain.end());
}

void TokenMaskCache::store(std::uint32_t node, const std::vector<std::uint32_t>& accepted,
                           const std::vector<std::uint32_t>& uncertain, const SortedVocabulary& vocabulary) {
  NodeTokenMask& mask = masks_[node];
  mask.uncertain_begin = static_cast<std::uint32_t>(uncertain_.size());
  mask.uncertain_count = static_cast<std::uint32_t>(uncertain.size());
  uncertain_.insert(uncertain_.end(), uncertain.begin(), uncertain.end());
  const std::size_t rejected = vocabulary.size() - accepted.size() - uncertain.size();
  const std::size_t words = vocabulary.bitmask_words();
  if (accepted.size() <= rejected && accepted.size() <= words) {
    mask.form = NodeTokenMask::Form::Accepted;
    mask.begin = static_cast<std::uint32_t>(ids_.size());
    for (const std::uint32_t k : accepted) ids_.push_back(vocabulary.id(k));
    mask.count = static_cast<std::uint32_t>(accepted.size());
  } else if (rejected <= words) {
    mask.form = NodeTokenMask::Form::Rejected;
    mask.begin = static_cast<std::uint32_t>(ids_.size());
    // Both lists ascend: the rejected tokens are the gaps between them.
    std::size_t a = 0, u = 0;
    for (std::uint32_t k = 0; k < vocabulary.size(); ++k) {
      if (a < accepted.size() && accepted[a] == k) {
        ++a;
      } else if (u < uncertain.size() && uncertain[u] == k) {
        ++u;
      } else {
        ids_.push_back(vocabulary.id(k));
      }
    }
    mask.count = static_cast<std::uint32_t>(rejected);
  } else {
    mask.form = NodeTokenMask::Form::Bitmask;
    mask.begin = static_cast<std::uint32_t>(words_.size());
    mask.count = static_cast<std::uint32_t>(words);
    words_.resize(words_.size() + words, 0);
    std::uint32_t* bits = words_.data() + mask.begin;
    for (const std::uint32_t k : accepted) {
      const auto id = static_cast<std::uint32_t>(vocabulary.id(k));
      bits[id / 32] |= std::uint32_t{1} << (id % 32);
    }
  }
}

TokenMaskCache::Stats TokenMaskCache::stats() const {
  Stats stats;
  stats.positions = positions_;
  stats.walks = walks_;
  stats.deferred = deferred_.size();
  for (const auto& mask : masks_) stats.uncertain_tokens += mask.uncertain_count + mask.extra_uncertain_count;
  // The deferred copies' base classes (shared within a group), not the differences they may compute later.
  std::set<const std::vector<std::uint8_t>*> counted;
  for (const auto& slot : deferred_) {
    if (counted.insert(slot->base_class.get()).second) stats.bytes += slot->base_class->size();
  }
  stats.bytes += masks_.size() * sizeof(NodeTokenMask) + ids_.size() * sizeof(std::int32_t) +
                 words_.size() * sizeof(std::uint32_t) + uncertain_.size() * sizeof(std::uint32_t);
  return stats;
}

}  // namespace engine::grammar
