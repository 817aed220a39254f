#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tokenizer/regex.h"

namespace engine::tokenizer {

// The pieces a pre-tokenizer works on: views into the normalized text, or into `storage` for pieces a
// pre-tokenizer had to rewrite (a prefix space). The model tokenizes each final piece on its own.
struct Pieces {
  std::vector<std::string_view> views;
  std::deque<std::string> storage;  // a deque keeps the strings in place as it grows
  std::vector<std::string_view> scratch;
  // Where the input's first character is, when `views` still hold it (Metaspace's "first" scheme prepends
  // only there: the reference asks whether a piece starts at offset 0 of the original input).
  const char* origin = nullptr;

  // `at_input_start`: `text` begins the input (no added token or earlier text before it).
  void reset(std::string_view text, bool at_input_start = true) {
    views.assign(1, text);
    storage.clear();
    origin = at_input_start ? text.data() : nullptr;
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and possibly rewrites) every piece; pieces that become empty are dropped.
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

// What Split does with the pattern's matches (the reference's SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Pieces& pieces) const override;

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's pre-tokenizer: optionally a space in front of each piece, optionally a split by GPT-2's pattern.
// Mapping the bytes to the byte-level alphabet is left to the model, which then works on raw bytes, so
// this must be the last pre-tokenizer (the loaders check).
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void pre_tokenize(Pieces& pieces) const override;

  static constexpr std::string_view kGpt2Pattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> split_;  // when use_regex
};

// SentencePiece's word boundaries: spaces become `replacement` ("▁"), which is put in front of a piece that
// does not start with it (every piece, only the input's first, or none), and with `split` each
// replacement starts a new piece.
enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme prepend, bool split);
  void pre_tokenize(Pieces& pieces) const override;

 private:
  std::string replacement_;
  PrependScheme prepend_;
  std::unique_ptr<SplitPreTokenizer> split_;  // when split
};

// The reference's Digits: numeric characters (Rust's char::is_numeric, \p{N}) each on their own
// (individual_digits) or in runs.
std::unique_ptr<PreTokenizer> make_digits_pre_tokenizer(bool individual_digits);

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(Pieces& pieces) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace engine::tokenizer
