#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/regex.h"

namespace engine::tokenizer {

class Normalizer;

// A token added on top of the model's vocabulary (special tokens like <|im_start|>, and others).
struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;  // only where it is not inside a word
  bool lstrip = false;       // takes the whitespace on its left
  bool rstrip = false;       // takes the whitespace on its right
  bool normalized = false;   // matched in the normalized text rather than the raw input
};

// Finds added tokens in text and cuts the text around them, as the reference's AddedVocabulary does:
// leftmost match first, the longest one starting there, and the single_word / lstrip / rstrip rules.
class AddedVocabulary {
 public:
  // `normalizer` (may be null) turns the content of `normalized` tokens into what they match.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized_tokens() const { return !normalized_.empty(); }

  // Walks `text`, calling on_text for each stretch between tokens (never empty) and on_token with each
  // token's id. `normalized_pass` selects the tokens matched after normalization.
  void split(std::string_view text, bool normalized_pass, const std::function<void(std::string_view)>& on_text,
             const std::function<void(std::int32_t)>& on_token) const;

 private:
  // A byte trie over token contents, with the set of bytes a token can start with for a fast scan.
  class Trie {
   public:
    Trie();
    void insert(std::string_view key, std::int32_t value);
    bool empty() const { return nodes_.size() == 1; }
    // The leftmost-longest match at or after `from`: its span and the index of its token.
    bool find(std::string_view text, std::size_t from, std::size_t& start, std::size_t& end, std::int32_t& value) const;

   private:
    struct Node {
      std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
      std::int32_t value = -1;
    };
    std::int32_t child(std::int32_t node, unsigned char byte) const;
    std::vector<Node> nodes_;
    std::array<bool, 256> first_byte_{};
  };

  bool word_char_before(std::string_view text, std::size_t pos) const;
  bool word_char_at(std::string_view text, std::size_t pos) const;

  std::vector<AddedToken> tokens_;
  Trie raw_;
  Trie normalized_;
  Regex word_char_;  // the regex crate's \w, which the reference's single_word test uses
};

}  // namespace engine::tokenizer
