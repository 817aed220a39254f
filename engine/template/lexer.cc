#include "engine/template/lexer.h"

#include <algorithm>

#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_inline_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Operators, longest first so "//" wins over "/".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), options_(options) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;  // Jinja's rule: lstrip_blocks also applies right after a consumed newline
    while (pos_ < src_.size()) {
      const std::size_t tag = find_tag(pos_);
      std::string data = src_.substr(pos_, tag - pos_);
      const std::size_t data_start = pos_;
      if (tag == src_.size()) {
        emit_text(std::move(data), data_start);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char flag = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool strip_before = flag == '-';
      const bool keep_before = flag == '+' && kind != '{';
      if (strip_before) {
        rstrip_whitespace(data);
      } else if (options_.lstrip_blocks && kind != '{' && !keep_before) {
        const std::size_t line_begin = data.rfind('\n');
        const std::size_t l_pos = line_begin == std::string::npos ? 0 : line_begin + 1;
        if ((l_pos > 0 || line_starting) && std::all_of(data.begin() + static_cast<std::ptrdiff_t>(l_pos), data.end(),
                                                        [](char c) { return c == ' ' || c == '\t'; })) {
          data.resize(l_pos);
        }
      }
      emit_text(std::move(data), data_start);
      pos_ = tag + 2 + ((strip_before || keep_before) ? 1 : 0);
      if (kind == '#') {
        line_starting = lex_comment(tag);
      } else if (kind == '{') {
        line_starting = lex_tag(tag, TokenType::kVariableBegin);
      } else {
        line_starting = lex_tag(tag, TokenType::kBlockBegin);
      }
    }
    tokens_.push_back(Token{TokenType::kEnd, {}, location(src_.size())});
    return std::move(tokens_);
  }

 private:
  Location location(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    const std::size_t start = line_starts_[line - 1];
    const std::string_view before(src_.data() + start, offset - start);
    return Location{static_cast<int>(line), static_cast<int>(text::length(before)) + 1};
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kSyntax, location(offset), message);
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void emit_text(std::string data, std::size_t offset) {
    if (!data.empty()) tokens_.push_back(Token{TokenType::kText, std::move(data), location(offset)});
  }

  static void rstrip_whitespace(std::string& data) { data = text::strip(data, std::nullopt, false, true); }

  // Skips what follows a closing tag; returns whether the last character consumed was a newline.
  bool after_tag_end(bool strip_after, bool keep_after, bool is_block) {
    if (strip_after) {
      const std::size_t start = pos_;
      const std::string rest = text::strip(std::string_view(src_).substr(pos_), std::nullopt, true, false);
      pos_ = src_.size() - rest.size();
      return pos_ > start && src_[pos_ - 1] == '\n';
    }
    if (is_block && options_.trim_blocks && !keep_after && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      return true;
    }
    return false;
  }

  bool lex_comment(std::size_t tag) {
    const std::size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(tag, "missing end of comment tag");
    const bool strip_after = end > pos_ && src_[end - 1] == '-';
    const bool keep_after = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    return after_tag_end(strip_after, keep_after, true);
  }

  // Lexes the inside of {{ }} or {% %}; returns the line_starting state after the closing tag.
  bool lex_tag(std::size_t tag, TokenType begin) {
    const bool is_block = begin == TokenType::kBlockBegin;
    const std::size_t first_token = tokens_.size() + 1;
    tokens_.push_back(Token{begin, {}, location(tag)});
    int depth = 0;  // open brackets: a "}}" inside a dict literal does not close the tag
    const std::string_view close = is_block ? "%}" : "}}";
    while (true) {
      while (pos_ < src_.size() && is_inline_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        fail(tag, is_block ? "unexpected end of template: missing '%}'" : "unexpected end of template: missing '}}'");
      const std::string_view rest = std::string_view(src_).substr(pos_);
      if (depth == 0) {
        const bool strip_after = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
        const bool keep_after = is_block && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close;
        if (strip_after || keep_after || rest.substr(0, 2) == close) {
          tokens_.push_back(Token{is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, {}, location(pos_)});
          pos_ += (strip_after || keep_after) ? 3 : 2;
          if (is_block && tokens_.size() == first_token + 2 && tokens_[first_token].type == TokenType::kName &&
              tokens_[first_token].value == "raw") {
            return lex_raw(tag, strip_after);
          }
          return after_tag_end(strip_after, keep_after, is_block);
        }
      }
      lex_token(depth);
    }
  }

  // {% raw %}...{% endraw %}: the body is data, whatever it contains.
  bool lex_raw(std::size_t tag, bool strip_after) {
    // Drop the "{% raw %}" tokens: the parser never sees them.
    tokens_.resize(tokens_.size() - 3);
    if (strip_after) {
      after_tag_end(true, false, true);
    } else {
      after_tag_end(false, false, true);
    }
    std::size_t search = pos_;
    while (true) {
      const std::size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail(tag, "missing {% endraw %} for {% raw %}");
      std::size_t i = open + 2;
      const bool strip_before = i < src_.size() && src_[i] == '-';
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
      while (i < src_.size() && is_inline_space(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      i += 6;
      while (i < src_.size() && is_inline_space(src_[i])) ++i;
      const bool strip_end = i < src_.size() && src_[i] == '-';
      const bool keep_end = i < src_.size() && src_[i] == '+';
      if (strip_end || keep_end) ++i;
      if (src_.compare(i, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string body = src_.substr(pos_, open - pos_);
      if (strip_before) {
        rstrip_whitespace(body);
      } else if (options_.lstrip_blocks) {
        const std::size_t nl = body.rfind('\n');
        const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 && std::all_of(body.begin() + static_cast<std::ptrdiff_t>(l_pos), body.end(),
                                     [](char c) { return c == ' ' || c == '\t'; })) {
          body.resize(l_pos);
        }
      }
      emit_text(std::move(body), pos_);
      pos_ = i + 2;
      return after_tag_end(strip_end, keep_end, true);
    }
  }

  void lex_token(int& depth) {
    const std::size_t start = pos_;
    const char c = src_[pos_];
    if (is_name_start(c)) {
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back(Token{TokenType::kName, src_.substr(start, pos_ - start), location(start)});
      return;
    }
    if (is_digit(c)) {
      lex_number();
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string();
      return;
    }
    for (std::string_view op : kOperators) {
      if (std::string_view(src_).substr(pos_, op.size()) == op) {
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail(start, "unexpected '" + std::string(op) + "'");
          --depth;
        }
        pos_ += op.size();
        tokens_.push_back(Token{TokenType::kOperator, std::string(op), location(start)});
        return;
      }
    }
    fail(start, "unexpected character '" + std::string(1, c) + "'");
  }

  // Digits with optional underscores: Jinja's integer and float literals.
  void lex_digits(std::string& out) {
    while (pos_ < src_.size() &&
           (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])))) {
      if (src_[pos_] != '_') out += src_[pos_];
      ++pos_;
    }
  }

  void lex_number() {
    const std::size_t start = pos_;
    std::string digits;
    lex_digits(digits);
    bool is_float = false;
    // After a '.', a number is an attribute index (foo.0.1), never a float.
    const bool after_dot =
        !tokens_.empty() && tokens_.back().type == TokenType::kOperator && tokens_.back().value == ".";
    if (!after_dot) {
      if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
        ++pos_;
        digits += '.';
        lex_digits(digits);
        is_float = true;
      }
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        std::size_t probe = pos_ + 1;
        if (probe < src_.size() && (src_[probe] == '+' || src_[probe] == '-')) ++probe;
        if (probe < src_.size() && is_digit(src_[probe])) {
          digits += 'e';
          digits.append(src_, pos_ + 1, probe - pos_ - 1);
          pos_ = probe;
          lex_digits(digits);
          is_float = true;
        }
      }
    }
    tokens_.push_back(Token{is_float ? TokenType::kFloat : TokenType::kInteger, std::move(digits), location(start)});
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A quoted string with Python's escapes; unknown escapes keep their backslash, as Python does.
  void lex_string() {
    const std::size_t start = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(start, "unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case '\n': break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (int k = 0; k < width; ++k) {
            const int h = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
            if (h < 0) fail(pos_, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<char32_t>(h);
            ++pos_;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) fail(start, "invalid code point in string literal");
          text::append_utf8(value, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(src_[pos_++] - '0');
            }
            text::append_utf8(value, cp);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back(Token{TokenType::kString, std::move(value), location(start)});
  }

  std::string src_;
  LexerOptions options_;
  std::vector<std::size_t> line_starts_;
  std::size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  if (!text::valid_utf8(source)) {
    throw TemplateError(TemplateError::Kind::kSyntax, Location{}, "the template is not valid UTF-8");
  }
  // Jinja normalizes every newline sequence to \n and drops one trailing newline (keep_trailing_newline=False).
  std::string normalized;
  normalized.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized), options).run();
}

}  // namespace engine::template_::detail
