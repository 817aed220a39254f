// Builds the tokenizer a GGUF file's tokenizer.ggml.* metadata describes, equal to the one the model's
// tokenizer.json gives: llama.cpp's converter writes the vocabulary, the merges and the token types, and
// names the pre-tokenizer (tokenizer.ggml.pre); the pipeline around them is the one that name stands for.
#include <array>
#include <string_view>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_model.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

// The pipelines of the tokenizer.json files behind each supported tokenizer.ggml.pre name.
enum class PreKind { Qwen2, Llama3, Gpt2 };

struct PreSpec {
  std::string_view name;
  PreKind kind;
};

constexpr std::array kPreSpecs = {
    PreSpec{"qwen2", PreKind::Qwen2},      PreSpec{"llama3", PreKind::Llama3}, PreSpec{"llama-v3", PreKind::Llama3},
    PreSpec{"llama-bpe", PreKind::Llama3}, PreSpec{"gpt-2", PreKind::Gpt2},
};

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GGUF token types (llama.cpp's llama_token_type).
enum TokenType : std::int64_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class MetadataReader {
 public:
  MetadataReader(const engine::format::GgufLayout& layout, std::string name)
      : layout_(layout), name_(std::move(name)) {}

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw TokenizerError(name_ + ": " + std::string(key) + ": " + what);
  }
  const engine::format::GgufValue* find(std::string_view key) const { return layout_.find(key); }

  std::string string(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) fail(key, "missing");
    const std::string* text = value->as_string();
    if (text == nullptr) fail(key, "expected a string");
    return *text;
  }
  const std::vector<std::string>& strings(std::string_view key, std::size_t limit) const {
    const auto* value = find(key);
    if (value == nullptr) fail(key, "missing");
    const auto* items = value->strings();
    if (items == nullptr) fail(key, "expected an array of strings");
    if (items->size() > limit) {
      fail(key, std::to_string(items->size()) + " entries, more than the limit of " + std::to_string(limit));
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      if (!unicode::is_valid_utf8((*items)[i])) fail(key, "entry " + std::to_string(i) + " is not valid UTF-8");
    }
    return *items;
  }
  std::optional<std::int32_t> token_id(std::string_view key, std::size_t count) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    const auto id = value->as_uint();
    if (!id || *id >= count) fail(key, "expected a token id below " + std::to_string(count));
    return static_cast<std::int32_t>(*id);
  }
  std::optional<bool> boolean(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    const auto flag = value->as_bool();
    if (!flag) fail(key, "expected a boolean");
    return flag;
  }

 private:
  const engine::format::GgufLayout& layout_;
  std::string name_;
};

}  // namespace

