#include "serverd/parsers/python_call.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/template/text.h"
#include "engine/template/value.h"

namespace serverd::parsers {
namespace {

using engine::template_::Dict;
using engine::template_::Value;

// Python's hard keywords: never a function or keyword-argument name.
constexpr std::array<std::string_view, 35> kKeywords = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};

// What this reader does not take; read() turns it into nullopt.
struct Refused {};

bool is_digit(char c, int base) {
  if (base == 16) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  return c >= '0' && c < static_cast<char>('0' + base);
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

class PythonCallReader {
 public:
  explicit PythonCallReader(std::string_view text) : text_(text) {}

  RecognisedCall read() {
    skip_space();
    std::string name = identifier();
    skip_space();
    expect('(');
    Dict arguments;
    skip_space();
    while (peek() != ')') {
      std::string keyword = identifier();
      skip_space();
      expect('=');
      if (peek() == '=') throw Refused{};  // a comparison, not a keyword argument
      skip_space();
      Value value = expression(0);
      if (arguments.find(keyword) != nullptr) throw Refused{};  // Python: "keyword argument repeated"
      arguments.set(std::move(keyword), std::move(value));
      skip_space();
      if (peek() != ',') break;
      ++pos_;
      skip_space();
    }
    expect(')');
    skip_space();
    if (pos_ != text_.size()) throw Refused{};
    try {
      return RecognisedCall{std::move(name), Value::dict(std::move(arguments)).to_json()};
    } catch (const std::invalid_argument&) {  // nested too deeply, or too large to write
      throw Refused{};
    }
  }

 private:
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void expect(char c) {
    if (peek() != c) throw Refused{};
    ++pos_;
  }
  // Inside brackets Python joins lines, so newlines are spaces here.
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\f')) {
      ++pos_;
    }
  }

  std::string identifier() {
    if (!is_python_name_start(peek())) throw Refused{};
    const std::size_t start = pos_;
    while (is_python_name_char(peek())) ++pos_;
    std::string name(text_.substr(start, pos_ - start));
    for (const std::string_view keyword : kKeywords) {
      if (name == keyword) throw Refused{};
    }
    return name;
  }

  Value expression(std::uint32_t depth) {
    if (depth >= Value::kMaxNesting) throw Refused{};
    const char c = peek();
    if (c == '[') return list(depth);
    if (c == '{') return dict(depth);
    if (c == '(') {  // a parenthesised literal; a tuple is refused (vLLM refuses it too)
      ++pos_;
      skip_space();
      Value inner = expression(depth + 1);
      skip_space();
      expect(')');
      return inner;
    }
    if (c == '-' || c == '+') {
      ++pos_;
      skip_space();
      if (!is_digit(peek(), 10) && !(peek() == '.' && is_digit(peek(1), 10))) throw Refused{};
      return number(c == '-');
    }
    if (is_digit(c, 10) || (c == '.' && is_digit(peek(1), 10))) return number(false);
    if (string_starts()) return Value::string(strings());
    if (is_python_name_start(c)) {
      const std::size_t start = pos_;
      while (is_python_name_char(peek())) ++pos_;
      const std::string_view word = text_.substr(start, pos_ - start);
      if (word == "True") return Value::boolean(true);
      if (word == "False") return Value::boolean(false);
      if (word == "None") return Value::none();
    }
    throw Refused{};  // a name, a call, an operator: not a literal
  }

  Value list(std::uint32_t depth) {
    expect('[');
    std::vector<Value> items;
    skip_space();
    while (peek() != ']') {
      items.push_back(expression(depth + 1));
      skip_space();
      if (peek() != ',') break;
      ++pos_;
      skip_space();
    }
    expect(']');
    return Value::list(std::move(items));
  }

