// Rule bodies (expression trees) to byte graphs: a Thompson construction with empty moves, then the empty
// moves removed per rule so that every node's edges read a byte or enter a rule.

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/utf8_ranges.h"

namespace engine::grammar {
namespace {

struct RawNode {
  std::vector<ByteEdge> bytes;
  std::vector<RefEdge> refs;
  std::vector<std::uint32_t> empty;  // moves that read nothing
  std::uint32_t repeat_group = ByteAutomaton::kNoGroup;
  std::uint32_t agree_depth = 0;
};

std::size_t utf8_length(char32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

// The fewest bytes `expr` matches, given the fewest of each rule (`rule_least`, saturating at kMany).
constexpr std::size_t kMany = std::size_t{1} << 32;
std::size_t min_bytes(const GrammarExpr& expr, const std::vector<std::size_t>& rule_least) {
  switch (expr.kind) {
    case GrammarExpr::Kind::Literal: return expr.literal.size();
    case GrammarExpr::Kind::Class: return expr.ranges.empty() ? 0 : utf8_length(expr.ranges.front().lo);
    case GrammarExpr::Kind::RuleRef: return rule_least[expr.rule];
    case GrammarExpr::Kind::Sequence: {
      std::size_t sum = 0;
      for (const auto& child : expr.children) sum = std::min(kMany, sum + min_bytes(child, rule_least));
      return sum;
    }
    case GrammarExpr::Kind::Alternation: {
      std::size_t least = kMany;
      for (const auto& child : expr.children) least = std::min(least, min_bytes(child, rule_least));
      return least;
    }
    case GrammarExpr::Kind::Repeat:
      return std::min(kMany, std::size_t{expr.min} * min_bytes(expr.children.front(), rule_least));
  }
  return 0;
}

// The fewest bytes each rule matches: a fixed point from "no string yet" (kMany) downwards, so a rule through
// other rules (recursive ones included) gets its true least; one that matches nothing stays at kMany.
std::vector<std::size_t> rule_min_bytes(const GrammarAst& ast) {
  std::vector<std::size_t> least(ast.bodies.size(), kMany);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < ast.bodies.size(); ++r) {
      const std::size_t next = min_bytes(ast.bodies[r], least);
      if (next < least[r]) {
        least[r] = next;
        changed = true;
      }
    }
  }
  return least;
}

class RuleGraphBuilder {
 public:
  RuleGraphBuilder(std::size_t& states, std::size_t max_states, std::uint32_t& next_group,
                   const std::vector<std::size_t>& rule_least)
      : states_(states), max_states_(max_states), next_group_(next_group), rule_least_(rule_least) {}

  std::vector<RawNode>& nodes() { return nodes_; }

  std::uint32_t add() {
    if (++states_ > max_states_) {
      throw GrammarError("grammar: over the compile budget of " + std::to_string(max_states_) +
                         " automaton states (large repetition counts expand into copies; use * or + instead, "
                         "or raise the state budget)");
    }
    nodes_.emplace_back();
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }

  // Appends the graph of `expr` starting at `from`; returns the node where it ends.
  std::uint32_t build(const GrammarExpr& expr, std::uint32_t from) {
    switch (expr.kind) {
      case GrammarExpr::Kind::Literal: {
        std::uint32_t at = from;
        for (const char c : expr.literal) {
          const std::uint32_t next = add();
          const auto b = static_cast<std::uint8_t>(c);
          nodes_[at].bytes.push_back({b, b, next});
          at = next;
        }
        return at;
      }
      case GrammarExpr::Kind::Class: return build_class(expr.ranges, from);
      case GrammarExpr::Kind::RuleRef: {
        const std::uint32_t next = add();
        nodes_[from].refs.push_back({static_cast<std::uint32_t>(expr.rule), next});
        return next;
      }
      case GrammarExpr::Kind::Sequence: {
        std::uint32_t at = from;
        for (const auto& child : expr.children) at = build(child, at);
        return at;
      }
      case GrammarExpr::Kind::Alternation: {
        const std::uint32_t end = add();
        for (const auto& child : expr.children) {
          const std::uint32_t start = add();
          nodes_[from].empty.push_back(start);
          const std::uint32_t child_end = build(child, start);
          nodes_[child_end].empty.push_back(end);
        }
        return end;
      }
      case GrammarExpr::Kind::Repeat: return build_repeat(expr, from);
    }
    return from;
  }

