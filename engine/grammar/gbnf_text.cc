#include "engine/grammar/gbnf_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <stdexcept>

#include "base/utf8.h"

namespace engine::grammar {
namespace {

constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

std::string hex(unsigned value, int digits) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%0*X", digits, value);
  return buffer;
}

// One code point as GBNF writes it inside a literal or a class. Only letters and digits stand for
// themselves in a class; in a literal all printable ASCII does except `"` and `\`. BMP characters beyond
// ASCII are \uXXXX, the rest UTF-8 (GBNF has no shorter escape for them).
void append_escaped(std::string& out, char32_t c, bool in_class) {
  if (c < 0x80) {
    const auto ch = static_cast<char>(c);
    const bool plain = in_class ? std::isalnum(static_cast<unsigned char>(ch)) != 0
                                : (c >= 0x20 && c < 0x7F && ch != '"' && ch != '\\');
    if (plain) {
      out += ch;
    } else if (!in_class && ch == '"') {
      out += "\\\"";
    } else if (!in_class && ch == '\\') {
      out += "\\\\";
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else {
      out += "\\x" + hex(c, 2);
    }
  } else if (c < 0x10000) {
    out += "\\u" + hex(c, 4);
  } else {
    base::append_utf8(out, c);
  }
}

}  // namespace

CodepointSet CodepointSet::range(char32_t lo, char32_t hi) {
  CodepointSet set;
  set.add(lo, hi);
  return set;
}

void CodepointSet::add(char32_t lo, char32_t hi) {
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  // Surrogates are not characters: a range across them is stored as the two ranges around them.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) add(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) add(kSurrogateHi + 1, hi);
    return;
  }
  std::vector<Range> merged;
  merged.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const Range& r : ranges_) {
    if (r.hi + 1 < lo) {
      merged.push_back(r);
    } else if (hi + 1 < r.lo) {
      if (!placed) merged.push_back({lo, hi}), placed = true;
      merged.push_back(r);
    } else {
      lo = std::min(lo, r.lo);
      hi = std::max(hi, r.hi);
    }
  }
  if (!placed) merged.push_back({lo, hi});
  std::sort(merged.begin(), merged.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const Range& r : other.ranges_) add(r.lo, r.hi);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  char32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  return intersect(other.complement());
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet out;
  for (const Range& a : ranges_) {
    for (const Range& b : other.ranges_) {
      const char32_t lo = std::max(a.lo, b.lo);
      const char32_t hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.add(lo, hi);
    }
  }
  return out;
}

bool CodepointSet::contains(char32_t c) const {
  return std::any_of(ranges_.begin(), ranges_.end(), [c](const Range& r) { return r.lo <= c && c <= r.hi; });
}

bool decode_utf8(std::string_view utf8, std::u32string& out, std::size_t& bad_offset) {
  std::size_t i = 0;
  while (i < utf8.size()) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    const std::size_t length = lead < 0x80           ? 1
                               : (lead >> 5) == 0x6  ? 2
                               : (lead >> 4) == 0xE  ? 3
                               : (lead >> 3) == 0x1E ? 4
                                                     : 0;
    if (length == 0 || i + length > utf8.size()) {
      bad_offset = i;
      return false;
    }
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(utf8[i + k]);
      if ((next & 0xC0) != 0x80) {
        bad_offset = i;
        return false;
      }
      c = (c << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMinimum[length] || c > kMaxCodepoint || (c >= kSurrogateLo && c <= kSurrogateHi)) {
      bad_offset = i;
      return false;
    }
    out += c;
    i += length;
  }
  return true;
}

std::string gbnf_literal(std::string_view utf8) {
  std::u32string text;
  std::size_t bad = 0;
  if (!decode_utf8(utf8, text, bad)) throw std::logic_error("gbnf_literal: invalid UTF-8");
  std::string out = "\"";
  for (const char32_t c : text) append_escaped(out, c, /*in_class=*/false);
  return out + "\"";
}

std::string gbnf_class(const CodepointSet& set) {
  if (set.empty()) throw std::logic_error("gbnf_class: empty set");
  const CodepointSet excluded = set.complement();
  const bool negate = !excluded.empty() && excluded.ranges().size() < set.ranges().size();
  std::string out = negate ? "[^" : "[";
  const CodepointSet* shown = negate ? &excluded : &set;
  for (const CodepointSet::Range& r : shown->ranges()) {
    append_escaped(out, r.lo, /*in_class=*/true);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    append_escaped(out, r.hi, /*in_class=*/true);
  }
  return out + "]";
}

std::string json_escape(std::u32string_view text) {
  std::string out;
  for (const char32_t c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          base::append_utf8(out, c);
        }
    }
  }
  return out;
}

std::string json_string_char(const CodepointSet& set) {
  static const CodepointSet kNeedsEscape = [] {
    CodepointSet s = CodepointSet::range(0, 0x1F);
    s.add('"');
    s.add('\\');
    return s;
  }();
  std::vector<std::string> alternatives;
  const CodepointSet plain = set.minus(kNeedsEscape);
  if (!plain.empty()) alternatives.push_back(gbnf_class(plain));
  // The control characters without a short escape, grouped by their \u00x? prefix.
  CodepointSet long_escape[2];
  const CodepointSet escaped_chars = set.intersect(kNeedsEscape);
  for (const CodepointSet::Range& r : escaped_chars.ranges()) {
    for (char32_t c = r.lo; c <= r.hi; ++c) {
      const std::string escaped = json_escape(std::u32string(1, c));
      if (escaped.size() == 2) {
        alternatives.push_back(gbnf_literal(escaped));
      } else {
        const char32_t digit = c & 0xF;
        long_escape[c >> 4].add(digit < 10 ? U'0' + digit : U'a' + digit - 10);
      }
    }
  }
  for (int high = 0; high < 2; ++high) {
    if (long_escape[high].empty()) continue;
    alternatives.push_back(gbnf_literal(high == 0 ? "\\u000" : "\\u001") + " " + gbnf_class(long_escape[high]));
  }
  if (alternatives.size() == 1) return alternatives.front();
  std::string out = "(";
  for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

std::string json_string_escape() {
  return R"("\\" ([\x22\x5C\x2Fbfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))";
}

std::string json_any_string_char() {
  return R"(([^\x22\x5C\x00-\x1F] | )" + json_string_escape() + ")";
}

std::string GbnfRules::unique_name(std::string_view hint) {
  // GBNF rule names are letters, digits and '-'; anything else in a hint (a property name) becomes '-'.
  std::string base;
  for (const char c : hint) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (word) {
      base += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.size() > 40) base.resize(40);
  if (base.empty() || base == "root") base = "r" + base;
  std::string name = base;
  for (int n = 2; bodies_.count(name) != 0; ++n) name = base + "-" + std::to_string(n);
  return name;
}

std::string GbnfRules::add(std::string_view name_hint, const std::string& body) {
  if (const auto found = by_body_.find(body); found != by_body_.end()) return found->second;
  const std::string name = reserve(name_hint);
  define(name, body);
  return name;
}

std::string GbnfRules::reserve(std::string_view name_hint) {
  std::string name = unique_name(name_hint);
  bodies_[name] = "";
  order_.push_back(name);
  return name;
}

void GbnfRules::define(const std::string& name, const std::string& body) {
  bodies_[name] = body;
  by_body_.emplace(body, name);
}

std::string GbnfRules::text(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (const std::string& name : order_) out += name + " ::= " + bodies_.at(name) + "\n";
  return out;
}

}  // namespace engine::grammar
