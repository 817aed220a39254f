#include "engine/grammar/class_run_lengths.h"

#include <algorithm>
#include <array>

#include "engine/grammar/sorted_vocabulary.h"
#include "engine/grammar/utf8_states.h"

namespace engine::grammar {
namespace {

// The bytes of text, in classes whose bytes a UTF-8 decoder cannot tell apart: three ASCII ones (the
// kinds' own), continuation bytes in three ranges and lead bytes in eight (the narrowed ones alone, and
// the ranges the automaton's UTF-8 sequences split at them).
constexpr int kClasses = 14;
constexpr int kAsciiClasses = 3;

constexpr int class_of(std::uint8_t b) {
  if (b < 0x80) {
    const std::uint8_t bit = byte_class_bit(b);
    if (bit == byte_class_bit('a')) return 0;
    if (bit == byte_class_bit(' ')) return 1;
    if (bit == byte_class_bit('!')) return 2;
    return -1;  // '"', '\\', control characters: never in a run
  }
  if (b <= 0x8F) return 3;
  if (b <= 0x9F) return 4;
  if (b <= 0xBF) return 5;
  if (b >= 0xC2 && b <= 0xDF) return 6;
  if (b >= 0xF5 || b < 0xC2) return -1;  // C0, C1, F5-FF: never in UTF-8
  if (b == 0xE0) return 7;
  if (b >= 0xE1 && b <= 0xEC) return 8;
  if (b == 0xED) return 9;
  if (b <= 0xEF) return 10;
  if (b == 0xF0) return 11;
  if (b >= 0xF1 && b <= 0xF3) return 12;
  return 13;  // F4
}

// Kind k reads the ASCII classes up to k, and kind 3 every class.
constexpr bool kind_reads(int kind, int c) {
  return c < kAsciiClasses ? c <= kind : kind == 3;
}

// For each node and class: whether every byte of the class takes the node's edges to the same targets (so
// that the bytes cannot be told apart) and some at all ("sure"), and then the positions they surely reach
// within the node's frame (without entering or leaving a rule).
class ClassSteps {
 public:
  ClassSteps(const ByteAutomaton& a, const std::array<ByteSet, kClasses>& class_bytes) : sure_(a.nodes.size(), 0) {
    begin_.reserve(a.nodes.size() * kClasses + 1);
    std::vector<std::pair<std::uint32_t, ByteSet>> by_target;
    for (std::uint32_t node = 0; node < a.nodes.size(); ++node) {
      by_target.clear();
      const ByteAutomaton::Node& n = a.nodes[node];
      for (auto e = n.byte_begin; e < n.byte_end; ++e) {
        const ByteEdge& edge = a.byte_edges[e];
        auto it =
            std::find_if(by_target.begin(), by_target.end(), [&](const auto& p) { return p.first == edge.target; });
        if (it == by_target.end()) it = by_target.insert(by_target.end(), {edge.target, ByteSet{}});
        it->second.set_range(edge.lo, edge.hi);
      }
      for (int c = 0; c < kClasses; ++c) {
        begin_.push_back(static_cast<std::uint32_t>(positions_.size()));
        // Most nodes take none or only some of the class's bytes (a literal's, a multi-byte character's).
        if (!holds_all(a.first_bytes[node], class_bytes[c])) continue;
        bool uniform = true;
        const std::size_t from = positions_.size();
        for (const auto& [target, bytes] : by_target) {
          if (holds_none(bytes, class_bytes[c])) continue;
          if (!holds_all(bytes, class_bytes[c])) {
            uniform = false;
            break;
          }
          const ByteAutomaton::Node& t = a.nodes[target];
          for (auto k = t.closure_begin; k < t.closure_end; ++k) {
            if (a.closure[k].push_count == 0) positions_.push_back(a.closure[k].top);
          }
        }
        if (!uniform || positions_.size() == from) {
          positions_.resize(from);
          continue;
        }
        std::sort(positions_.begin() + static_cast<std::ptrdiff_t>(from), positions_.end());
        positions_.erase(std::unique(positions_.begin() + static_cast<std::ptrdiff_t>(from), positions_.end()),
                         positions_.end());
        sure_[node] |= static_cast<std::uint16_t>(1u << c);
      }
    }
    begin_.push_back(static_cast<std::uint32_t>(positions_.size()));
  }

