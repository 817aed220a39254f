#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer_error.h"

namespace engine::format {
struct GgufLayout;
}

namespace engine::tokenizer {

struct TokenizerModel;  // the loaded pipeline, shared by copies of a Tokenizer (tokenizer_model.h)

// Limits on what a loader reads, so a hostile file cannot make it allocate without bound.
struct LoadLimits {
  std::uintmax_t max_json_bytes = 256u << 20;   // tokenizer.json (the largest public ones are ~35 MB)
  std::uintmax_t max_config_bytes = 16u << 20;  // tokenizer_config.json (chat templates can be large)
  std::size_t max_vocab = 4u << 20;             // tokens, merges and added tokens, each
  std::size_t max_nesting = 16;                 // Sequence normalizers / pre-tokenizers inside each other
};

// What tokenizer_config.json (or the GGUF metadata) says beside the tokenizer itself. The tokenizer does
// not act on these (the post-processor decides what encode adds); they are exposed for the server.
struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<std::string> chat_template;  // the default template when the file lists several
};

// A Hugging Face `tokenizers` pipeline (added tokens, normalizer, pre-tokenizer, BPE model, post-processor,
// decoder), loaded from tokenizer.json or from GGUF metadata, and producing the same ids as the reference
// implementation. Copies share the loaded tables; every const method may be called from many threads.
class Tokenizer {
 public:
  // Reads tokenizer.json and, when given, tokenizer_config.json. Throws TokenizerError naming the file and
  // the field for anything malformed or unsupported.
  static Tokenizer from_json_file(const std::filesystem::path& tokenizer_json,
                                  const std::optional<std::filesystem::path>& tokenizer_config = std::nullopt,
                                  const LoadLimits& limits = {});
  // Reads `dir`/tokenizer.json and `dir`/tokenizer_config.json when that exists.
  static Tokenizer from_directory(const std::filesystem::path& dir, const LoadLimits& limits = {});
  // The same from text in memory; `name` stands for the file in error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view name,
                             std::optional<std::string_view> tokenizer_config = std::nullopt,
                             const LoadLimits& limits = {});
  // Builds the tokenizer a GGUF file describes. tokenizer.ggml.model "gpt2" (byte-level BPE): the pipeline
  // its tokenizer.ggml.pre names (qwen2 / deepseek-r1-qwen, llama3 / llama-v3 / llama-bpe, gpt-2,
  // deepseek-v3, tekken, smollm, gpt-4o; others are refused by name) around the file's tokens and merges.
  // "llama" (SentencePiece BPE): the file's tokens merged by tokenizer.ggml.scores, with the "▁" prefix
  // (tokenizer.ggml.add_space_prefix, default true) and <0xNN> byte tokens for what no piece covers, in
  // the pipeline Hugging Face's converter writes for Llama 2 and Gemma. CONTROL tokens become special added
  // tokens, UNKNOWN ones too (and stay in the vocabulary), USER_DEFINED ones plain added tokens, UNUSED
  // ones (padding rows) name nothing. That is the tokenizer.json's tokenizer when the converter marked
  // exactly its special tokens CONTROL (llama.cpp also marks tokens that look special, like
  // <|fim_prefix|>, which then count as special in decode). Throws TokenizerError naming `name` and the key.
  static Tokenizer from_gguf(const engine::format::GgufLayout& layout, std::string_view name = "GGUF metadata");

  // Text to ids. Invalid UTF-8 is read as String::from_utf8_lossy would (U+FFFD per bad sequence).
  // `add_special_tokens` runs the post-processor (e.g. a BOS the model asks for).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Appends to `ids` instead of returning a new vector.
  void encode_into(std::string_view text, bool add_special_tokens, std::vector<std::int32_t>& ids) const;

  // Ids to text, as the reference's decode: unknown ids are dropped, special tokens too when asked, and
  // bytes that are not valid UTF-8 become U+FFFD.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // The token's text as the vocabulary spells it (byte-level tokens in their mapped form, e.g. "Ġthe").
  std::optional<std::string_view> id_to_token(std::int32_t id) const;
  // The bytes `id` contributes to decode, before the lossy UTF-8 step (a byte-level token may end inside a
  // UTF-8 character), or nullopt for ids nothing names. Structured outputs match grammars over these.
  std::optional<std::string_view> id_to_bytes(std::int32_t id) const;
  // Whether decode puts a space between tokens (a tokenizer.json without a decoder, as the reference does),
  // so that the decoded text is not the concatenation of id_to_bytes.
  bool decode_joins_with_spaces() const;
  // One past the largest id: the model's vocabulary and the added tokens (for GGUF, the length of the
  // token list, padding rows included). The model's embedding may have more rows.
  std::size_t vocab_size() const;
  bool is_special(std::int32_t id) const;
  // Ids of the special added tokens, ascending.
  std::span<const std::int32_t> special_ids() const;

  std::optional<std::int32_t> bos_id() const;
  std::optional<std::int32_t> eos_id() const;
  std::optional<std::int32_t> pad_id() const;
  const TokenizerConfig& config() const;

 private:
  friend class IncrementalDecoder;
  explicit Tokenizer(std::shared_ptr<const TokenizerModel> model) : model_(std::move(model)) {}

  std::shared_ptr<const TokenizerModel> model_;
};

// Streams decode: feed ids one at a time and get text that is safe to emit, never half a UTF-8 character.
// The concatenation of every push() and the final flush() equals Tokenizer::decode of all the ids.
// Not thread-safe itself (one per stream); it keeps the tokenizer's tables alive.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Text completed by this id (possibly empty while a character is still incomplete).
  std::string push(std::int32_t id);
  // The rest at the end of the stream: an incomplete character becomes U+FFFD. Resets the decoder.
  std::string flush();

 private:
  std::shared_ptr<const TokenizerModel> model_;
  bool skip_special_tokens_;
  bool first_ = true;                // at the text's start (joining with spaces, or stripping it, depends on it)
  std::string pending_;              // bytes of an incomplete UTF-8 character
  std::vector<std::string> window_;  // DecoderChain: token texts not yet settled
};

// Byte-level BPE tokenizers whose pre-tokenizer is one Split (then ByteLevel), as tokenizer.json writes the
// pattern and as GGUF's tokenizer.ggml.pre names it (llama.cpp's names): "qwen2", "llama-bpe", "tekken", "gpt-4o"
// (o200k: GPT-4o, gpt-oss). nullopt for a pattern or name that is not one of them.
std::optional<std::string_view> gguf_pre_of_split_pattern(std::string_view pattern);
std::optional<std::string_view> split_pattern_of_gguf_pre(std::string_view pre);

}  // namespace engine::tokenizer
