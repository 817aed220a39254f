#pragma once

// Advancing sets of stack positions by one byte, the step every other part (matcher, mask cache, mask
// fill) repeats; and a stack of such sets by depth, so that walking byte strings in sorted order rolls
// back to the common prefix instead of starting over.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/stack_pool.h"

namespace engine::grammar {

// What else a step found besides the positions it produced.
struct StepEnds {
  bool grammar_ended = false;  // the whole grammar may end after this byte
  bool left_frame = false;     // a rule at the bottom of an unknown context ended (mask cache only)
  ByteSet exit_follow;         // when left_frame: bytes that may follow the rules that ended
};

class AutomatonWalker {
 public:
  explicit AutomatonWalker(const ByteAutomaton& automaton) : a_(automaton) {
    // A rule whose every reference returns to one node (other than root, which may also end the grammar)
    // always returns there, so the mask cache can follow it out of an unknown context. (A repetition such
    // as `item*` refers to its rule from two edges with one return node.)
    constexpr std::uint32_t kUnset = ByteAutomaton::kNoNode - 1;
    unique_return_.assign(a_.rule_start.size(), kUnset);
    for (const auto& ref : a_.ref_edges) {
      std::uint32_t& back = unique_return_[ref.rule];
      back = back == kUnset || back == ref.target ? ref.target : ByteAutomaton::kNoNode;
    }
    for (std::size_t r = 0; r < unique_return_.size(); ++r) {
      if (unique_return_[r] == kUnset || r == a_.root_rule) unique_return_[r] = ByteAutomaton::kNoNode;
    }
  }

  const ByteAutomaton& automaton() const { return a_; }

  // Appends where `node` (just reached, on top of `parent`) leads without reading a byte.
  void arrive(std::uint32_t node, std::uint32_t parent, std::vector<StackElement>& out, StackPool& pool, StepEnds& ends,
              std::uint32_t hops = 0) const {
    const ByteAutomaton::Node& n = a_.nodes[node];
    for (auto c = n.closure_begin; c < n.closure_end; ++c) {
      const ClosureEntry& entry = a_.closure[c];
      std::uint32_t below = parent;
      for (std::uint32_t p = 0; p < entry.push_count; ++p) below = pool.intern(a_.pushes[entry.push_begin + p], below);
      out.push_back({entry.top, below});
    }
    if (!n.can_pop) return;
    if (parent == StackPool::kRoot) {
      ends.grammar_ended = true;
    } else if (parent == StackPool::kUnknown) {
      const std::uint32_t back = unique_return_[n.rule];
      if (back != ByteAutomaton::kNoNode && hops < a_.rule_start.size()) {
        arrive(back, StackPool::kUnknown, out, pool, ends, hops + 1);
      } else {
        ends.left_frame = true;
        ends.exit_follow.merge(a_.follow[n.rule]);
      }
    } else {
      const StackPool::Frame frame = pool.frame(parent);
      arrive(frame.node, frame.parent, out, pool, ends, hops);
    }
  }

  // Appends the positions `in` reach by reading `byte`, deduplicated.
  void step(std::span<const StackElement> in, std::uint8_t byte, std::vector<StackElement>& out, StackPool& pool,
            StepEnds& ends) const {
    const std::size_t from = out.size();
    for (const StackElement& element : in) {
      if (!a_.first_bytes[element.node].test(byte)) continue;
      const ByteAutomaton::Node& n = a_.nodes[element.node];
      for (auto e = n.byte_begin; e < n.byte_end; ++e) {
        const ByteEdge& edge = a_.byte_edges[e];
        if (byte < edge.lo) break;  // sorted by lo
        if (byte <= edge.hi) arrive(edge.target, element.parent, out, pool, ends);
      }
    }
    dedupe(out, from);
  }

  static void dedupe(std::vector<StackElement>& elements, std::size_t from) {
    if (elements.size() - from < 2) return;
    std::sort(elements.begin() + static_cast<std::ptrdiff_t>(from), elements.end(),
              [](const StackElement& x, const StackElement& y) { return x.key() < y.key(); });
    elements.erase(std::unique(elements.begin() + static_cast<std::ptrdiff_t>(from), elements.end()), elements.end());
  }

 private:
  const ByteAutomaton& a_;
  std::vector<std::uint32_t> unique_return_;  // per rule
};

// Position sets by depth (bytes read): depth 0 is where the walk starts, depth d + 1 is depth d after
// one more byte. Walking strings in sorted order keeps the common prefix's depths.
class DepthStates {
 public:
  void reset(std::span<const StackElement> start, bool grammar_ended) {
    elements_.assign(start.begin(), start.end());
    begin_.assign({0, static_cast<std::uint32_t>(elements_.size())});
    ends_.assign(1, StepEnds{});
    ends_[0].grammar_ended = grammar_ended;
  }

  std::size_t depth() const { return ends_.size() - 1; }
  void truncate(std::size_t depth) {
    ends_.resize(depth + 1);
    begin_.resize(depth + 2);
    elements_.resize(begin_[depth + 1]);
  }
  std::span<const StackElement> at(std::size_t depth) const {
    return {elements_.data() + begin_[depth], elements_.data() + begin_[depth + 1]};
  }
  const StepEnds& ends(std::size_t depth) const { return ends_[depth]; }
  // Whether anything continues at `depth`: positions, or the grammar's end.
  bool alive(std::size_t depth) const { return begin_[depth + 1] > begin_[depth] || ends_[depth].grammar_ended; }

  // Computes depth() + 1 from depth() by reading `byte`.
  void push(const AutomatonWalker& walker, std::uint8_t byte, StackPool& pool) {
    const std::size_t d = depth();
    ends_.emplace_back();
    // step() appends to the vector holding its input: read from a copy, which an append cannot move.
    scratch_.assign(elements_.begin() + begin_[d], elements_.begin() + begin_[d + 1]);
    walker.step(scratch_, byte, elements_, pool, ends_.back());
    begin_.push_back(static_cast<std::uint32_t>(elements_.size()));
  }

 private:
  std::vector<StackElement> elements_;
  std::vector<std::uint32_t> begin_;  // begin_[d]..begin_[d + 1]: depth d's positions
  std::vector<StepEnds> ends_;
  std::vector<StackElement> scratch_;
};

}  // namespace engine::grammar
