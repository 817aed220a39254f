#pragma once

// The tokenizer of a model written by model-writer: either a small byte-level BPE tokenizer generated here
// (learnt from a fixed English text, so it is the same on every machine) or a copy of a real one, and the
// same tokenizer as GGUF metadata (tokenizer.ggml.*), as llama.cpp's converter writes it.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/model/model_config.h"

namespace engine::tools {

// GGUF token types (llama.cpp's numbering).
enum class GgufTokenType : std::int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct TokenizerSpec {
  std::string tokenizer_json;         // the files' text
  std::string tokenizer_config_json;  //
  // Every id below tokens.size(): the vocabulary in byte-level spelling, added tokens as written; ids the
  // files leave out are "[PAD{id}]" of type Unused.
  std::vector<std::string> tokens;
  std::vector<GgufTokenType> token_types;
  std::vector<std::string> merges;  // "left right", in rank order
  std::string gguf_pre;             // tokenizer.ggml.pre: "qwen2", "llama-bpe", "tekken" or "gpt-4o"
  std::optional<std::int32_t> bos_id;
  std::int32_t eos_id = 0;             // the chat turn's end (tokenizer_config.json's eos_token)
  std::vector<std::int32_t> stop_ids;  // generation_config.json's eos_token_id: eos_id first
  std::optional<std::int32_t> pad_id;
  bool add_bos = false;
  std::string chat_template;
};

// The generated tokenizer for `arch`: 256 byte tokens, a few hundred merges learnt from a fixed sample
// text, and the family's special tokens (<|endoftext|>, <|im_start|>, <|im_end|> for Qwen;
// <|begin_of_text|>, <|end_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|> for Llama 3), with
// the family's pre-tokenizer, post-processor and chat template; then `added_texts` as added tokens that are
// not special (ids in order after the special ones).
TokenizerSpec generated_tokenizer(model::Architecture arch, std::span<const std::string> added_texts = {});

// A real tokenizer: `dir`/tokenizer.json and `dir`/tokenizer_config.json, copied as they are. Throws
// std::runtime_error naming the file when it is not a byte-level BPE tokenizer GGUF can describe.
TokenizerSpec tokenizer_from_directory(const std::filesystem::path& dir);

// tokenizer.ggml.* and tokenizer.chat_template for a model whose embedding has `rows` rows: the token list
// is padded to `rows` with "[PAD{id}]" tokens of type Unused, as llama.cpp's converter does.
std::vector<std::pair<std::string, format::GgufValue>> gguf_tokenizer_metadata(const TokenizerSpec& spec,
                                                                               std::uint64_t rows);

// The fixed English text the generated tokenizer learns its merges from (also handy test input).
std::string_view tokenizer_sample_text();

}  // namespace engine::tools
