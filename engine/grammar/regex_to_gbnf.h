#pragma once

// Regular expressions (the syntax vLLM's guided_regex / structured_outputs.regex takes: Python re and Rust
// regex style, as xgrammar reads it) to GBNF. The regex matches the whole output (full-match semantics).
//
// Supported: literals; escapes \d \w \s \D \W \S (ASCII digits and word characters; \s is JavaScript's
// whitespace set, so that \S never admits a character JavaScript's \s takes), \n \t \r \f \v \0, \xHH,
// \uHHHH (a surrogate pair of \u escapes is one character) and any escaped punctuation; classes with
// ranges, negation and the escapes above; `.` (any character but \n); groups ( ), (?: ) and named groups
// (?P<name> ) / (?<name> ) (matched as plain groups); alternation; quantifiers * + ? {m} {m,} {m,n} and
// their lazy forms (the same language); ^ at the start and $ at the end of the pattern or of one of its
// top-level alternatives (no effect under full-match semantics).
// Refused by name, with the character offset: backreferences, lookahead and lookbehind, atomic groups,
// possessive quantifiers, inline flags, word boundaries, \A \Z \z \G, Unicode property classes, anchors
// elsewhere, a `{` that opens no quantifier, and repetition counts over kMaxRegexRepeat.

#include <cstddef>
#include <string>
#include <string_view>

namespace engine::grammar {

// The largest m or n in {m,n}: a grammar repeats its operand that many times.
inline constexpr std::size_t kMaxRegexRepeat = 10000;

enum class RegexTarget {
  Text,        // the output text itself matches the regex
  JsonString,  // the regex constrains a JSON string's value; the expression matches that value's JSON
               // text between the quotes (characters that JSON escapes appear escaped, canonically)
};

// A whole grammar (`root ::= ...`) matching exactly the strings `pattern` matches. Throws GrammarError
// ("regex: ... at offset N") for invalid or unsupported patterns.
std::string regex_to_gbnf(std::string_view pattern);

// The same language as one GBNF expression, for embedding in another grammar (a JSON string's `pattern`,
// a whitespace pattern).
std::string regex_to_gbnf_expression(std::string_view pattern, RegexTarget target = RegexTarget::Text);

}  // namespace engine::grammar
