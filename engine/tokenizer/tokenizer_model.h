#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

// The loaded pipeline behind a Tokenizer, and what the loaders (tokenizer.json, GGUF) fill in.
namespace engine::tokenizer {

enum class DecoderKind {
  ByteLevel,  // token text mapped back through the byte-level alphabet, then lossy UTF-8
  Join,       // no decoder: the reference joins token texts with spaces
  Chain,      // token texts through a DecoderChain (SentencePiece-style: Replace, ByteFallback, Fuse, ...)
};

// What encode adds around a single sequence when asked for special tokens (TemplateProcessing and friends).
struct PostProcessor {
  std::vector<std::int32_t> prefix;
  std::vector<std::int32_t> suffix;
};

struct TokenizerModel {
  std::string name;  // the file, for messages

  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<AddedVocabulary> added;
  PostProcessor post_processor;
  DecoderKind decoder = DecoderKind::Join;
  std::unique_ptr<DecoderChain> chain;  // when decoder is Chain

  // Per id: the text of the token (empty for ids nothing names), whether anything names it, whether it is
  // special, and what decoding it contributes.
  std::vector<std::string> tokens;
  std::vector<std::uint8_t> flags;
  std::vector<std::string> decoded;
  std::vector<std::int32_t> special_ids;
  StringMap<std::int32_t> added_ids;  // added tokens by content; the model's own are in `model`

  std::optional<std::int32_t> token_to_id(std::string_view token) const {
    if (const auto it = added_ids.find(token); it != added_ids.end()) return it->second;
    return model->token_to_id(token);
  }

  TokenizerConfig config;
  std::optional<std::int32_t> bos_id, eos_id, pad_id;

  static constexpr std::uint8_t kKnown = 1;
  static constexpr std::uint8_t kSpecial = 2;

  bool known(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < flags.size() && (flags[static_cast<std::size_t>(id)] & kKnown);
  }
  bool special(std::int32_t id) const { return known(id) && (flags[static_cast<std::size_t>(id)] & kSpecial); }
};

// Everything a loader gathers before the model is assembled.
struct TokenizerParts {
  std::string name;
  std::vector<std::pair<std::string, std::int32_t>> vocab;  // the model's
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::int32_t> merge_ranks;  // one per merge when ranks are not the merge order (BpeModel)
  std::string merges_field;               // where the merges came from, for messages ("model.merges")
  BpeOptions bpe;
  std::vector<AddedToken> added_tokens;
  // The contents of special tokens. Decode skips an id whose text is one of them (the reference
  // compares strings, so a normalized special token's normalized text does not count).
  std::unordered_set<std::string> special_contents;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  PostProcessor post_processor;
  DecoderKind decoder = DecoderKind::Join;
  std::unique_ptr<DecoderChain> chain;  // when decoder is Chain
  std::size_t min_vocab_size = 0;       // a GGUF token list may end in ids nothing names
  TokenizerConfig config;
  // Explicit special-token ids (GGUF); otherwise they come from the config's token names.
  std::optional<std::int32_t> bos_id, eos_id, pad_id;
};

// Builds the id tables and the matchers. Throws TokenizerError naming parts.name.
std::shared_ptr<const TokenizerModel> assemble(TokenizerParts parts);

}  // namespace engine::tokenizer
