#include "engine/grammar/token_mask_cache.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

constexpr std::size_t kNodesPerThread = 64;
constexpr std::size_t kMaxThreads = 8;

// Walks every token from one node over an unknown context, sorting the tokens into accepted and
// uncertain (the rest are rejected).
class NodeWalk {
 public:
  NodeWalk(const AutomatonWalker& walker, const SortedVocabulary& vocabulary)
      : walker_(walker), vocabulary_(vocabulary) {}

  void run(std::uint32_t node, std::vector<std::uint32_t>& accepted, std::vector<std::uint32_t>& uncertain,
           const TokenMaskCache::Clock::time_point deadline, std::chrono::milliseconds budget) {
    accepted.clear();
    uncertain.clear();
    pool_.clear();
    const StackElement start{node, StackPool::kUnknown};
    states_.reset({&start, 1}, false);
    // maybe_[d]: a rule ended before depth d into the unknown context with a byte that may follow it, so
    // tokens through depth d may yet be accepted there.
    maybe_.assign(1, false);
    const auto& trie = vocabulary_.trie();
    const std::size_t nodes = trie.size() - 1;
    std::size_t steps = 0;
    for (std::size_t i = 0; i < nodes;) {
      if ((++steps & 0xFFF) == 0 && TokenMaskCache::Clock::now() > deadline) {
        throw GrammarError("grammar: compiling took longer than the time budget of " + std::to_string(budget.count()) +
                           " ms (while precomputing token masks); simplify the grammar or raise the budget");
      }
      const SortedVocabulary::TrieNode& t = trie[i];
      const std::size_t d = t.depth;
      states_.truncate(d - 1);
      maybe_.resize(d);
      const StepEnds& before = states_.ends(d - 1);
      const bool maybe = maybe_[d - 1] || (before.left_frame && before.exit_follow.test(t.byte));
      states_.push(walker_, t.byte, pool_);
      maybe_.push_back(maybe);
      const bool inside = !states_.at(d).empty();
      const bool left = states_.ends(d).left_frame;
      const bool accept_here = inside || left;
      for (std::uint32_t k = t.token_begin; k < t.token_begin + t.token_count; ++k) {
        if (accept_here) {
          accepted.push_back(k);
        } else if (maybe) {
          uncertain.push_back(k);
        }
      }
      if (!inside && !left) {
        // Nothing continues inside the rule: the subtree is uncertain or rejected as a whole.
        if (maybe) {
          for (std::uint32_t k = t.token_begin + t.token_count;
               k < vocabulary_.subtree_tokens_end(static_cast<std::uint32_t>(i)); ++k) {
            uncertain.push_back(k);
          }
        }
        i = t.subtree_end;
      } else {
        ++i;
      }
    }
  }

 private:
  const AutomatonWalker& walker_;
  const SortedVocabulary& vocabulary_;
  StackPool pool_;
  DepthStates states_;
  std::vector<bool> maybe_;
};

}  // namespace

TokenMaskCache::TokenMaskCache(const AutomatonWalker& walker, const SortedVocabulary& vocabulary,
                               Clock::time_point deadline, std::chrono::milliseconds budget) {
  const ByteAutomaton& automaton = walker.automaton();
  masks_.resize(automaton.nodes.size());
  std::vector<std::uint32_t> nodes;
  for (std::uint32_t node = 0; node < automaton.nodes.size(); ++node) {
    if (automaton.has_bytes(node)) nodes.push_back(node);
  }
  positions_ = nodes.size();
  // The nodes' walks are independent: large grammars spread them over a few threads (a compilation runs
  // off the engine thread, and its positions can number in the thousands with counted repetitions).
  const std::size_t threads = nodes.size() < kNodesPerThread
                                  ? 1
                                  : std::min<std::size_t>({std::max(1u, std::thread::hardware_concurrency()),
                                                           kMaxThreads, nodes.size() / kNodesPerThread});
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mutex;  // guards store() and error
  const auto work = [&] {
    try {
      NodeWalk walk(walker, vocabulary);
      std::vector<std::uint32_t> accepted, uncertain;
      for (std::size_t i = next++; i < nodes.size() && !failed; i = next++) {
        walk.run(nodes[i], accepted, uncertain, deadline, budget);
        std::lock_guard lock(mutex);
        store(nodes[i], accepted, uncertain, vocabulary);
      }
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
  for (const auto& mask : masks_) stats.uncertain_tokens += mask.uncertain_count;
  stats.bytes = masks_.size() * sizeof(NodeTokenMask) + ids_.size() * sizeof(std::int32_t) +
                words_.size() * sizeof(std::uint32_t) + uncertain_.size() * sizeof(std::uint32_t);
  return stats;
}

}  // namespace engine::grammar
