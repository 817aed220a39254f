// What the matcher needs to know about the rule graphs before it runs: which parts can finish at all
// (the rest is dropped, so every position the matcher reaches is a viable prefix), which rules match the
// empty string, where each node leads without reading a byte, and which bytes may follow each rule.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

using Node = ByteAutomaton::Node;

// Marks the nodes from which their rule can reach its end (through byte edges and rules that can finish
// themselves), and the rules whose start can.
void find_productive(const ByteAutomaton& a, std::vector<bool>& node_ok, std::vector<bool>& rule_ok) {
  node_ok.assign(a.nodes.size(), false);
  rule_ok.assign(a.rule_start.size(), false);
  bool changed = true;
  while (changed) {
    changed = false;
    // Bodies are built front to back, so walking backwards settles chains in one pass.
    for (std::size_t i = a.nodes.size(); i-- > 0;) {
      if (node_ok[i]) continue;
      const Node& node = a.nodes[i];
      bool ok = node.final;
      for (auto e = node.byte_begin; !ok && e < node.byte_end; ++e) ok = node_ok[a.byte_edges[e].target];
      for (auto e = node.ref_begin; !ok && e < node.ref_end; ++e) {
        ok = rule_ok[a.ref_edges[e].rule] && node_ok[a.ref_edges[e].target];
      }
      if (ok) {
        node_ok[i] = true;
        changed = true;
      }
    }
    for (std::size_t r = 0; r < a.rule_start.size(); ++r) {
      if (!rule_ok[r] && node_ok[a.rule_start[r]]) {
        rule_ok[r] = true;
        changed = true;
      }
    }
  }
}

// Keeps only productive nodes reachable from root's start, renumbered, with edges to anything else removed.
void prune(ByteAutomaton& a) {
  std::vector<bool> node_ok, rule_ok;
  find_productive(a, node_ok, rule_ok);
  if (!rule_ok[a.root_rule]) {
    std::string never;
    for (std::size_t r = 0; r < rule_ok.size(); ++r) {
      if (!rule_ok[r]) never += (never.empty() ? "" : ", ") + ("\"" + a.rule_names[r] + "\"");
    }
    throw GrammarError(
        "grammar: rule \"root\" matches no string: every way through it needs a rule that can "
        "never finish (rules that cannot finish: " +
        never + "; a rule that only refers to itself, or a class that matches nothing)");
  }
  std::vector<std::uint32_t> renumber(a.nodes.size(), ByteAutomaton::kNoNode);
  std::vector<std::uint32_t> order;
  const auto reach = [&](std::uint32_t n) {
    if (renumber[n] == ByteAutomaton::kNoNode) {
      renumber[n] = static_cast<std::uint32_t>(order.size());
      order.push_back(n);
    }
  };
  reach(a.rule_start[a.root_rule]);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Node& node = a.nodes[order[i]];
    for (auto e = node.byte_begin; e < node.byte_end; ++e) {
      if (node_ok[a.byte_edges[e].target]) reach(a.byte_edges[e].target);
    }
    for (auto e = node.ref_begin; e < node.ref_end; ++e) {
      const RefEdge& ref = a.ref_edges[e];
      if (rule_ok[ref.rule] && node_ok[ref.target]) {
        reach(a.rule_start[ref.rule]);
        reach(ref.target);
      }
    }
  }
  ByteAutomaton out;
  out.rule_names = std::move(a.rule_names);
  out.root_rule = a.root_rule;
  out.rule_start.assign(a.rule_start.size(), ByteAutomaton::kNoNode);
  for (std::size_t r = 0; r < a.rule_start.size(); ++r) {
    if (renumber[a.rule_start[r]] != ByteAutomaton::kNoNode) out.rule_start[r] = renumber[a.rule_start[r]];
  }
  for (const std::uint32_t old : order) {
    Node node = a.nodes[old];
    const Node& from = a.nodes[old];
    node.byte_begin = static_cast<std::uint32_t>(out.byte_edges.size());
    for (auto e = from.byte_begin; e < from.byte_end; ++e) {
      const ByteEdge& edge = a.byte_edges[e];
      if (node_ok[edge.target]) out.byte_edges.push_back({edge.lo, edge.hi, renumber[edge.target]});
    }
    node.byte_end = static_cast<std::uint32_t>(out.byte_edges.size());
    node.ref_begin = static_cast<std::uint32_t>(out.ref_edges.size());
    for (auto e = from.ref_begin; e < from.ref_end; ++e) {
      const RefEdge& ref = a.ref_edges[e];
      if (rule_ok[ref.rule] && node_ok[ref.target]) out.ref_edges.push_back({ref.rule, renumber[ref.target]});
    }
    node.ref_end = static_cast<std::uint32_t>(out.ref_edges.size());
    out.nodes.push_back(node);
  }
  a = std::move(out);
}

// can_pop per node, and which rules match the empty string.
std::vector<bool> find_can_pop(ByteAutomaton& a) {
  std::vector<bool> nullable(a.rule_start.size(), false);
  bool changed = true;
  while (changed) {
    changed = false;
    for (std::size_t i = a.nodes.size(); i-- > 0;) {
      Node& node = a.nodes[i];
      if (node.can_pop) continue;
      bool pop = node.final;
      for (auto e = node.ref_begin; !pop && e < node.ref_end; ++e) {
        pop = nullable[a.ref_edges[e].rule] && a.nodes[a.ref_edges[e].target].can_pop;
      }
      if (pop) {
        node.can_pop = true;
        changed = true;
      }
    }
    for (std::size_t r = 0; r < a.rule_start.size(); ++r) {
      if (!nullable[r] && a.rule_start[r] != ByteAutomaton::kNoNode && a.nodes[a.rule_start[r]].can_pop) {
        nullable[r] = true;
        changed = true;
      }
    }
  }
  return nullable;
}

