#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace engine::tokenizer {

// A fast hash for the short strings tokenizers look up (words, tokens): eight bytes at a time, mixed by
// multiplication, from a per-process random seed.
std::uint64_t hash_bytes(std::string_view text) noexcept;

// Hashing for string-keyed maps that look up by string_view without building a string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept { return hash_bytes(text); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

struct BpeOptions {
  // Words arrive as raw bytes and the vocabulary spells tokens in GPT-2's byte-level alphabet (the
  // pre-tokenizer has a ByteLevel step). Otherwise words and tokens are both plain UTF-8.
  bool byte_level = false;
  // A word that is itself a token is taken whole, before any merge (Llama 3).
  bool ignore_merges = false;
  std::optional<std::int32_t> unk_id;  // characters outside the vocabulary; dropped when there is none
  bool fuse_unk = false;               // consecutive unknown characters make one unk
  bool byte_fallback = false;          // unknown characters as <0xXX> byte tokens, when the vocabulary has them
};

// The reference's BPE model: split a word into characters (bytes, for byte-level), then apply merges by
// rank, lowest first and leftmost on ties, exactly in the reference's order (a priority queue whose stale
// entries are recognised by the id they would produce).
class BpeModel {
 public:
  // `vocab` pairs tokens with ids; `merges` pairs the two tokens of each merge, in rank order. `ranks`, when
  // not empty, gives each merge its rank instead (merges of equal rank apply leftmost first, as
  // SentencePiece's equal scores do). Throws std::invalid_argument naming the merge when a token of it (or
  // their concatenation) is not in `vocab`.
  BpeModel(const std::vector<std::pair<std::string, std::int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           std::span<const std::int32_t> ranks = {});
  ~BpeModel();
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void tokenize(std::string_view word, std::vector<std::int32_t>& ids) const;

  const BpeOptions& options() const { return options_; }
  // The id of a token spelled as the vocabulary spells it.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;

 private:
  struct MergeTable;
  class WordCache;

  std::optional<std::int32_t> lookup(std::string_view word) const;
  void merge_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  BpeOptions options_;
  StringMap<std::int32_t> token_ids_;   // by the token's text
  StringMap<std::int32_t> byte_words_;  // byte-level models with ignore_merges: by the bytes a token stands for
  // Tokens keyed by what words contain (for whole-word lookups): token_ids_ for character-level models,
  // byte_words_ for byte-level ones with ignore_merges; unused otherwise.
  const StringMap<std::int32_t>* words_ = nullptr;
  std::array<std::int32_t, 256> byte_ids_{};  // byte-level: the token of each single byte, or -1
  std::array<std::int32_t, 256> fallback_{};  // byte_fallback: the <0xXX> token of each byte, or -1
  std::unique_ptr<MergeTable> merges_;
  std::uint64_t number_;  // identifies this model's per-thread word caches
};

}  // namespace engine::tokenizer
