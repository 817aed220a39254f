#include "engine/grammar/rule_inliner.h"

#include <algorithm>
#include <vector>

namespace engine::grammar {
namespace {

bool refers_to_rules(const GrammarExpr& expr) {
  if (expr.kind == GrammarExpr::Kind::RuleRef) return true;
  return std::any_of(expr.children.begin(), expr.children.end(), refers_to_rules);
}

// Roughly the automaton nodes the expression expands to (bounded repetitions count every copy); saturates.
std::size_t estimated_size(const GrammarExpr& expr) {
  constexpr std::size_t kLarge = kMaxInlinedSize + 1;
  switch (expr.kind) {
    case GrammarExpr::Kind::Literal: return expr.literal.size();
    case GrammarExpr::Kind::Class: {
      // One node after the class, plus the inner nodes of multi-byte UTF-8 sequences.
      std::size_t size = 1;
      for (const auto& range : expr.ranges) size += range.hi > 0x7F ? 3 : 0;
      return size;
    }
    case GrammarExpr::Kind::RuleRef: return 1;
    case GrammarExpr::Kind::Sequence:
    case GrammarExpr::Kind::Alternation: {
      std::size_t size = expr.kind == GrammarExpr::Kind::Alternation ? 1 : 0;
      for (const auto& child : expr.children) size = std::min(kLarge, size + estimated_size(child));
      return size;
    }
    case GrammarExpr::Kind::Repeat: {
      const std::size_t body = estimated_size(expr.children.front());
      const std::size_t copies = expr.max == GrammarExpr::kUnbounded ? std::size_t{expr.min} + 1 : expr.max;
      return copies > kLarge ? kLarge : std::min(kLarge, 1 + body * copies);
    }
  }
  return kLarge;
}

// Adds to `expanded` per rule how many copies of a reference to it the automaton builder makes, a bounded
// repetition expanding its body once per count (`copies` is the product of the repetitions around `expr`);
// saturates at kLarge.
void count_expanded_references(const GrammarExpr& expr, std::size_t copies, std::vector<std::size_t>& expanded) {
  constexpr std::size_t kLarge = std::size_t{1} << 32;
  if (expr.kind == GrammarExpr::Kind::RuleRef) {
    expanded[expr.rule] = std::min(kLarge, expanded[expr.rule] + copies);
    return;
  }
  if (expr.kind == GrammarExpr::Kind::Repeat) {
    const std::size_t count = expr.max == GrammarExpr::kUnbounded ? std::size_t{expr.min} + 1 : expr.max;
    copies = std::min(kLarge, copies * std::max<std::size_t>(count, 1));
  }
  for (const auto& child : expr.children) count_expanded_references(child, copies, expanded);
}

// Replaces references to `inlinable` rules inside `expr` with their bodies; returns whether any was.
bool substitute(GrammarExpr& expr, const std::vector<const GrammarExpr*>& inlinable) {
  if (expr.kind == GrammarExpr::Kind::RuleRef) {
    if (const GrammarExpr* body = inlinable[expr.rule]) {
      expr = *body;
      return true;
    }
    return false;
  }
  bool changed = false;
  for (auto& child : expr.children) changed |= substitute(child, inlinable);
  return changed;
}

}  // namespace

void inline_small_rules(GrammarAst& ast) {
  const std::size_t rules = ast.bodies.size();
  std::vector<bool> done(rules, false);  // considered as a leaf already
  bool changed = true;
  while (changed) {
    changed = false;
    // Copies, so a body can be substituted into itself's referrers while they change.
    std::vector<std::size_t> expanded(rules, 0);
    for (const auto& body : ast.bodies) count_expanded_references(body, 1, expanded);
    std::vector<GrammarExpr> leaves(rules);
    std::vector<const GrammarExpr*> inlinable(rules, nullptr);
    for (std::size_t r = 0; r < rules; ++r) {
      if (done[r] || r == ast.root || refers_to_rules(ast.bodies[r])) continue;
      done[r] = true;
      const std::size_t size = estimated_size(ast.bodies[r]);
      if (size > kMaxInlinedSize || size * expanded[r] > kMaxInlinedGrowth) continue;
      leaves[r] = ast.bodies[r];
      inlinable[r] = &leaves[r];
    }
    if (std::none_of(inlinable.begin(), inlinable.end(), [](const GrammarExpr* e) { return e != nullptr; })) break;
    for (std::size_t r = 0; r < rules; ++r) changed |= substitute(ast.bodies[r], inlinable);
  }
}

}  // namespace engine::grammar
