#pragma once

// How many more bytes a position is sure to read, one after another and whatever they are, without leaving
// its rule's frame, as long as they are text of some kinds: ASCII letters and digits; or those and spaces;
// or any printable ASCII but '"' and '\\'; or that and any valid UTF-8 character. Endless inside a string's
// body, n inside a copy of a counted repetition with n copies left (a bounded JSON string's character).
// Computed once per grammar from the automaton alone, so every mask-cache walk shares it: a walk accepts a
// whole trie subtree unvisited when its tokens are such text and no longer than that. (A copy never steps
// to itself, so without this a walk from a bounded string visited every trie node a string accepts; and
// most of the vocabulary's trie is multi-byte characters.)

#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/stack_pool.h"

namespace engine::grammar {

class ClassRunLengths {
 public:
  static constexpr std::uint16_t kEndless = UINT16_MAX;

  // Lengths above `cap` (the vocabulary's longest token: no walk needs more) are stored as `cap`.
  ClassRunLengths(const ByteAutomaton& automaton, std::size_t cap);

  // For node `node` (with byte edges): every byte string of up to the returned length whose bytes are of
  // `classes` (byte_class_bit) and which is valid UTF-8 (or a prefix of it) from one of `utf8_states` (a bit
  // per Utf8State; see SortedVocabulary::utf8_states_below) leaves some position alive after each byte.
  // 0 when `classes` holds '"', '\\' or a control character.
  std::uint16_t at(std::uint32_t node, std::uint8_t classes, std::uint8_t utf8_states) const;
  // The same for a set of positions: the most any one of them is sure of (frames do not matter, since
  // these runs never pop one).
  std::uint16_t at(std::span<const StackElement> positions, std::uint8_t classes, std::uint8_t utf8_states) const;

  // The text kinds, each taking in the one before it: a subtree is looked up in the least that holds it.
  static constexpr int kKinds = 4;  // letters and digits; + space; + other printable; + non-ASCII
  // kinds 0-2 are ASCII: their lengths are for a character boundary alone. Kind 3's are per Utf8State.
  static constexpr int kLayers = 3 + 8;

 private:
  std::size_t nodes_ = 0;
  std::vector<std::uint16_t> lengths_;  // [layer * nodes_ + node]
};

}  // namespace engine::grammar