// A rule that can enter itself before reading a byte would make the stack grow without bound.
void refuse_left_recursion(const ByteAutomaton& a, const std::vector<bool>& nullable) {
  const std::size_t rules = a.rule_start.size();
  std::vector<std::vector<std::uint32_t>> enters(rules);  // rules entered before a byte is read
  for (std::size_t r = 0; r < rules; ++r) {
    if (a.rule_start[r] == ByteAutomaton::kNoNode) continue;
    std::vector<std::uint32_t> todo{a.rule_start[r]};
    std::vector<std::uint32_t> seen{a.rule_start[r]};
    while (!todo.empty()) {
      const Node& node = a.nodes[todo.back()];
      todo.pop_back();
      for (auto e = node.ref_begin; e < node.ref_end; ++e) {
        const RefEdge& ref = a.ref_edges[e];
        enters[r].push_back(ref.rule);
        if (nullable[ref.rule] && std::find(seen.begin(), seen.end(), ref.target) == seen.end()) {
          seen.push_back(ref.target);
          todo.push_back(ref.target);
        }
      }
    }
  }
  enum class Mark { New, Open, Done };
  std::vector<Mark> mark(rules, Mark::New);
  std::vector<std::uint32_t> path;
  const auto visit = [&](const auto& self, std::uint32_t r) -> void {
    mark[r] = Mark::Open;
    path.push_back(r);
    for (const std::uint32_t next : enters[r]) {
      if (mark[next] == Mark::Open) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) {
          cycle += "\"" + a.rule_names[*it] + "\" -> ";
        }
        throw GrammarError("grammar: rule \"" + a.rule_names[next] + "\" is left-recursive (" + cycle + "\"" +
                           a.rule_names[next] +
                           "\" before any character is read); rewrite it with repetition, e.g. "
                           "list ::= item (\",\" item)* instead of list ::= list \",\" item | item");
      }
      if (mark[next] == Mark::New) self(self, next);
    }
    path.pop_back();
    mark[r] = Mark::Done;
  };
  for (std::uint32_t r = 0; r < rules; ++r) {
    if (mark[r] == Mark::New && a.rule_start[r] != ByteAutomaton::kNoNode) visit(visit, r);
  }
}

// Per node, every (node with byte edges, pushed return nodes) reachable by entering rules or stepping over
// rules that match nothing. Finite because left recursion was refused.
void compute_closures(ByteAutomaton& a, const std::vector<bool>& nullable) {
  std::map<std::pair<std::uint32_t, std::vector<std::uint32_t>>, bool> seen;
  std::vector<std::uint32_t> pushes;
  const auto visit = [&](const auto& self, std::uint32_t n) -> void {
    if (!seen.emplace(std::make_pair(n, pushes), true).second) return;
    if (a.has_bytes(n)) {
      a.closure.push_back({n, static_cast<std::uint32_t>(a.pushes.size()), static_cast<std::uint32_t>(pushes.size())});
      a.pushes.insert(a.pushes.end(), pushes.begin(), pushes.end());
    }
    const Node node = a.nodes[n];
    for (auto e = node.ref_begin; e < node.ref_end; ++e) {
      const RefEdge ref = a.ref_edges[e];
      pushes.push_back(ref.target);
      self(self, a.rule_start[ref.rule]);
      pushes.pop_back();
      if (nullable[ref.rule]) self(self, ref.target);
    }
  };
  for (std::uint32_t n = 0; n < a.nodes.size(); ++n) {
    seen.clear();
    a.nodes[n].closure_begin = static_cast<std::uint32_t>(a.closure.size());
    visit(visit, n);
    a.nodes[n].closure_end = static_cast<std::uint32_t>(a.closure.size());
  }
}

void compute_byte_sets(ByteAutomaton& a) {
  a.first_bytes.assign(a.nodes.size(), ByteSet{});
  for (std::size_t n = 0; n < a.nodes.size(); ++n) {
    for (auto e = a.nodes[n].byte_begin; e < a.nodes[n].byte_end; ++e) {
      a.first_bytes[n].set_range(a.byte_edges[e].lo, a.byte_edges[e].hi);
    }
  }
  // FIRST of a node: the bytes of every node its closure reaches.
  std::vector<ByteSet> first(a.nodes.size());
  for (std::size_t n = 0; n < a.nodes.size(); ++n) {
    for (auto c = a.nodes[n].closure_begin; c < a.nodes[n].closure_end; ++c)
      first[n].merge(a.first_bytes[a.closure[c].top]);
  }
  a.follow.assign(a.rule_start.size(), ByteSet{});
  bool changed = true;
  while (changed) {
    changed = false;
    for (std::size_t n = 0; n < a.nodes.size(); ++n) {
      const Node& node = a.nodes[n];
      for (auto e = node.ref_begin; e < node.ref_end; ++e) {
        const RefEdge& ref = a.ref_edges[e];
        changed |= a.follow[ref.rule].merge(first[ref.target]);
        if (a.nodes[ref.target].can_pop && ref.rule != node.rule) {
          const ByteSet outer = a.follow[node.rule];
          changed |= a.follow[ref.rule].merge(outer);
        }
      }
    }
  }
}

}  // namespace

void finish_automaton(ByteAutomaton& automaton) {
  prune(automaton);
  const std::vector<bool> nullable = find_can_pop(automaton);
  refuse_left_recursion(automaton, nullable);
  compute_closures(automaton, nullable);
  compute_byte_sets(automaton);
}

}  // namespace engine::grammar
