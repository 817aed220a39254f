#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine::tokenizer {

// Translates a pattern written for Oniguruma (the engine the reference compiles tokenizer.json patterns
// with, Ruby syntax) into PCRE2 syntax with the same meaning on Unicode text:
//   - \s / \S are White_Space, \d is Nd, \h / \H hex digits;
//   - \w is Alphabetic, marks, Nd and Pc, plus ¹ ² ³ ¼ ½ ¾ when bare (not inside [...]); \b follows it;
//   - POSIX brackets take Oniguruma's Unicode meaning ([:punct:] includes symbols);
//   - ^ and $ are line anchors on \n only, . excludes only \n, (?m) is PCRE2's (?s), {,n} is {0,n};
//   - \p{...} general categories and binary properties include what Unicode 15 and 16 added (PCRE2 10.42
//     knows Unicode 14), and \p{Script} means the Script property, not Script_Extensions.
// Throws std::invalid_argument for constructs without a faithful translation (nested or intersected
// classes, \W or \H inside a class, quantifiers stacked on an interval, unknown POSIX brackets).
// Case-insensitive matching folds single characters as Oniguruma does, but not to several (ß ~ ss).
std::string translate_oniguruma_pattern(std::string_view pattern);

// A compiled PCRE2 pattern (UTF, Unicode properties, JIT when available). Matching is const and
// thread-safe: each thread keeps its own match data.
class Regex {
 public:
  // Compiles a pattern written for Oniguruma (translated first). Throws std::invalid_argument with
  // PCRE2's message and offset when it does not compile.
  static Regex from_oniguruma(std::string_view pattern);
  // Compiles a PCRE2 pattern as is.
  static Regex from_pcre2(std::string_view pattern);
  // A pattern that matches `literal` exactly.
  static Regex literal(std::string_view literal);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Calls `on_match(start, end)` for each successive non-overlapping match in valid UTF-8 `text`, with the
  // reference's find_iter rules: after an empty match the search moves on one character, and an empty
  // match right where the previous match ended is skipped. Throws std::runtime_error when the matcher
  // gives up (resource limits).
  void for_each_match(std::string_view text, const std::function<void(std::size_t, std::size_t)>& on_match) const;
  // Whether the pattern matches starting exactly at `pos` (anchored there).
  bool matches_at(std::string_view text, std::size_t pos) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  Regex(std::string pattern, std::unique_ptr<Code> code);
  // The first match at or after `start`; false when there is none.
  bool find(std::string_view text, std::size_t start, std::size_t& match_start, std::size_t& match_end,
            bool anchored) const;

  // Whether `text` holds a character in added_.
  bool has_added_characters(std::string_view text) const;

  std::string pattern_;  // as compiled (PCRE2 syntax)
  std::unique_ptr<Code> code_;
  // When the pattern names properties that gained characters in Unicode 15 and 16 (which the translation
  // adds by hand): the same pattern without them, and the added characters.
  std::unique_ptr<Regex> plain_;
  std::vector<std::pair<char32_t, char32_t>> added_;
};

}  // namespace engine::tokenizer