Tokenizer Tokenizer::from_gguf(const engine::format::GgufLayout& layout, std::string_view name) {
  const MetadataReader reader(layout, std::string(name));
  const LoadLimits limits;

  const std::string model = reader.string("tokenizer.ggml.model");
  if (model != "gpt2") {
    reader.fail("tokenizer.ggml.model", "unsupported tokenizer model \"" + model + "\" (only gpt2, byte-level BPE)");
  }
  const std::string pre = reader.string("tokenizer.ggml.pre");
  const PreSpec* spec = nullptr;
  for (const auto& candidate : kPreSpecs) {
    if (candidate.name == pre) spec = &candidate;
  }
  if (spec == nullptr) {
    std::string known;
    for (const auto& candidate : kPreSpecs) known += (known.empty() ? "" : ", ") + std::string(candidate.name);
    reader.fail("tokenizer.ggml.pre", "unsupported pre-tokenizer \"" + pre + "\" (supported: " + known + ")");
  }

  const auto& tokens = reader.strings("tokenizer.ggml.tokens", limits.max_vocab);
  std::vector<std::int64_t> types(tokens.size(), kNormal);
  if (const auto* value = reader.find("tokenizer.ggml.token_type")) {
    auto ints = value->is_array() ? value->ints() : std::nullopt;
    if (!ints) reader.fail("tokenizer.ggml.token_type", "expected an array of integers");
    if (ints->size() != tokens.size()) {
      reader.fail("tokenizer.ggml.token_type",
                  std::to_string(ints->size()) + " entries for " + std::to_string(tokens.size()) + " tokens");
    }
    types = std::move(*ints);
  }

  TokenizerParts parts;
  parts.name = std::string(name);
  parts.min_vocab_size = tokens.size();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const auto token_id = static_cast<std::int32_t>(id);
    switch (types[id]) {
      case kUndefined:
      case kNormal:
      case kUnknown:
      case kByte: parts.vocab.emplace_back(tokens[id], token_id); break;
      case kControl:
      case kUserDefined: {
        AddedToken token;
        token.id = token_id;
        token.content = tokens[id];
        token.special = types[id] == kControl;
        if (token.special) parts.special_contents.insert(token.content);
        if (!token.content.empty()) parts.added_tokens.push_back(std::move(token));
        break;
      }
      case kUnused: break;  // padding rows of the embedding: nothing names them
      default:
        reader.fail("tokenizer.ggml.token_type",
                    "entry " + std::to_string(id) + " has unknown type " + std::to_string(types[id]));
    }
  }

  const auto& merges = reader.strings("tokenizer.ggml.merges", limits.max_vocab);
  parts.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& merge = merges[i];
    const auto space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size()) {
      reader.fail("tokenizer.ggml.merges", "entry " + std::to_string(i) + " is not \"left right\": \"" + merge + "\"");
    }
    parts.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  parts.merges_field = "tokenizer.ggml.merges";

  parts.bpe.byte_level = true;
  bool add_bos = false;
  switch (spec->kind) {
    case PreKind::Qwen2: {
      parts.normalizer = std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
      std::vector<std::unique_ptr<PreTokenizer>> steps;
      steps.push_back(
          std::make_unique<SplitPreTokenizer>(Regex::from_oniguruma(kQwen2Pattern), SplitBehavior::Isolated, false));
      steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
      parts.pre_tokenizer = std::make_unique<SequencePreTokenizer>(std::move(steps));
      break;
    }
    case PreKind::Llama3: {
      std::vector<std::unique_ptr<PreTokenizer>> steps;
      steps.push_back(
          std::make_unique<SplitPreTokenizer>(Regex::from_oniguruma(kLlama3Pattern), SplitBehavior::Isolated, false));
      steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
      parts.pre_tokenizer = std::make_unique<SequencePreTokenizer>(std::move(steps));
      parts.bpe.ignore_merges = true;
      add_bos = true;  // Llama 3's template starts with <|begin_of_text|>
      break;
    }
    case PreKind::Gpt2: parts.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>(false, true); break;
  }
  parts.decoder = DecoderKind::ByteLevel;

  parts.bos_id = reader.token_id("tokenizer.ggml.bos_token_id", tokens.size());
  parts.eos_id = reader.token_id("tokenizer.ggml.eos_token_id", tokens.size());
  parts.pad_id = reader.token_id("tokenizer.ggml.padding_token_id", tokens.size());
  const auto unk_id = reader.token_id("tokenizer.ggml.unknown_token_id", tokens.size());
  const auto text_of = [&](const std::optional<std::int32_t>& id) -> std::optional<std::string> {
    if (!id) return std::nullopt;
    return tokens[static_cast<std::size_t>(*id)];
  };
  parts.config.bos_token = text_of(parts.bos_id);
  parts.config.eos_token = text_of(parts.eos_id);
  parts.config.pad_token = text_of(parts.pad_id);
  parts.config.unk_token = text_of(unk_id);
  parts.config.add_bos_token = reader.boolean("tokenizer.ggml.add_bos_token").value_or(add_bos);
  parts.config.add_eos_token = reader.boolean("tokenizer.ggml.add_eos_token").value_or(false);
  if (reader.find("tokenizer.chat_template")) parts.config.chat_template = reader.string("tokenizer.chat_template");

  if (*parts.config.add_bos_token) {
    if (!parts.bos_id)
      reader.fail("tokenizer.ggml.add_bos_token", "is true, but tokenizer.ggml.bos_token_id is missing");
    parts.post_processor.prefix.push_back(*parts.bos_id);
  }
  if (*parts.config.add_eos_token) {
    if (!parts.eos_id)
      reader.fail("tokenizer.ggml.add_eos_token", "is true, but tokenizer.ggml.eos_token_id is missing");
    parts.post_processor.suffix.push_back(*parts.eos_id);
  }
  return Tokenizer(assemble(std::move(parts)));
}

}  // namespace engine::tokenizer
