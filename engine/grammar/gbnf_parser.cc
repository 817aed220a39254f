#include "engine/grammar/gbnf_parser.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/tokenizer/unicode.h"

namespace engine::grammar {
namespace {

namespace unicode = engine::tokenizer::unicode;

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string describe_char(char c) {
  if (c == '\n') return "a line break";
  if (static_cast<unsigned char>(c) < 0x20) return "a control character";
  return std::string("'") + c + "'";
}

// Sorted, merged, surrogate-free ranges; complemented over all code points when `negate`.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<CodePointRange> complement;
    char32_t next = 0;
    for (const auto& r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  std::vector<CodePointRange> out;
  for (const auto& r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  GrammarAst parse() {
    check_utf8();
    skip_space();
    while (pos_ < text_.size()) parse_rule();
    GrammarAst ast;
    ast.names.resize(rules_.size());
    ast.bodies.resize(rules_.size());
    for (auto& [name, index] : index_) ast.names[index] = name;
    for (std::size_t i = 0; i < rules_.size(); ++i) {
      if (!rules_[i].defined) fail(rules_[i].first_use, "undefined rule \"" + ast.names[i] + "\"");
      ast.bodies[i] = std::move(rules_[i].body);
    }
    const auto root = index_.find("root");
    if (root == index_.end() || !rules_[root->second].defined) {
      throw GrammarError("grammar: no rule named \"root\" (matching starts at `root ::= ...`)");
    }
    ast.root = root->second;
    return ast;
  }

 private:
  struct RuleSlot {
    bool defined = false;
    std::size_t first_use = 0;  // offset of the first reference or the definition
    std::size_t defined_at = 0;
    GrammarExpr body;
  };

  [[noreturn]] void fail(std::size_t at, const std::string& message) const {
    throw GrammarError("grammar: " + location(at) + ": " + message);
  }

  // "line L, column C" of byte offset `at`, both 1-based, columns in characters.
  std::string location(std::size_t at) const {
    std::size_t line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::size_t column = 1;
    for (std::size_t i = line_start; i < at && i < text_.size(); ++i) {
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

  void check_utf8() const {
    for (std::size_t i = 0; i < text_.size();) {
      const std::size_t length = unicode::char_length(static_cast<unsigned char>(text_[i]));
      if (i + length > text_.size() || !unicode::is_valid_utf8(text_.substr(i, length))) {
        fail(i, "the grammar is not valid UTF-8");
      }
      i += length;
    }
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Skips blanks, line breaks and comments; remembers whether a line break was among them.
  void skip_space() {
    newline_before_ = false;
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '\n') {
        newline_before_ = true;
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view read_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Whether a rule definition (`name ::=`) starts at pos_.
  bool at_rule_definition() const {
    std::size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  std::size_t rule_index(std::string_view name, std::size_t at) {
    auto [it, inserted] = index_.try_emplace(std::string(name), rules_.size());
    if (inserted) {
      rules_.emplace_back();
      rules_.back().first_use = at;
    }
    return it->second;
  }

  void parse_rule() {
    const std::size_t start = pos_;
    const std::string_view name = read_name();
    if (name.empty()) fail(pos_, "expected a rule name, found " + describe_char(peek()));
    skip_space();
    if (text_.substr(pos_, 3) != "::=") {
      fail(pos_, "expected '::=' after the rule name \"" + std::string(name) + "\"");
    }
    pos_ += 3;
    skip_space();
    GrammarExpr body = parse_alternation(std::nullopt);
    const std::size_t index = rule_index(name, start);
    auto& slot = rules_[index];
    if (slot.defined) {
      fail(start, "rule \"" + std::string(name) + "\" is defined twice (first at " + location(slot.defined_at) + ")");
    }
    slot.defined = true;
    slot.defined_at = start;
    slot.body = std::move(body);
  }

  // `group_open`: where the enclosing '(' is, when inside one.
  GrammarExpr parse_alternation(std::optional<std::size_t> group_open) {
    std::vector<GrammarExpr> alternatives;
    alternatives.push_back(parse_sequence(group_open));
    while (peek() == '|') {
      ++pos_;
      skip_space();
      alternatives.push_back(parse_sequence(group_open));
    }
    if (alternatives.size() == 1) return std::move(alternatives.front());
    GrammarExpr alternation;
    alternation.kind = GrammarExpr::Kind::Alternation;
    alternation.children = std::move(alternatives);
    return alternation;
  }

  GrammarExpr parse_sequence(std::optional<std::size_t> group_open) {
    GrammarExpr sequence;
    sequence.kind = GrammarExpr::Kind::Sequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (is_name_char(peek()) && at_rule_definition()) {
        if (group_open) fail(*group_open, "this '(' is not closed before the next rule definition");
        if (!newline_before_) fail(pos_, "a rule definition must start on a new line");
        break;
      }
      GrammarExpr item = parse_primary();
      skip_space();
      while (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
        item = parse_postfix(std::move(item));
        skip_space();
      }
      sequence.children.push_back(std::move(item));
    }
    if (sequence.children.size() == 1) return std::move(sequence.children.front());
    return sequence;
  }

  GrammarExpr parse_primary() {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      GrammarExpr any;
      any.kind = GrammarExpr::Kind::Class;
      any.ranges = normalize_ranges({{0, kMaxCodePoint}}, false);
      return any;
    }
    if (c == '(') {
      const std::size_t open = pos_;
      ++pos_;
      skip_space();
      GrammarExpr inner = parse_alternation(open);
      if (peek() != ')') fail(open, "this '(' is not closed");
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      const std::size_t at = pos_;
      GrammarExpr ref;
      ref.kind = GrammarExpr::Kind::RuleRef;
      ref.rule = rule_index(read_name(), at);
      return ref;
    }
    if (c == '<') {
      fail(pos_, "token references (<...>) are not supported; write the token's text as a string literal");
    }
    fail(pos_, "expected a string literal, a character class, a rule name, '(' or '.', found " + describe_char(c));
  }

  GrammarExpr parse_postfix(GrammarExpr item) {
    GrammarExpr repeat;
    repeat.kind = GrammarExpr::Kind::Repeat;
    const char op = peek();
    const std::size_t at = pos_;
    ++pos_;
    if (op == '*') {
      repeat.min = 0;
      repeat.max = GrammarExpr::kUnbounded;
    } else if (op == '+') {
      repeat.min = 1;
      repeat.max = GrammarExpr::kUnbounded;
    } else if (op == '?') {
      repeat.min = 0;
      repeat.max = 1;
    } else {
      skip_blanks();
      repeat.min = parse_count("'{'");
      skip_blanks();
      if (peek() == '}') {
        repeat.max = repeat.min;
      } else if (peek() == ',') {
        ++pos_;
        skip_blanks();
        repeat.max = peek() == '}' ? GrammarExpr::kUnbounded : parse_count("','");
        skip_blanks();
      } else {
        fail(pos_, "expected ',' or '}' in the repetition, found " + describe_char(peek()));
      }
      if (peek() != '}') fail(pos_, "expected '}' to end the repetition, found " + describe_char(peek()));
      ++pos_;
      if (repeat.max != GrammarExpr::kUnbounded && repeat.min > repeat.max) {
        fail(at, "repetition {" + std::to_string(repeat.min) + "," + std::to_string(repeat.max) +
                     "}: the minimum is over the maximum");
      }
    }
    repeat.children.push_back(std::move(item));
    return repeat;
  }

  void skip_blanks() {
    while (peek() == ' ' || peek() == '\t') ++pos_;
  }

  std::uint32_t parse_count(const char* after) {
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(peek() - '0');
      ++pos_;
      if (value > kMaxRepetitionCount) {
        fail(start, "repetition count over the limit of " + std::to_string(kMaxRepetitionCount) +
                        " (each repetition is expanded; use * or + for long runs)");
      }
    }
    if (pos_ == start) fail(pos_, std::string("expected a repetition count after ") + after);
    return static_cast<std::uint32_t>(value);
  }

  char32_t parse_hex(std::size_t digits, std::size_t escape_at) {
    char32_t value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char c = peek();
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit < 0) fail(pos_, "expected " + std::to_string(digits) + " hex digits in the escape");
      value = value * 16 + static_cast<char32_t>(digit);
      ++pos_;
    }
    if (value > kMaxCodePoint) fail(escape_at, "escape names a code point above U+10FFFF");
    if (value >= kSurrogateLo && value <= kSurrogateHi) {
      fail(escape_at, "escape names a surrogate code point, which has no UTF-8 form");
    }
    return value;
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  char32_t parse_char(bool in_class) {
    const std::size_t at = pos_;
    if (peek() != '\\') return unicode::next_char(text_, pos_);
    ++pos_;
    const char c = peek();
    if (at_end()) fail(at, "unfinished escape");
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': return '\\';
      case '"': return '"';
      case '[': return '[';
      case ']': return ']';
      case 'x': return parse_hex(2, at);
      case 'u': return parse_hex(4, at);
      case 'U': return parse_hex(8, at);
      default: break;
    }
    if (in_class && (c == '-' || c == '^')) return static_cast<char32_t>(c);
    pos_ = at + 1;
    fail(at, "unknown escape '\\" + std::string(1, c) +
                 "' (supported: \\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH" +
                 (in_class ? std::string(" \\- \\^") : std::string()) + ")");
  }

  GrammarExpr parse_literal() {
    const std::size_t open = pos_;
    ++pos_;
    GrammarExpr literal;
    literal.kind = GrammarExpr::Kind::Literal;
    while (true) {
      if (at_end() || peek() == '\n') fail(open, "this string literal is not closed");
      if (peek() == '"') break;
      unicode::append_utf8(literal.literal, parse_char(false));
    }
    ++pos_;
    return literal;
  }

  GrammarExpr parse_class() {
    const std::size_t open = pos_;
    ++pos_;
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    std::vector<CodePointRange> ranges;
    while (true) {
      if (at_end() || peek() == '\n') fail(open, "this character class is not closed");
      if (peek() == ']') break;
      const std::size_t at = pos_;
      const char32_t lo = parse_char(true);
      char32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        if (at_end() || peek() == '\n') fail(open, "this character class is not closed");
        hi = parse_char(true);
        if (hi < lo) fail(at, "character range is reversed (its end is below its start)");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty()) fail(open, "empty character class");
    GrammarExpr cls;
    cls.kind = GrammarExpr::Kind::Class;
    cls.ranges = normalize_ranges(std::move(ranges), negate);
    return cls;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  bool newline_before_ = false;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<RuleSlot> rules_;
};

}  // namespace

GrammarAst parse_gbnf(std::string_view text) {
  return GbnfParser(text).parse();
}

}  // namespace engine::grammar