 private:
  // A trie of the classes' UTF-8 sequences: sequences sharing a leading byte range share the node after it.
  std::uint32_t build_class(const std::vector<CodePointRange>& ranges, std::uint32_t from) {
    const std::uint32_t end = add();
    const std::size_t first_inner = nodes_.size();
    for (const auto& sequence : utf8_sequences(ranges)) {
      std::uint32_t at = from;
      for (std::size_t i = 0; i + 1 < sequence.length; ++i) {
        const auto [lo, hi] = sequence.bytes[i];
        std::uint32_t next = UINT32_MAX;
        for (const auto& edge : nodes_[at].bytes) {
          if (edge.lo == lo && edge.hi == hi && edge.target >= first_inner) next = edge.target;
        }
        if (next == UINT32_MAX) {
          next = add();
          nodes_[at].bytes.push_back({lo, hi, next});
        }
        at = next;
      }
      const auto [lo, hi] = sequence.bytes[sequence.length - 1];
      nodes_[at].bytes.push_back({lo, hi, end});
    }
    return end;
  }

  // Builds one copy of `body` after `at`, its nodes in group `group` + (offset in the copy) unless an inner
  // repetition grouped them already, agreeing for `agree` bytes (see ByteAutomaton::Node::repeat_group).
  // The first copy of a part allocates the part's groups.
  std::uint32_t build_copy(const GrammarExpr& body, std::uint32_t at, std::uint32_t& group, std::size_t agree) {
    const std::size_t first = nodes_.size();
    const std::uint32_t end = build(body, at);
    if (group == ByteAutomaton::kNoGroup) {
      group = next_group_;
      next_group_ += static_cast<std::uint32_t>(nodes_.size() - first);
    }
    for (std::size_t n = first; n < nodes_.size() && agree > 0; ++n) {
      if (nodes_[n].repeat_group != ByteAutomaton::kNoGroup) continue;
      nodes_[n].repeat_group = group + static_cast<std::uint32_t>(n - first);
      nodes_[n].agree_depth = static_cast<std::uint32_t>(std::min<std::size_t>(agree, UINT32_MAX));
    }
    return end;
  }

  std::uint32_t build_repeat(const GrammarExpr& expr, std::uint32_t from) {
    const GrammarExpr& body = expr.children.front();
    // Copies differ only in the copies left after them, each at least `least` bytes: a mandatory copy with
    // `left` more to go agrees with one with more on strings shorter than left * least bytes (only then can
    // it leave the mandatory part); an optional one on strings up to left * least bytes (only longer ones
    // can start a copy it has no room for).
    const std::size_t least = min_bytes(body, rule_least_);
    std::uint32_t mandatory = ByteAutomaton::kNoGroup, optional = ByteAutomaton::kNoGroup;
    std::uint32_t at = from;
    for (std::uint32_t i = 0; i < expr.min; ++i) {
      const std::size_t left = expr.min - 1 - i;
      at = build_copy(body, at, mandatory, left * least == 0 ? 0 : left * least - 1);
    }
    if (expr.max == GrammarExpr::kUnbounded) {
      const std::uint32_t loop = add();
      nodes_[at].empty.push_back(loop);
      const std::uint32_t start = add();
      nodes_[loop].empty.push_back(start);
      const std::uint32_t body_end = build(body, start);
      nodes_[body_end].empty.push_back(loop);
      return loop;
    }
    if (expr.max == expr.min) return at;
    const std::uint32_t end = add();
    nodes_[at].empty.push_back(end);
    for (std::uint32_t i = expr.min; i < expr.max; ++i) {
      at = build_copy(body, at, optional, std::size_t{expr.max - 1 - i} * least);
      nodes_[at].empty.push_back(end);
    }
    return end;
  }

  std::size_t& states_;
  std::size_t max_states_;
  std::vector<RawNode> nodes_;
  std::uint32_t& next_group_;                   // the next unused repeat group, across the grammar's rules
  const std::vector<std::size_t>& rule_least_;  // per rule, the fewest bytes it matches
};

// Merges sorted byte edges with one target whose ranges touch; drops duplicates.
void normalize_byte_edges(std::vector<ByteEdge>& edges) {
  std::sort(edges.begin(), edges.end(),
            [](const ByteEdge& a, const ByteEdge& b) { return std::tie(a.target, a.lo) < std::tie(b.target, b.lo); });
  std::vector<ByteEdge> merged;
  for (const auto& edge : edges) {
    if (!merged.empty() && merged.back().target == edge.target && edge.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, edge.hi);
    } else {
      merged.push_back(edge);
    }
  }
  std::sort(merged.begin(), merged.end(), [](const ByteEdge& a, const ByteEdge& b) { return a.lo < b.lo; });
  edges = std::move(merged);
}

