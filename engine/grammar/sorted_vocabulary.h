#pragma once

// The vocabulary arranged for mask computation, once per model: the tokens a grammar may produce (not
// special, not stop ids, not empty) sorted by their bytes, and a byte trie over them in preorder, so that a
// walk over every token shares common prefixes and skips a whole subtree when its prefix is dead.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {

// Bytes in eight classes (letters and digits, space, other printable ASCII but '"' and '\\', '"', '\\', control
// characters, UTF-8 continuation bytes, UTF-8 lead bytes), so that a trie node can say cheaply which kinds of
// bytes follow it: a walk whose positions surely read that much of those kinds (ClassRunLengths) accepts the
// whole subtree unvisited.
constexpr std::uint8_t byte_class_bit(std::uint8_t byte) {
  const bool alnum = (byte >= '0' && byte <= '9') || (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z');
  const int c = alnum                         ? 0
                : byte == ' '                 ? 1
                : byte == '"'                 ? 3
                : byte == '\\'                ? 4
                : byte < 0x20 || byte == 0x7F ? 5
                : byte < 0x80                 ? 2
                : byte < 0xC0                 ? 6
                                              : 7;
  return static_cast<std::uint8_t>(1u << c);
}

class SortedVocabulary {
 public:
  // Throws GrammarError when the vocabulary's fields disagree in size or a stop id is out of range.
  explicit SortedVocabulary(const TokenVocabulary& vocabulary);

  // A trie node, in preorder: the byte on the edge into it, its depth (bytes from the root), where its
  // subtree ends (the next preorder index outside it) and the sorted tokens at or below it start.
  struct TrieNode {
    std::uint32_t subtree_end = 0;
    std::uint32_t token_begin = 0;  // sorted index of the first token at or below this node
    std::uint32_t token_count = 0;  // tokens ending exactly here (equal byte strings)
    std::uint16_t depth = 0;
    std::uint8_t byte = 0;
  };

  std::size_t vocab_size() const { return vocab_size_; }  // the logits' width
  std::size_t bitmask_words() const { return (vocab_size_ + 31) / 32; }
  std::size_t size() const { return ids_.size(); }  // tokens a grammar may produce
  std::int32_t id(std::uint32_t sorted) const { return ids_[sorted]; }
  std::string_view bytes(std::uint32_t sorted) const {
    return std::string_view(bytes_).substr(offsets_[sorted], offsets_[sorted + 1] - offsets_[sorted]);
  }
  // trie().size() - 1 nodes; the last entry is a sentinel whose token_begin is size().
  const std::vector<TrieNode>& trie() const { return trie_; }
  // The sorted tokens below trie node `node` (itself included).
  std::uint32_t subtree_tokens_end(std::uint32_t node) const { return trie_[trie_[node].subtree_end].token_begin; }

  // The longest token's bytes, the longest token's at or below trie node `node`, and the sorted tokens
  // longest first (what a walk that only needs tokens longer than some depth visits).
  std::size_t max_token_length() const { return max_token_length_; }
  std::uint16_t subtree_max_depth(std::uint32_t node) const { return subtree_max_depth_[node]; }
  // The byte classes (byte_class_bit) of the edges strictly below trie node `node`.
  std::uint8_t classes_below(std::uint32_t node) const { return classes_below_[node]; }
  // The UTF-8 decoder states (a bit per Utf8State) from which every byte string below trie node `node` is
  // valid UTF-8 or a prefix of it.
  std::uint8_t utf8_states_below(std::uint32_t node) const { return utf8_states_below_[node]; }
  std::span<const std::uint32_t> longest_first() const { return longest_first_; }
  // How many tokens are longer than `length` bytes (a prefix of longest_first()).
  std::size_t longer_than(std::size_t length) const;

  // Bit per id: whether the id is among the sorted tokens.
  std::span<const std::uint32_t> producible() const { return producible_; }
  bool is_producible(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < vocab_size_ &&
           ((producible_[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1);
  }
  std::span<const std::int32_t> stop_ids() const { return stop_ids_; }
  bool is_stop(std::int32_t id) const;
  // The bytes of any id (empty for padding and unknown ids).
  std::string_view id_bytes(std::int32_t id) const;

 private:
  std::size_t vocab_size_ = 0;
  std::vector<std::int32_t> ids_;       // by sorted index
  std::vector<std::uint32_t> offsets_;  // into bytes_, size() + 1
  std::string bytes_;
  std::vector<TrieNode> trie_;
  std::vector<std::uint32_t> producible_;
  std::vector<std::int32_t> stop_ids_;       // sorted, unique
  std::vector<std::uint32_t> sorted_of_id_;  // id -> sorted index, or UINT32_MAX
  std::size_t max_token_length_ = 0;
  std::vector<std::uint16_t> subtree_max_depth_;  // per trie node
  std::vector<std::uint8_t> classes_below_;       // per trie node
  std::vector<std::uint8_t> utf8_states_below_;   // per trie node
  std::vector<std::uint32_t> longest_first_;      // sorted indices
};

}  // namespace engine::grammar
