#pragma once

// Code point ranges as UTF-8 byte-range sequences, so that a character class over code points becomes
// byte edges: [a-zé] is [61-7A] | [C3][A9]. The automaton matches bytes because byte-level BPE tokens may
// end inside a character.

#include <array>
#include <cstdint>
#include <vector>

#include "engine/grammar/grammar_ast.h"

namespace engine::grammar {

struct ByteRange {
  std::uint8_t lo = 0;
  std::uint8_t hi = 0;
};

// One byte range per byte of the encoding; every byte string it matches is the UTF-8 of a code point in
// the range it came from.
struct Utf8Sequence {
  std::uint8_t length = 0;
  std::array<ByteRange, 4> bytes{};
};

// Sequences matching exactly the UTF-8 encodings of `ranges` (surrogate-free), disjoint from each other.
std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodePointRange>& ranges);

}  // namespace engine::grammar
