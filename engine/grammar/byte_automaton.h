#pragma once

// The compiled form of a grammar: every rule's body as a small graph over bytes (byte-range edges and
// rule-reference edges, no empty moves), plus what the matcher needs precomputed per node. A matcher
// position is a stack: the node it is at on top, below it the nodes to return to when each entered rule
// ends (engine/grammar/stack_pool.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/grammar/grammar_ast.h"

namespace engine::grammar {

// 256 bits, one per byte value.
struct ByteSet {
  std::array<std::uint64_t, 4> words{};
  bool test(std::uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void set(std::uint8_t b) { words[b >> 6] |= std::uint64_t{1} << (b & 63); }
  void set_range(std::uint8_t lo, std::uint8_t hi) {
    for (unsigned w = lo >> 6; w <= (hi >> 6u); ++w) {
      const unsigned first = w == (lo >> 6u) ? lo & 63u : 0;
      const unsigned last = w == (hi >> 6u) ? hi & 63u : 63;
      const std::uint64_t upto = last == 63 ? ~std::uint64_t{0} : (std::uint64_t{1} << (last + 1)) - 1;
      words[w] |= upto & ~((std::uint64_t{1} << first) - 1);
    }
  }
  // Returns whether anything was added.
  bool merge(const ByteSet& other) {
    bool changed = false;
    for (std::size_t i = 0; i < 4; ++i) {
      const std::uint64_t next = words[i] | other.words[i];
      changed |= next != words[i];
      words[i] = next;
    }
    return changed;
  }
};

struct ByteEdge {
  std::uint8_t lo = 0;
  std::uint8_t hi = 0;
  std::uint32_t target = 0;
};

// Enter `rule` at its start; when it ends, continue at `target`.
struct RefEdge {
  std::uint32_t rule = 0;
  std::uint32_t target = 0;
};

// Where a node leads without reading a byte: node `top` (which has byte edges) with `pushes` (return
// nodes, outermost first) stacked on top of the current frame.
struct ClosureEntry {
  std::uint32_t top = 0;
  std::uint32_t push_begin = 0;
  std::uint32_t push_count = 0;
};

struct ByteAutomaton {
  struct Node {
    std::uint32_t rule = 0;
    std::uint32_t byte_begin = 0, byte_end = 0;        // into byte_edges
    std::uint32_t ref_begin = 0, ref_end = 0;          // into ref_edges
    std::uint32_t closure_begin = 0, closure_end = 0;  // into closure
    bool final = false;                                // the rule's body may end here
    bool can_pop = false;  // ... or may end without another byte (through rules that match nothing)
    // Copies of one node in a counted repetition's copies (X{m,n} expands X once per count) share a group;
    // a copy agrees with every copy of its group whose agree_depth is at least its own on every byte
    // string of up to agree_depth bytes (they differ only in how many copies remain), so the mask cache
    // walks only longer tokens from it.
    std::uint32_t repeat_group = kNoGroup;
    std::uint32_t agree_depth = 0;
  };
  static constexpr std::uint32_t kNoGroup = UINT32_MAX;

  std::vector<Node> nodes;
  std::vector<ByteEdge> byte_edges;
  std::vector<RefEdge> ref_edges;
  std::vector<ClosureEntry> closure;
  std::vector<std::uint32_t> pushes;
  std::vector<ByteSet> first_bytes;  // per node: the bytes its own byte edges take

  std::vector<std::string> rule_names;
  std::vector<std::uint32_t> rule_start;  // per rule; kNoNode for rules nothing reaches
  std::vector<ByteSet> follow;            // per rule: the bytes that may come right after it ends
  std::uint32_t root_rule = 0;

  static constexpr std::uint32_t kNoNode = UINT32_MAX;

  bool has_bytes(std::uint32_t node) const { return nodes[node].byte_end > nodes[node].byte_begin; }
};

// Builds the automaton of `ast` (the bodies' graphs, then finish_automaton). Throws GrammarError when it
// would need more than `max_states` nodes, or for what finish_automaton refuses.
ByteAutomaton build_automaton(const GrammarAst& ast, std::size_t max_states);

// Completes freshly built rule graphs (nodes, edges, rule_start, rule_names, root_rule): drops what can
// never finish a match, then computes can_pop, closures, first_bytes and follow sets. Throws GrammarError
// when `root` matches no string at all, or when a rule is left-recursive (it could enter itself without
// reading a byte), naming the rules in the cycle.
void finish_automaton(ByteAutomaton& automaton);

}  // namespace engine::grammar