  Value dict(std::uint32_t depth) {
    expect('{');
    Dict entries;
    skip_space();
    while (peek() != '}') {
      std::string key = dict_key(expression(depth + 1));
      skip_space();
      expect(':');  // a set ({1, 2}) has no colon
      skip_space();
      entries.set(std::move(key), expression(depth + 1));
      skip_space();
      if (peek() != ',') break;
      ++pos_;
      skip_space();
    }
    expect('}');
    return Value::dict(std::move(entries));
  }

  // The key json.dumps writes for a dict key of this type.
  static std::string dict_key(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString: return key.as_string();
      case Value::Kind::kInt: return std::to_string(key.as_int());
      case Value::Kind::kFloat: return engine::template_::python_float_repr(key.as_double());
      case Value::Kind::kBool: return key.as_bool() ? "true" : "false";
      case Value::Kind::kNone: return "null";
      default: throw Refused{};  // lists and dicts are not hashable
    }
  }

  // ---- numbers ----

  // Digits of `base` with single underscores between them, the underscores left out.
  std::string digits(int base) {
    std::string out;
    while (true) {
      if (!is_digit(peek(), base)) throw Refused{};
      while (is_digit(peek(), base)) out += text_[pos_++];
      if (peek() != '_') return out;
      ++pos_;
    }
  }

  Value number(bool negative) {
    if (peek() == '0' &&
        (peek(1) == 'x' || peek(1) == 'X' || peek(1) == 'o' || peek(1) == 'O' || peek(1) == 'b' || peek(1) == 'B')) {
      const char kind = static_cast<char>(peek(1) | 0x20);
      pos_ += 2;
      if (peek() == '_') ++pos_;  // 0x_FF is valid Python
      const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      return integer(digits(base), base, negative);
    }
    std::string mantissa;
    bool is_float = false;
    if (peek() != '.') mantissa = digits(10);
    if (peek() == '.') {
      is_float = true;
      ++pos_;
      mantissa += '.';
      if (is_digit(peek(), 10)) mantissa += digits(10);
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      ++pos_;
      mantissa += 'e';
      if (peek() == '+' || peek() == '-') mantissa += text_[pos_++];
      mantissa += digits(10);
    }
    if (peek() == 'j' || peek() == 'J' || is_python_name_char(peek())) throw Refused{};  // complex, or 1abc
    if (!is_float) {
      // Python refuses leading zeros in a decimal int ("007"), zeros alone aside.
      if (mantissa.size() > 1 && mantissa[0] == '0' && mantissa.find_first_not_of('0') != std::string::npos) {
        throw Refused{};
      }
      return integer(mantissa, 10, negative);
    }
    double value = 0;
    const auto [end, error] = std::from_chars(mantissa.data(), mantissa.data() + mantissa.size(), value);
    // Out of range either way: Python reads an overflow as inf, which json.dumps writes as Infinity (not
    // JSON); underflows this far out are not worth telling apart.
    if (error != std::errc{} || end != mantissa.data() + mantissa.size() || !std::isfinite(value)) throw Refused{};
    return Value::floating(negative ? -value : value);
  }

  static Value integer(const std::string& text, int base, bool negative) {
    std::uint64_t magnitude = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
    if (error != std::errc{} || end != text.data() + text.size()) throw Refused{};  // beyond 64 bits
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (magnitude > kMax + (negative ? 1 : 0)) throw Refused{};
    if (!negative) return Value::integer(static_cast<std::int64_t>(magnitude));
    return Value::integer(magnitude == kMax + 1 ? std::numeric_limits<std::int64_t>::min()
                                                : -static_cast<std::int64_t>(magnitude));
  }

  // ---- strings ----

  // The length of the prefix letters (r, u, b, f in either case, at most two) before a quote at `at`, or
  // npos when no string starts there.
  std::size_t prefix_length(std::size_t at) const {
    std::size_t length = 0;
    while (length < 2 && at + length < text_.size() &&
           std::string_view("rRuUbBfF").find(text_[at + length]) != std::string_view::npos) {
      ++length;
    }
    const bool quote = at + length < text_.size() && (text_[at + length] == '"' || text_[at + length] == '\'');
    return quote ? length : std::string_view::npos;
  }
  bool string_starts() const { return prefix_length(pos_) != std::string_view::npos; }

  // One or more adjacent string literals, joined as Python joins them.
  std::string strings() {
    std::string out;
    while (true) {
      string_literal(out);
      const std::size_t after = pos_;
      skip_space();
      if (!string_starts()) {
        pos_ = after;
        return out;
      }
    }
  }

  void string_literal(std::string& out) {
    const std::size_t prefix = prefix_length(pos_);
    bool raw = false;
    for (std::size_t i = 0; i < prefix; ++i) {
      const char letter = static_cast<char>(text_[pos_ + i] | 0x20);
      if (letter == 'b' || letter == 'f') throw Refused{};  // bytes are not JSON; an f-string is not a literal
      if (letter == 'r') raw = true;
      if (letter == 'u' && prefix > 1) throw Refused{};  // u combines with nothing
    }
    pos_ += prefix;
    const char quote = text_[pos_];
    const bool triple = peek(1) == quote && peek(2) == quote;
    pos_ += triple ? 3 : 1;
    while (true) {
      if (pos_ >= text_.size()) throw Refused{};
      const char c = text_[pos_];
      if (c == quote && (!triple || (peek(1) == quote && peek(2) == quote))) {
        pos_ += triple ? 3 : 1;
        return;
      }
      if (c == '\n' && !triple) throw Refused{};  // a line break ends a one-quote string: SyntaxError
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= text_.size()) throw Refused{};
      if (raw) {  // the backslash stays, and the byte after it cannot end the string
        out += c;
        out += text_[pos_ + 1];
        pos_ += 2;
        continue;
      }
      escape(out);
    }
  }

  // A backslash escape in a string that is not raw; pos_ is at the backslash.
  void escape(std::string& out) {
    const char c = text_[pos_ + 1];
    pos_ += 2;
    switch (c) {
      case '\n': return;  // a backslash at the end of a line continues the string
      case '\\': out += '\\'; return;
      case '\'': out += '\''; return;
      case '"': out += '"'; return;
      case 'a': out += '\a'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'v': out += '\v'; return;
      case 'x': code_point(out, hex_digits(2)); return;
      case 'u': code_point(out, hex_digits(4)); return;
      case 'U': code_point(out, hex_digits(8)); return;
      case 'N': throw Refused{};  // \N{name} needs the Unicode name table
      default: break;
    }
    if (c >= '0' && c <= '7') {  // up to three octal digits
      char32_t value = static_cast<char32_t>(c - '0');
      for (int i = 0; i < 2 && peek() >= '0' && peek() <= '7'; ++i)
        value = value * 8 + static_cast<char32_t>(text_[pos_++] - '0');
      code_point(out, value);
      return;
    }
    out += '\\';  // Python keeps an unknown escape as it is
    out += c;
  }

  char32_t hex_digits(int count) {
    char32_t value = 0;
    for (int i = 0; i < count; ++i) {
      if (!is_digit(peek(), 16)) throw Refused{};  // Python: "truncated \xXX escape"
      value = value * 16 + static_cast<char32_t>(hex_value(text_[pos_++]));
    }
    return value;
  }

  static void code_point(std::string& out, char32_t cp) {
    // Surrogates cannot be written as UTF-8 (Python would fail to encode the response).
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) throw Refused{};
    engine::template_::text::append_utf8(out, cp);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

bool is_python_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_python_name_char(char c) {
  return is_python_name_start(c) || (c >= '0' && c <= '9');
}

std::optional<RecognisedCall> python_call(std::string_view text) {
  if (!engine::template_::text::valid_utf8(text)) return std::nullopt;
  try {
    return PythonCallReader(text).read();
  } catch (const Refused&) {
    return std::nullopt;
  } catch (const std::invalid_argument&) {  // a list or dict nested beyond what Value holds
    return std::nullopt;
  }
}

}  // namespace serverd::parsers
