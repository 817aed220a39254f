#include "engine/grammar/regex_to_gbnf.h"

#include <cctype>
#include <optional>
#include <vector>

#include "base/utf8.h"
#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

bool is_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

std::optional<unsigned> hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

CodepointSet digit_set() {
  return CodepointSet::range('0', '9');
}

CodepointSet word_set() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

// JavaScript's \s (WhiteSpace and LineTerminator), a superset of Python's and Rust's ASCII \s.
CodepointSet space_set() {
  CodepointSet s = CodepointSet::range('\t', '\r');
  for (const char32_t c :
       {U' ', U'\u00A0', U'\u1680', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000', U'\uFEFF'}) {
    s.add(c);
  }
  s.add(0x2000, 0x200A);
  return s;
}

// One parsed piece of a sequence: either literal text (merged with its neighbours when unquantified) or
// an expression.
struct Piece {
  std::string expr;
  bool atomic = true;  // can take a quantifier without parentheses
};

class RegexConverter {
 public:
  RegexConverter(std::string_view pattern, RegexTarget target) : target_(target) {
    std::size_t bad = 0;
    if (!decode_utf8(pattern, pattern_, bad)) {
      throw GrammarError("regex: invalid UTF-8 at byte " + std::to_string(bad) + " of the pattern");
    }
  }

  std::string convert() {
    std::string expr = alternation(/*depth=*/0);
    if (pos_ < pattern_.size()) fail("unbalanced ')'", pos_);
    return expr;
  }

 private:
  [[noreturn]] void fail(const std::string& what, std::size_t at) const {
    throw GrammarError("regex: " + what + " at offset " + std::to_string(at));
  }
  [[noreturn]] void unsupported(const std::string& what, std::size_t at) const { fail(what + " is not supported", at); }

  bool at_end() const { return pos_ >= pattern_.size(); }
  char32_t peek(std::size_t ahead = 0) const { return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : U'\0'; }
  bool has(std::size_t ahead) const { return pos_ + ahead < pattern_.size(); }

  std::string alternation(int depth) {
    std::vector<std::string> branches{sequence(depth)};
    while (!at_end() && peek() == '|') {
      ++pos_;
      branches.push_back(sequence(depth));
    }
    if (branches.size() == 1) return branches.front();
    std::string out;
    for (std::size_t i = 0; i < branches.size(); ++i) out += (i ? " | " : "") + branches[i];
    return out;
  }

  std::string sequence(int depth) {
    std::vector<std::string> parts;
    std::string pending_literal;  // UTF-8 text of consecutive unquantified literal characters
    auto flush = [&] {
      if (!pending_literal.empty()) parts.push_back(gbnf_literal(pending_literal));
      pending_literal.clear();
    };
    const std::size_t start = pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const std::size_t atom_at = pos_;
      if (peek() == '^') {
        if (depth != 0 || pos_ != start) fail("anchor ^ away from the start of the pattern", pos_);
        ++pos_;
        if (!at_end() && is_quantifier_start()) fail("nothing to repeat", pos_);
        continue;
      }
      if (peek() == '$') {
        ++pos_;
        if (depth != 0 || (!at_end() && peek() != '|')) fail("anchor $ away from the end of the pattern", atom_at);
        continue;
      }
      std::string literal_text;
      std::optional<Piece> piece = atom(depth, literal_text);
      if (!at_end() && is_quantifier_start()) {
        // A one-character literal takes the quantifier as it is; an escaped JSON character (\") is two.
        Piece quantified = piece ? *piece : Piece{gbnf_literal(literal_text), literal_text.front() != '\\'};
        const std::string suffix = quantifier();
        flush();
        parts.push_back((quantified.atomic ? quantified.expr : "(" + quantified.expr + ")") + suffix);
      } else if (piece) {
        flush();
        parts.push_back(piece->expr);
      } else {
        pending_literal += literal_text;
      }
    }
    flush();
    if (parts.empty()) return "\"\"";
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
    return out;
  }

  bool is_quantifier_start() const {
    const char32_t c = peek();
    return c == '*' || c == '+' || c == '?' || c == '{';
  }

  // The quantifier at pos_ as GBNF, lazy forms read as greedy ones (same language).
  std::string quantifier() {
    const std::size_t at = pos_;
    const char32_t c = peek();
    std::string suffix;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      suffix = std::string(1, static_cast<char>(c));
    } else {
      ++pos_;  // '{'
      const std::optional<std::size_t> low = count();
      if (!low) {
        if (peek() == ',') fail("{,n} (Python's {0,n}); write {0,n}", at);
        fail("'{' opens no quantifier (write \\{ for a literal brace)", at);
      }
      std::optional<std::size_t> high = low;
      bool open = false;
      if (peek() == ',') {
        ++pos_;
        high = count();
        open = !high;
      }
      if (peek() != '}') fail("'{' opens no quantifier (write \\{ for a literal brace)", at);
      ++pos_;
      if (high && *high < *low) {
        fail(
            "quantifier {" + std::to_string(*low) + "," + std::to_string(*high) + "} has its maximum below its minimum",
            at);
      }
      suffix = "{" + std::to_string(*low) + (open ? ",}" : high == low ? "}" : "," + std::to_string(*high) + "}");
    }
    if (!at_end() && peek() == '?') {
      ++pos_;  // lazy
    } else if (!at_end() && peek() == '+') {
      unsupported("a possessive quantifier", pos_);
    }
    if (!at_end() && is_quantifier_start() && peek() != '{') fail("multiple repeat", pos_);
    return suffix;
  }

  std::optional<std::size_t> count() {
    const std::size_t at = pos_;
    if (at_end() || !is_digit(peek())) return std::nullopt;
    std::size_t value = 0;
    while (!at_end() && is_digit(peek())) {
      value = value * 10 + (peek() - '0');
      if (value > kMaxRegexRepeat) {
        fail("repetition count over " + std::to_string(kMaxRegexRepeat) + " (the largest this server expands)", at);
      }
      ++pos_;
    }
    return value;
  }

  // One atom. Literal characters come back through `literal_text` (as they appear in the target) with
  // nullopt; everything else as a Piece.
  std::optional<Piece> atom(int depth, std::string& literal_text) {
    const std::size_t at = pos_;
    const char32_t c = peek();
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat", at);
    if (c == '{') fail("'{' opens no quantifier (write \\{ for a literal brace)", at);
    if (c == '(') return group(depth);
    if (c == '[') return Piece{set_expr(char_class(), at)};
    if (c == '.') {
      ++pos_;
      return Piece{set_expr(CodepointSet::everything().minus(CodepointSet::of('\n')), at)};
    }
    if (c == '\\') {
      ++pos_;
      if (std::optional<CodepointSet> set = class_escape()) return Piece{set_expr(*set, at)};
      literal(escaped_char(/*in_class=*/false), literal_text);
      return std::nullopt;
    }
    ++pos_;
    literal(c, literal_text);
    return std::nullopt;
  }

  void literal(char32_t c, std::string& text) {
    if (target_ == RegexTarget::JsonString) {
      text += json_escape(std::u32string(1, c));
    } else {
      base::append_utf8(text, c);
    }
  }

  std::string set_expr(const CodepointSet& set, std::size_t at) const {
    if (set.empty()) fail("character class that matches no character", at);
    return target_ == RegexTarget::JsonString ? json_string_char(set) : gbnf_class(set);
  }

  Piece group(int depth) {
    const std::size_t at = pos_;
    ++pos_;  // '('
    if (peek() == '?') {
      const char32_t kind = peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        unsupported("lookahead", at);
      } else if (kind == '<' && (peek(2) == '=' || peek(2) == '!')) {
        unsupported("lookbehind", at);
      } else if (kind == 'P' && peek(2) == '=') {
        unsupported("a backreference (?P=name)", at);
      } else if ((kind == 'P' && peek(2) == '<') || kind == '<') {
        pos_ += kind == 'P' ? 3 : 2;
        const std::size_t name_at = pos_;
        while (!at_end() && peek() != '>') ++pos_;
        if (at_end() || pos_ == name_at) fail("unterminated group name", at);
        ++pos_;
      } else if (kind == '>') {
        unsupported("an atomic group", at);
      } else if (kind == '#') {
        unsupported("a comment group", at);
      } else if (kind == '(') {
        unsupported("a conditional group", at);
      } else {
        unsupported("an inline flag group (?" + std::string(1, static_cast<char>(kind < 0x80 ? kind : '?')) + "...)",
                    at);
      }
    }
    std::string inner = alternation(depth + 1);
    if (at_end() || peek() != ')') fail("missing ')' for the group opened", at);
    ++pos_;
    return Piece{"(" + inner + ")"};
  }

  // After a backslash: the set for \d \w \s \D \W \S, nullopt for other escapes (pos_ unchanged then).
  std::optional<CodepointSet> class_escape() {
    if (at_end()) fail("pattern ends in a backslash", pos_ - 1);
    const char32_t c = peek();
    std::optional<CodepointSet> set;
    switch (c) {
      case 'd': set = digit_set(); break;
      case 'D': set = digit_set().complement(); break;
      case 'w': set = word_set(); break;
      case 'W': set = word_set().complement(); break;
      case 's': set = space_set(); break;
      case 'S': set = space_set().complement(); break;
      default: return std::nullopt;
    }
    ++pos_;
    return set;
  }

  // The character an escape (after its backslash) stands for.
  char32_t escaped_char(bool in_class) {
    const std::size_t at = pos_ - 1;
    if (at_end()) fail("pattern ends in a backslash", at);
    const char32_t c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'a': return '\a';
      case '0':
        if (!at_end() && is_digit(peek())) unsupported("an octal escape", at);
        return U'\0';
      case 'x': return hex_escape(2, at);
      case 'u': {
        const char32_t unit = hex_escape(4, at);
        if (unit >= 0xDC00 && unit <= 0xDFFF) fail("a lone low surrogate \\u escape", at);
        if (unit < 0xD800 || unit > 0xDBFF) return unit;
        if (peek() != '\\' || peek(1) != 'u') fail("a high surrogate \\u escape without its low half", at);
        pos_ += 2;
        const char32_t low = hex_escape(4, at);
        if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate \\u escape without its low half", at);
        return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
      }
      case 'b':
        if (in_class) return '\b';
        unsupported("a word boundary \\b", at);
      case 'B': unsupported("a word boundary \\B", at);
      case 'A':
      case 'Z':
      case 'z':
      case 'G': unsupported("the anchor \\" + std::string(1, static_cast<char>(c)), at);
      case 'p':
      case 'P': unsupported("a Unicode property class \\" + std::string(1, static_cast<char>(c)), at);
      case 'k': unsupported("a backreference \\k", at);
      default: break;
    }
    if (c >= '1' && c <= '9') unsupported("a backreference \\" + std::string(1, static_cast<char>(c)), at);
    if (c < 0x80 && std::isalnum(static_cast<int>(c)))
      fail("unknown escape \\" + std::string(1, static_cast<char>(c)), at);
    return c;  // escaped punctuation (or any other character) stands for itself
  }

  char32_t hex_escape(int digits, std::size_t at) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const std::optional<unsigned> digit = at_end() ? std::nullopt : hex_value(peek());
      if (!digit)
        fail("\\" + std::string(digits == 2 ? "x" : "u") + " needs " + std::to_string(digits) + " hex digits", at);
      value = value * 16 + *digit;
      ++pos_;
    }
    return value;
  }

  CodepointSet char_class() {
    const std::size_t at = pos_;
    ++pos_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    if (peek() == ']') fail("']' first in a class (Python and JavaScript read it differently; write \\])", pos_);
    CodepointSet set;
    while (true) {
      if (at_end()) fail("missing ']' for the class opened", at);
      if (peek() == ']') break;
      const std::size_t item_at = pos_;
      std::optional<char32_t> lo = class_char(set);
      if (!lo) continue;  // a class escape went into `set`
      if (peek() == '-' && has(1) && peek(1) != ']') {
        ++pos_;
        CodepointSet ignored;
        const std::optional<char32_t> hi = class_char(ignored);
        if (!hi) fail("a class escape as a range end", item_at);
        if (*hi < *lo) fail("range out of order in a class", item_at);
        set.add(*lo, *hi);
      } else {
        set.add(*lo);
      }
    }
    ++pos_;  // ']'
    return negated ? set.complement() : set;
  }

  // One class member: a character (returned) or a class escape (added to `set`, nullopt returned).
  std::optional<char32_t> class_char(CodepointSet& set) {
    if (peek() == '\\') {
      ++pos_;
      if (std::optional<CodepointSet> escape = class_escape()) {
        set.add(*escape);
        return std::nullopt;
      }
      return escaped_char(/*in_class=*/true);
    }
    if (peek() == '[' && peek(1) == ':') unsupported("a POSIX class [:name:]", pos_);
    return pattern_[pos_++];
  }

  std::u32string pattern_;
  RegexTarget target_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string regex_to_gbnf_expression(std::string_view pattern, RegexTarget target) {
  return RegexConverter(pattern, target).convert();
}

std::string regex_to_gbnf(std::string_view pattern) {
  return "root ::= " + regex_to_gbnf_expression(pattern) + "\n";
}

}  // namespace engine::grammar
