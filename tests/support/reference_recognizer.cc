#include "tests/support/reference_recognizer.h"

#include <algorithm>
#include <unordered_set>

namespace grammar_test {

using engine::grammar::CodePointRange;
using engine::grammar::GrammarAst;
using engine::grammar::GrammarExpr;

ReferenceRecognizer::ReferenceRecognizer(const GrammarAst& ast) {
  rules_ = static_cast<std::uint32_t>(ast.bodies.size());
  by_lhs_.resize(rules_);
  for (std::uint32_t r = 0; r < rules_; ++r) {
    const std::uint32_t body = convert(ast.bodies[r]);
    productions_.push_back({r, {{false, body}}});
    by_lhs_[r].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
  }
  start_ = add_nonterminal();
  productions_.push_back({start_, {{false, static_cast<std::uint32_t>(ast.root)}}});
  by_lhs_[start_].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
  drop_unproductive();
  nullable_.assign(by_lhs_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& p : productions_) {
      if (nullable_[p.lhs]) continue;
      const bool all =
          std::all_of(p.rhs.begin(), p.rhs.end(), [&](const Symbol& s) { return !s.terminal && nullable_[s.index]; });
      if (all) nullable_[p.lhs] = changed = true;
    }
  }
}

std::uint32_t ReferenceRecognizer::add_nonterminal() {
  by_lhs_.emplace_back();
  return static_cast<std::uint32_t>(by_lhs_.size() - 1);
}

ReferenceRecognizer::Symbol ReferenceRecognizer::terminal(std::vector<CodePointRange> ranges) {
  classes_.push_back(std::move(ranges));
  return {true, static_cast<std::uint32_t>(classes_.size() - 1)};
}

std::uint32_t ReferenceRecognizer::convert(const GrammarExpr& expr) {
  const std::uint32_t n = add_nonterminal();
  const auto add = [&](std::vector<Symbol> rhs) {
    productions_.push_back({n, std::move(rhs)});
    by_lhs_[n].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
  };
  switch (expr.kind) {
    case GrammarExpr::Kind::Literal: {
      std::u32string cps;
      std::string tail;
      decode(expr.literal, cps, tail);
      std::vector<Symbol> rhs;
      for (const char32_t c : cps) rhs.push_back(terminal({{c, c}}));
      add(std::move(rhs));
      break;
    }
    case GrammarExpr::Kind::Class: add({terminal(expr.ranges)}); break;
    case GrammarExpr::Kind::RuleRef: add({{false, static_cast<std::uint32_t>(expr.rule)}}); break;
    case GrammarExpr::Kind::Sequence: {
      std::vector<Symbol> rhs;
      for (const auto& child : expr.children) rhs.push_back({false, convert(child)});
      add(std::move(rhs));
      break;
    }
    case GrammarExpr::Kind::Alternation:
      for (const auto& child : expr.children) add({{false, convert(child)}});
      break;
    case GrammarExpr::Kind::Repeat: {
      const std::uint32_t body = convert(expr.children.front());
      std::vector<Symbol> rhs(expr.min, Symbol{false, body});
      if (expr.max == GrammarExpr::kUnbounded) {
        const std::uint32_t tail = add_nonterminal();  // tail -> ε | body tail
        productions_.push_back({tail, {}});
        by_lhs_[tail].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
        productions_.push_back({tail, {{false, body}, {false, tail}}});
        by_lhs_[tail].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
        rhs.push_back({false, tail});
      } else {
        std::uint32_t optional = UINT32_MAX;  // up to k more: opt_k -> ε | body opt_{k-1}
        for (std::uint32_t k = expr.min; k < expr.max; ++k) {
          const std::uint32_t next = add_nonterminal();
          productions_.push_back({next, {}});
          by_lhs_[next].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
          std::vector<Symbol> more{{false, body}};
          if (optional != UINT32_MAX) more.push_back({false, optional});
          productions_.push_back({next, std::move(more)});
          by_lhs_[next].push_back(static_cast<std::uint32_t>(productions_.size() - 1));
          optional = next;
        }
        if (optional != UINT32_MAX) rhs.push_back({false, optional});
      }
      add(std::move(rhs));
      break;
    }
  }
  return n;
}

void ReferenceRecognizer::drop_unproductive() {
  std::vector<bool> productive(by_lhs_.size(), false);
  const auto symbol_ok = [&](const Symbol& s) { return s.terminal ? !classes_[s.index].empty() : productive[s.index]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& p : productions_) {
      if (!productive[p.lhs] && std::all_of(p.rhs.begin(), p.rhs.end(), symbol_ok)) productive[p.lhs] = changed = true;
    }
  }
  for (auto& list : by_lhs_) {
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](std::uint32_t p) {
                                return !std::all_of(productions_[p].rhs.begin(), productions_[p].rhs.end(), symbol_ok);
                              }),
               list.end());
  }
}

