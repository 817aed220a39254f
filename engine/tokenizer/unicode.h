#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

// UTF-8 and Unicode helpers for the tokenizer: validation, lossy decoding, normalization forms, the
// byte-level alphabet of GPT-2 style tokenizers, and the few character properties the pipeline needs.
#include "base/utf8.h"

namespace engine::tokenizer::unicode {

inline constexpr char32_t kReplacement = 0xFFFD;

// Decodes the character at `pos` of valid UTF-8 and advances `pos` past it.
char32_t next_char(std::string_view text, std::size_t& pos);
// Bytes of the UTF-8 character whose first byte is `lead` (1 for a stray continuation byte).
inline std::size_t char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? (lead < 0xC0 ? 1 : 2) : lead < 0xF0 ? 3 : 4;
}
using base::append_utf8;  // one UTF-8 encoder (base/utf8.h)

bool is_valid_utf8(std::string_view text);
// Appends `bytes` to `out` with each maximal invalid subsequence replaced by U+FFFD, as Rust's
// String::from_utf8_lossy and the WHATWG decoder do. When `final` is false a trailing sequence that is a
// valid but incomplete character is left over; returns the number of bytes consumed.
std::size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final = true);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// True when valid UTF-8 `text` is certainly in the form already: every character is one the form leaves
// alone whatever surrounds it. False means "maybe not".
bool quick_check(std::string_view text, NormalForm form);
// Normalizes valid UTF-8 (utf8proc). Returns false, leaving `out` untouched, when the quick check shows
// `text` is already in the form (so ASCII, CJK, emoji and most other text cost one scan).
bool normalize(std::string_view text, NormalForm form, std::string& out);

// Per-character lowercase as Rust's char::to_lowercase (no context rules: Σ always becomes σ).
std::string to_lowercase(std::string_view text);

// The White_Space property (Rust's char::is_whitespace, the regex crate's \s).
bool is_white_space(char32_t c);
// General category Mark (Mn, Mc, Me).
bool is_mark(char32_t c);

// GPT-2's byte-level alphabet: every byte maps to a printable character (bytes that are printable Latin-1
// map to themselves, the others to U+0100 and up, in order).
struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8{};  // the same characters as UTF-8
  // The byte a character stands for, or nullopt when it is not in the alphabet.
  std::optional<std::uint8_t> char_to_byte(char32_t c) const;

 private:
  friend const ByteLevelAlphabet& byte_level_alphabet();
  std::array<std::int16_t, 324> char_to_byte_{};  // all alphabet characters are below U+0144
};
const ByteLevelAlphabet& byte_level_alphabet();

// Maps every byte of `bytes` to its alphabet character.
std::string bytes_to_byte_level(std::string_view bytes);
// The bytes a byte-level string stands for, or nullopt when a character is outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace engine::tokenizer::unicode