// Removes the empty moves of one rule's graph (start node 0, end node `end`) and appends what is reachable
// to `automaton` as rule `rule`; returns the start's global id.
std::uint32_t append_rule(ByteAutomaton& automaton, std::vector<RawNode>& raw, std::uint32_t end, std::uint32_t rule) {
  const std::uint32_t base = static_cast<std::uint32_t>(automaton.nodes.size());
  std::vector<std::uint32_t> local(raw.size(), UINT32_MAX);  // raw node -> index among this rule's nodes
  std::vector<std::uint32_t> order;                          // raw nodes kept, in local order
  const auto keep = [&](std::uint32_t n) {
    if (local[n] == UINT32_MAX) {
      local[n] = static_cast<std::uint32_t>(order.size());
      order.push_back(n);
    }
    return base + local[n];
  };
  keep(0);
  std::vector<std::uint32_t> seen(raw.size(), UINT32_MAX);
  std::vector<std::uint32_t> pending;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::uint32_t n = order[i];
    ByteAutomaton::Node node;
    node.rule = rule;
    node.repeat_group = raw[n].repeat_group;
    node.agree_depth = raw[n].agree_depth;
    std::vector<ByteEdge> bytes;
    std::vector<RefEdge> refs;
    pending.assign(1, n);
    seen[n] = n;
    while (!pending.empty()) {
      const std::uint32_t m = pending.back();
      pending.pop_back();
      if (m == end) node.final = true;
      for (const auto& edge : raw[m].bytes) bytes.push_back({edge.lo, edge.hi, keep(edge.target)});
      for (const auto& edge : raw[m].refs) refs.push_back({edge.rule, keep(edge.target)});
      for (const std::uint32_t next : raw[m].empty) {
        if (seen[next] != n) {
          seen[next] = n;
          pending.push_back(next);
        }
      }
    }
    normalize_byte_edges(bytes);
    std::sort(refs.begin(), refs.end(), [](const RefEdge& a, const RefEdge& b) {
      return std::tie(a.rule, a.target) < std::tie(b.rule, b.target);
    });
    refs.erase(std::unique(refs.begin(), refs.end(),
                           [](const RefEdge& a, const RefEdge& b) { return a.rule == b.rule && a.target == b.target; }),
               refs.end());
    node.byte_begin = static_cast<std::uint32_t>(automaton.byte_edges.size());
    automaton.byte_edges.insert(automaton.byte_edges.end(), bytes.begin(), bytes.end());
    node.byte_end = static_cast<std::uint32_t>(automaton.byte_edges.size());
    node.ref_begin = static_cast<std::uint32_t>(automaton.ref_edges.size());
    automaton.ref_edges.insert(automaton.ref_edges.end(), refs.begin(), refs.end());
    node.ref_end = static_cast<std::uint32_t>(automaton.ref_edges.size());
    automaton.nodes.push_back(node);
  }
  return base;
}

}  // namespace

ByteAutomaton build_automaton(const GrammarAst& ast, std::size_t max_states) {
  ByteAutomaton automaton;
  automaton.rule_names = ast.names;
  automaton.root_rule = static_cast<std::uint32_t>(ast.root);
  automaton.rule_start.resize(ast.bodies.size());
  std::size_t states = 0;
  std::uint32_t next_group = 0;
  const std::vector<std::size_t> rule_least = rule_min_bytes(ast);
  for (std::size_t rule = 0; rule < ast.bodies.size(); ++rule) {
    RuleGraphBuilder builder(states, max_states, next_group, rule_least);
    const std::uint32_t start = builder.add();
    const std::uint32_t end = builder.build(ast.bodies[rule], start);
    automaton.rule_start[rule] = append_rule(automaton, builder.nodes(), end, static_cast<std::uint32_t>(rule));
  }
  finish_automaton(automaton);
  return automaton;
}

}  // namespace engine::grammar
