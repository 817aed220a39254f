#pragma once

// Writing GBNF text (llama.cpp's grammar syntax, as engine/grammar's parser reads it): quoted literals,
// character classes from sets of code points, the JSON-string encoding of characters, and a rule set that
// names rules uniquely and shares identical bodies. The JSON Schema and regex converters write through
// these helpers only, so every grammar they produce uses one small, escaped subset of the syntax.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace engine::grammar {

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

// A set of Unicode scalar values (surrogates never belong to it), kept as sorted disjoint ranges.
class CodepointSet {
 public:
  struct Range {
    char32_t lo;
    char32_t hi;  // inclusive
  };

  CodepointSet() = default;
  static CodepointSet of(char32_t c) { return range(c, c); }
  static CodepointSet range(char32_t lo, char32_t hi);
  static CodepointSet everything() { return range(0, kMaxCodepoint); }

  void add(char32_t lo, char32_t hi);
  void add(char32_t c) { add(c, c); }
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  CodepointSet minus(const CodepointSet& other) const;
  CodepointSet intersect(const CodepointSet& other) const;
  bool contains(char32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  std::vector<Range> ranges_;
};

// Decodes UTF-8 to code points; invalid UTF-8 returns false with `bad_offset` at the offending byte.
bool decode_utf8(std::string_view utf8, std::u32string& out, std::size_t& bad_offset);

// A GBNF string literal matching exactly `utf8` (valid UTF-8), quoted and escaped.
std::string gbnf_literal(std::string_view utf8);
// A GBNF character class matching one character of `set` (not empty), positive or negated, whichever is
// shorter.
std::string gbnf_class(const CodepointSet& set);

// `text` as the body of a JSON string in this project's canonical form: `"` and `\` escaped, the control
// characters as \b \t \n \f \r or \u00xx, everything else as itself. Grammars accept exactly this form for
// fixed text (property names), so that a string's text and its value correspond one to one.
std::string json_escape(std::u32string_view text);
// A GBNF expression matching one character of `set` (not empty) as it appears inside a JSON string in the
// canonical form above.
std::string json_string_char(const CodepointSet& set);
// Any one character inside a JSON string, every escape JSON allows included (\/ and \uXXXX, surrogate
// escapes excepted, so that each match is one character of the value).
std::string json_string_escape();
std::string json_any_string_char();

// The grammar under construction: rules named after what they match (a hint made unique), identical
// bodies shared under the first name.
class GbnfRules {
 public:
  // Defines a rule with `body` and returns its name; a rule with the same body already defined is reused.
  std::string add(std::string_view name_hint, const std::string& body);
  // Reserves a name now, for a rule whose body refers to itself (recursive $refs); define it later.
  std::string reserve(std::string_view name_hint);
  void define(const std::string& name, const std::string& body);
  // The grammar text: `root ::= root_body` first, then every rule in the order they were named.
  std::string text(const std::string& root_body) const;

 private:
  std::string unique_name(std::string_view hint);

  std::vector<std::string> order_;
  std::map<std::string, std::string> bodies_;  // name -> body ("" while only reserved)
  std::map<std::string, std::string> by_body_;
};

}  // namespace engine::grammar