void ReferenceRecognizer::close(std::vector<Chart>& charts, std::size_t k) const {
  Chart& chart = charts[k];
  const auto pack = [](const Item& item) {
    return (std::uint64_t{item.production} << 40) | (std::uint64_t{item.dot} << 20) | item.origin;
  };
  std::unordered_set<std::uint64_t> present;
  for (const Item& item : chart) present.insert(pack(item));
  const auto add = [&](const Item& item) {
    if (present.insert(pack(item)).second) chart.push_back(item);
  };
  for (std::size_t i = 0; i < chart.size(); ++i) {
    const Item item = chart[i];
    const Production& p = productions_[item.production];
    if (item.dot == p.rhs.size()) {  // complete
      const Chart& from = charts[item.origin];
      for (std::size_t j = 0; j < from.size(); ++j) {
        const Item waiting = charts[item.origin][j];
        const Production& q = productions_[waiting.production];
        if (waiting.dot < q.rhs.size() && !q.rhs[waiting.dot].terminal && q.rhs[waiting.dot].index == p.lhs) {
          add({waiting.production, waiting.dot + 1, waiting.origin});
        }
      }
      continue;
    }
    const Symbol next = p.rhs[item.dot];
    if (next.terminal) continue;
    for (const std::uint32_t q : by_lhs_[next.index]) add({q, 0, static_cast<std::uint32_t>(k)});
    if (nullable_[next.index]) add({item.production, item.dot + 1, item.origin});  // Aycock-Horspool
  }
}

const std::vector<ReferenceRecognizer::Chart>* ReferenceRecognizer::parse(const std::u32string& text) const {
  if (cached_.empty()) {
    cached_.emplace_back();
    for (const std::uint32_t p : by_lhs_[start_]) cached_[0].push_back({p, 0, 0});
    close(cached_, 0);
    parsed_.clear();
  }
  std::size_t common = 0;
  while (common < text.size() && common < parsed_.size() && text[common] == parsed_[common]) ++common;
  cached_.resize(common + 1);
  parsed_.resize(common);
  for (std::size_t k = common; k < text.size(); ++k) {
    Chart next;
    for (const Item& item : cached_[k]) {
      const Production& p = productions_[item.production];
      if (item.dot == p.rhs.size() || !p.rhs[item.dot].terminal) continue;
      const auto& ranges = classes_[p.rhs[item.dot].index];
      const bool in = std::any_of(ranges.begin(), ranges.end(),
                                  [&](const CodePointRange& r) { return text[k] >= r.lo && text[k] <= r.hi; });
      if (in) next.push_back({item.production, item.dot + 1, item.origin});
    }
    if (next.empty()) return nullptr;
    cached_.push_back(std::move(next));
    parsed_.push_back(text[k]);
    close(cached_, k + 1);
  }
  return &cached_;
}

bool ReferenceRecognizer::decode(std::string_view bytes, std::u32string& code_points, std::string& tail) {
  code_points.clear();
  tail.clear();
  for (std::size_t i = 0; i < bytes.size();) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    std::size_t length = 0;
    char32_t cp = 0;
    if (lead < 0x80) {
      length = 1, cp = lead;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, cp = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, cp = lead & 0x07;
    } else {
      return false;
    }
    if (i + length > bytes.size()) {
      tail = std::string(bytes.substr(i));
      for (std::size_t j = 1; j < tail.size(); ++j) {
        if ((static_cast<unsigned char>(tail[j]) & 0xC0) != 0x80) return false;
      }
      return true;  // tail_possible() decides whether it can be finished
    }
    for (std::size_t j = 1; j < length; ++j) {
      const auto c = static_cast<unsigned char>(bytes[i + j]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const char32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_length[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    code_points.push_back(cp);
    i += length;
  }
  return true;
}

bool ReferenceRecognizer::tail_possible(const std::vector<CodePointRange>& ranges, const std::string& tail) const {
  // The code points whose encoding starts with `tail` form one interval: fill the missing continuation
  // bytes with their lowest (80) and highest (BF) values.
  const auto lead = static_cast<unsigned char>(tail[0]);
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  char32_t lo = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  char32_t hi = lo;
  for (std::size_t j = 1; j < length; ++j) {
    const char32_t c = j < tail.size() ? (static_cast<unsigned char>(tail[j]) & 0x3F) : 0;
    const char32_t d = j < tail.size() ? c : 0x3F;
    lo = (lo << 6) | c;
    hi = (hi << 6) | d;
  }
  const char32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  lo = std::max(lo, min_for_length[length]);
  hi = std::min<char32_t>(hi, 0x10FFFF);
  for (const auto& r : ranges) {
    const char32_t a = std::max(lo, r.lo), b = std::min(hi, r.hi);
    if (a > b) continue;
    if (a >= 0xD800 && b <= 0xDFFF) continue;  // only surrogates, which have no encoding
    return true;
  }
  return false;
}

bool ReferenceRecognizer::viable(std::string_view bytes) const {
  std::u32string code_points;
  std::string tail;
  if (!decode(bytes, code_points, tail)) return false;
  const auto* charts = parse(code_points);
  if (charts == nullptr) return false;
  if (tail.empty()) return true;
  for (const Item& item : charts->back()) {
    const Production& p = productions_[item.production];
    if (item.dot < p.rhs.size() && p.rhs[item.dot].terminal && tail_possible(classes_[p.rhs[item.dot].index], tail)) {
      return true;
    }
  }
  return false;
}

bool ReferenceRecognizer::complete(std::string_view bytes) const {
  std::u32string code_points;
  std::string tail;
  if (!decode(bytes, code_points, tail) || !tail.empty()) return false;
  const auto* charts = parse(code_points);
  if (charts == nullptr) return false;
  for (const Item& item : charts->back()) {
    if (productions_[item.production].lhs == start_ && item.dot == 1 && item.origin == 0) return true;
  }
  return false;
}

}  // namespace grammar_test