  std::uint16_t sure(std::uint32_t node) const { return sure_[node]; }
  std::span<const std::uint32_t> positions(std::uint32_t node, int c) const {
    const std::size_t i = std::size_t{node} * kClasses + static_cast<std::size_t>(c);
    return {positions_.data() + begin_[i], positions_.data() + begin_[i + 1]};
  }

 private:
  static bool holds_all(const ByteSet& set, const ByteSet& klass) {
    for (std::size_t i = 0; i < 4; ++i) {
      if ((set.words[i] & klass.words[i]) != klass.words[i]) return false;
    }
    return true;
  }
  static bool holds_none(const ByteSet& set, const ByteSet& klass) {
    for (std::size_t i = 0; i < 4; ++i) {
      if ((set.words[i] & klass.words[i]) != 0) return false;
    }
    return true;
  }

  std::vector<std::uint16_t> sure_;  // bit per class
  std::vector<std::uint32_t> begin_;
  std::vector<std::uint32_t> positions_;
};

constexpr std::uint8_t kAsciiOnlyStates = 1u << kUtf8Boundary;

}  // namespace

ClassRunLengths::ClassRunLengths(const ByteAutomaton& automaton, std::size_t cap) : nodes_(automaton.nodes.size()) {
  const auto capped = static_cast<std::uint16_t>(std::min<std::size_t>(cap, kEndless - 1));
  std::array<ByteSet, kClasses> class_bytes{};
  std::array<std::uint8_t, kClasses> sample{};
  for (unsigned b = 256; b-- > 0;) {
    const int c = class_of(static_cast<std::uint8_t>(b));
    if (c < 0) continue;
    class_bytes[static_cast<std::size_t>(c)].set(static_cast<std::uint8_t>(b));
    sample[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(b);
  }
  // The decoder state after a class's byte in each state (kUtf8Invalid: the class cannot come there), and
  // which classes a kind reads in each state.
  std::array<std::array<std::uint8_t, kClasses>, kUtf8States> after{};
  std::array<std::array<std::uint16_t, kUtf8States>, kKinds> reads{};
  for (std::uint8_t q = 0; q < kUtf8States; ++q) {
    for (int c = 0; c < kClasses; ++c) {
      after[q][c] = utf8_next(q, sample[c]);
      for (int kind = 0; kind < kKinds; ++kind) {
        if (kind_reads(kind, c) && after[q][c] != kUtf8Invalid) reads[kind][q] |= static_cast<std::uint16_t>(1u << c);
      }
    }
  }
  const ClassSteps steps(automaton, class_bytes);

  // Readers: the nodes that surely read some class (the only ones with a length above 0).
  std::vector<std::uint32_t> readers;
  for (std::uint32_t n = 0; n < nodes_; ++n) {
    if (steps.sure(n) != 0) readers.push_back(n);
  }
  // Who reaches whom on which class (with repeats, one per class and successor).
  std::vector<std::uint32_t> from_begin(nodes_ + 1, 0);
  std::vector<std::pair<std::uint32_t, std::uint8_t>> from;
  for (const std::uint32_t n : readers) {
    for (int c = 0; c < kClasses; ++c) {
      for (const std::uint32_t p : steps.positions(n, c)) ++from_begin[p + 1];
    }
  }
  for (std::size_t n = 0; n < nodes_; ++n) from_begin[n + 1] += from_begin[n];
  from.resize(from_begin[nodes_]);
  {
    std::vector<std::uint32_t> fill(from_begin.begin(), from_begin.end() - 1);
    for (const std::uint32_t n : readers) {
      for (int c = 0; c < kClasses; ++c) {
        for (const std::uint32_t p : steps.positions(n, c)) from[fill[p]++] = {n, static_cast<std::uint8_t>(c)};
      }
    }
  }
  const auto reached_from = [&](std::uint32_t p) {
    return std::span(from.data() + from_begin[p], from.data() + from_begin[p + 1]);
  };
  // Only nodes from which the steps reach a cycle can read on endlessly: peel off, from the ends inwards,
  // the nodes whose every step leads to nodes already peeled (a bounded string's copies all go).
  std::vector<std::uint32_t> out_steps(nodes_, 0);
  std::vector<std::uint32_t> peeled;
  for (const std::uint32_t n : readers) {
    for (int c = 0; c < kClasses; ++c) {
      for (const std::uint32_t p : steps.positions(n, c)) out_steps[n] += steps.sure(p) != 0 ? 1 : 0;
    }
    if (out_steps[n] == 0) peeled.push_back(n);
  }
  for (std::size_t i = 0; i < peeled.size(); ++i) {
    for (const auto& [n, c] : reached_from(peeled[i])) {
      if (--out_steps[n] == 0) peeled.push_back(n);
    }
  }
  std::vector<std::uint32_t> cyclic;  // readers left
  std::vector<std::uint32_t> cyclic_index(nodes_, UINT32_MAX);
  for (const std::uint32_t n : readers) {
    if (out_steps[n] == 0) continue;
    cyclic_index[n] = static_cast<std::uint32_t>(cyclic.size());
    cyclic.push_back(n);
  }

  lengths_.assign(std::size_t{kLayers} * nodes_, 0);
  const std::size_t pairs = cyclic.size() * kUtf8States;
  std::vector<std::uint8_t> endless(pairs);
  std::vector<std::uint8_t> alive(pairs * kClasses);  // successors still endless, per pair and class (saturating)
  std::vector<std::uint32_t> dropped;                 // pairs: cyclic index * kUtf8States + state
  for (int kind = 0; kind < kKinds; ++kind) {
    const std::uint8_t states = kind == 3 ? kUtf8States : 1;  // the ASCII kinds: the boundary alone
    const auto layer = [&](std::uint8_t q) { return static_cast<std::size_t>(kind == 3 ? 3 + q : kind); };
    const auto pair_of = [&](std::uint32_t node, std::uint8_t q) {
      return std::size_t{cyclic_index[node]} * kUtf8States + q;
    };
    const auto is_endless = [&](std::uint32_t node, std::uint8_t q) {
      return cyclic_index[node] != UINT32_MAX && endless[pair_of(node, q)] == 1;
    };
    // Endless: the greatest set of (node, state) pairs whose every class that may come in the state surely
    // leads to a pair of the set (a string body's loop). Start from the pairs that surely read each such
    // class, then drop, until none is left to drop, those with a class that reaches no pair of the set.
    for (const std::uint32_t n : cyclic) {
      for (std::uint8_t q = 0; q < kUtf8States; ++q) {
        endless[pair_of(n, q)] = q < states && (reads[kind][q] & ~steps.sure(n)) == 0 ? 1 : 0;
      }
    }
    dropped.clear();
    for (const std::uint32_t n : cyclic) {
      for (std::uint8_t q = 0; q < states; ++q) {
        const std::size_t pair = pair_of(n, q);
        if (endless[pair] == 0) continue;
        bool keep = true;
        for (int c = 0; c < kClasses; ++c) {
          if (((reads[kind][q] >> c) & 1) == 0) continue;
          unsigned count = 0;
          for (const std::uint32_t p : steps.positions(n, c)) count += is_endless(p, after[q][c]) ? 1 : 0;
          alive[pair * kClasses + static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(std::min(count, 255u));
          keep &= count > 0;
        }
        if (!keep) endless[pair] = 2;  // dropped below, once every count is taken against the starting set
      }
    }
    for (std::size_t pair = 0; pair < pairs; ++pair) {
      if (endless[pair] == 2) {
        endless[pair] = 0;
        dropped.push_back(static_cast<std::uint32_t>(pair));
      }
    }
    while (!dropped.empty()) {
      const std::uint32_t gone = dropped.back();
      dropped.pop_back();
      const auto gone_state = static_cast<std::uint8_t>(gone % kUtf8States);
      for (const auto& [n, c] : reached_from(cyclic[gone / kUtf8States])) {
        if (cyclic_index[n] == UINT32_MAX) continue;
        for (std::uint8_t q = 0; q < states; ++q) {
          if (((reads[kind][q] >> c) & 1) == 0 || after[q][c] != gone_state) continue;
          const std::size_t pair = pair_of(n, q);
          // (A saturated count may reach 0 early: that drops more than it must, which only shortens runs.)
          if (endless[pair] == 1 && --alive[pair * kClasses + c] == 0) {
            endless[pair] = 0;
            dropped.push_back(static_cast<std::uint32_t>(pair));
          }
        }
      }
    }
    // The rest: a class's byte leads to its successors, the best of which goes on; the least over the
    // classes. Every pass leaves lower bounds, so a few are enough.
    for (const std::uint32_t n : cyclic) {
      for (std::uint8_t q = 0; q < states; ++q) {
        if (endless[pair_of(n, q)] == 1) lengths_[layer(q) * nodes_ + n] = kEndless;
      }
    }
    // Acyclic nodes in peeling order (each after every node it steps to: exact in one pass), then the
    // cyclic ones that are not endless, twice.
    for (const auto* order : {&peeled, &cyclic, &cyclic}) {
      for (const std::uint32_t n : *order) {
        for (std::uint8_t q = 0; q < states; ++q) {
          const std::uint16_t need = reads[kind][q];
          if ((need & ~steps.sure(n)) != 0) continue;  // some byte may end every position: 0
          std::uint16_t& length = lengths_[layer(q) * nodes_ + n];
          if (length == kEndless) continue;
          std::uint16_t least = capped;
          for (int c = 0; c < kClasses && least > 0; ++c) {
            if (((need >> c) & 1) == 0) continue;
            std::uint16_t best = 0;
            for (const std::uint32_t p : steps.positions(n, c)) {
              best = std::max(best, lengths_[layer(after[q][c]) * nodes_ + p]);
            }
            least = std::min<std::uint16_t>(least, best >= capped ? capped : static_cast<std::uint16_t>(best + 1));
          }
          length = std::max(length, least);
        }
      }
    }
  }
}

std::uint16_t ClassRunLengths::at(std::uint32_t node, std::uint8_t classes, std::uint8_t utf8_states) const {
  constexpr std::uint8_t kNever = byte_class_bit('"') | byte_class_bit('\\') | byte_class_bit('\n');
  constexpr std::uint8_t kNonAscii = byte_class_bit(0x80) | byte_class_bit(0xC3);
  if ((classes & kNever) != 0) return 0;
  if (classes == 0) return kEndless;
  if ((classes & kNonAscii) == 0) {
    const int kind = (classes & byte_class_bit('!')) != 0 ? 2 : (classes & byte_class_bit(' ')) != 0 ? 1 : 0;
    return (utf8_states & kAsciiOnlyStates) != 0 ? lengths_[static_cast<std::size_t>(kind) * nodes_ + node] : 0;
  }
  std::uint16_t best = 0;
  for (std::uint8_t q = 0; q < kUtf8States; ++q) {
    if (((utf8_states >> q) & 1) != 0) best = std::max(best, lengths_[(3u + q) * nodes_ + node]);
  }
  return best;
}

std::uint16_t ClassRunLengths::at(std::span<const StackElement> positions, std::uint8_t classes,
                                  std::uint8_t utf8_states) const {
  std::uint16_t best = 0;
  for (const StackElement& e : positions) best = std::max(best, at(e.node, classes, utf8_states));
  return best;
}

}  // namespace engine::grammar
