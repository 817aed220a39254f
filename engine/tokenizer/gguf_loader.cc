// Builds the tokenizer a GGUF file's tokenizer.ggml.* metadata describes, equal to the one the model's
// tokenizer.json gives: llama.cpp's converter writes the vocabulary, the merges and the token types, and
// names the pre-tokenizer (tokenizer.ggml.pre); the pipeline around them is the one that name stands for.
#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_model.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

// The pipelines of the tokenizer.json files behind each supported tokenizer.ggml.pre name (for
// tokenizer.ggml.model "gpt2"), with the patterns llama.cpp's vocabulary code gives each name.
enum class PreKind { Qwen2, Llama3, Gpt2, DeepSeek3, Tekken, SmolLm, Gpt4o };

struct PreSpec {
  std::string_view name;
  PreKind kind;
};

constexpr std::array kPreSpecs = {
    PreSpec{"qwen2", PreKind::Qwen2},           PreSpec{"deepseek-r1-qwen", PreKind::Qwen2},
    PreSpec{"llama3", PreKind::Llama3},         PreSpec{"llama-v3", PreKind::Llama3},
    PreSpec{"llama-bpe", PreKind::Llama3},      PreSpec{"gpt-2", PreKind::Gpt2},
    PreSpec{"deepseek-v3", PreKind::DeepSeek3}, PreSpec{"tekken", PreKind::Tekken},
    PreSpec{"smollm", PreKind::SmolLm},         PreSpec{"gpt-4o", PreKind::Gpt4o},
};

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3 splits three times: digit groups, CJK runs, then words and punctuation.
constexpr std::array<std::string_view, 3> kDeepSeek3Patterns = {
    R"(\p{N}{1,3})",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
// Mistral's Tekken: words split where lowercase meets uppercase, single digits.
constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o, gpt-oss): Tekken's word rule with contractions, digit groups of three.
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Isolated splits by each pattern in turn, then the byte-level mapping (no prefix space, no GPT-2 regex).
std::unique_ptr<PreTokenizer> split_then_byte_level(std::span<const std::string_view> patterns) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const auto pattern : patterns) {
    steps.push_back(
        std::make_unique<SplitPreTokenizer>(Regex::from_oniguruma(pattern), SplitBehavior::Isolated, false));
  }
  steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

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

namespace {

// tokenizer.ggml.model "gpt2": byte-level BPE with the file's merges, in the pipeline tokenizer.ggml.pre
// names. Returns whether that family's tokenizer adds a BOS unless the file says.
bool byte_level_bpe(const MetadataReader& reader, const LoadLimits& limits, TokenizerParts& parts) {
  const std::string pre = reader.string("tokenizer.ggml.pre");
  const PreSpec* spec = nullptr;
  for (const auto& candidate : kPreSpecs) {
    if (candidate.name == pre) spec = &candidate;
  }
  if (spec == nullptr) {
    std::string known;
    for (const auto& candidate : kPreSpecs) known += (known.empty() ? "" : ", ") + std::string(candidate.name);
    reader.fail("tokenizer.ggml.pre", "unsupported pre-tokenizer \"" + pre + "\" (supported: " + known +
                                          "); convert the model with a pre-tokenizer this engine knows");
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
  parts.decoder = DecoderKind::ByteLevel;
  switch (spec->kind) {
    case PreKind::Qwen2:
      parts.normalizer = std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
      parts.pre_tokenizer = split_then_byte_level(std::array{kQwen2Pattern});
      return false;
    case PreKind::Llama3:
      parts.pre_tokenizer = split_then_byte_level(std::array{kLlama3Pattern});
      parts.bpe.ignore_merges = true;
      return true;  // Llama 3's template starts with <|begin_of_text|>
    case PreKind::Gpt2: parts.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>(false, true); return false;
    case PreKind::DeepSeek3: parts.pre_tokenizer = split_then_byte_level(kDeepSeek3Patterns); return false;
    case PreKind::Tekken:
      parts.pre_tokenizer = split_then_byte_level(std::array{kTekkenPattern});
      parts.bpe.ignore_merges = true;
      return true;
    case PreKind::SmolLm: {
      std::vector<std::unique_ptr<PreTokenizer>> steps;
      steps.push_back(make_digits_pre_tokenizer(true));
      steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, true));
      parts.pre_tokenizer = std::make_unique<SequencePreTokenizer>(std::move(steps));
      return false;
    }
    case PreKind::Gpt4o:
      // The o200k tokenizer.json files (gpt-oss) take a word that is a token whole, as tiktoken does;
      // llama.cpp does not, and the tokenizer.json's ids are the ones to give.
      parts.pre_tokenizer = split_then_byte_level(std::array{kGpt4oPattern});
      parts.bpe.ignore_merges = true;
      return false;
  }
  return false;
}

// tokenizer.ggml.model "llama": SentencePiece BPE, which merges the adjacent pair whose concatenation is
// the token of highest score. That is BPE over every pair of tokens that concatenate to a token, ranked
// by the score of the result (equal scores rank equal, so the leftmost pair goes first), in the pipeline
// Hugging Face's converter writes for these models: a "▁" prefix (add_space_prefix) and spaces as "▁",
// unknown characters as <0xNN> byte tokens, and the decoder that undoes both.
bool sentencepiece_bpe(const MetadataReader& reader, const std::vector<std::string>& tokens, TokenizerParts& parts) {
  const auto* value = reader.find("tokenizer.ggml.scores");
  if (value == nullptr) reader.fail("tokenizer.ggml.scores", "missing (a SentencePiece vocabulary merges by score)");
  auto scores = value->is_array() ? value->floats() : std::nullopt;
  if (!scores) reader.fail("tokenizer.ggml.scores", "expected an array of numbers");
  if (scores->size() != tokens.size()) {
    reader.fail("tokenizer.ggml.scores",
                std::to_string(scores->size()) + " entries for " + std::to_string(tokens.size()) + " tokens");
  }

  StringMap<std::int32_t> ids;
  for (const auto& [token, id] : parts.vocab) ids.try_emplace(token, id);
  struct Candidate {
    double score;
    std::size_t left_length;
    std::string_view left, right;
  };
  std::vector<Candidate> candidates;
  for (const auto& [token, id] : parts.vocab) {
    const double score = (*scores)[static_cast<std::size_t>(id)];
    std::size_t cut = 0;
    unicode::next_char(token, cut);
    for (; cut < token.size(); unicode::next_char(token, cut)) {
      const std::string_view left = std::string_view(token).substr(0, cut);
      const std::string_view right = std::string_view(token).substr(cut);
      if (ids.contains(left) && ids.contains(right)) candidates.push_back({score, cut, left, right});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  parts.merges.reserve(candidates.size());
  parts.merge_ranks.reserve(candidates.size());
  std::int32_t rank = -1;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i == 0 || candidates[i].score != candidates[i - 1].score) ++rank;
    parts.merges.emplace_back(std::string(candidates[i].left), std::string(candidates[i].right));
    parts.merge_ranks.push_back(rank);
  }
  parts.merges_field = "tokenizer.ggml.scores";

  parts.bpe.byte_fallback = true;
  parts.bpe.fuse_unk = true;
  const bool space_prefix = reader.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  if (space_prefix) normalizers.push_back(std::make_unique<PrependNormalizer>("\u2581"));
  normalizers.push_back(std::make_unique<ReplaceNormalizer>(Regex::literal(" "), "\u2581"));
  parts.normalizer = std::make_unique<SequenceNormalizer>(std::move(normalizers));

  std::vector<DecoderStep> steps;
  steps.push_back({DecoderStep::Kind::Replace, "\u2581", " "});
  steps.push_back({DecoderStep::Kind::ByteFallback, "", ""});
  steps.push_back({DecoderStep::Kind::Fuse, "", ""});
  if (space_prefix) steps.push_back({DecoderStep::Kind::Strip, "", " ", 1, 0});
  parts.decoder = DecoderKind::Chain;
  parts.chain = std::make_unique<DecoderChain>(std::move(steps));
  return true;  // llama.cpp adds a BOS to SentencePiece models unless the file says otherwise
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const engine::format::GgufLayout& layout, std::string_view name) {
  const MetadataReader reader(layout, std::string(name));
  const LoadLimits limits;

  const std::string model = reader.string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    reader.fail("tokenizer.ggml.model", "unsupported tokenizer model \"" + model +
                                            "\" (supported: gpt2, byte-level BPE; llama, SentencePiece BPE)");
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
  std::optional<std::int32_t> unknown;  // the first UNKNOWN token
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const auto token_id = static_cast<std::int32_t>(id);
    // UNKNOWN (<unk>) is in the model's vocabulary and, as in the tokenizer.json, a special added token.
    // SentencePiece merges may make any token, added ones too (Gemma's "▁▁" is USER_DEFINED and a merge).
    const bool added = types[id] == kControl || types[id] == kUserDefined || types[id] == kUnknown;
    const bool in_vocab = types[id] == kUndefined || types[id] == kNormal || types[id] == kUnknown ||
                          types[id] == kByte || (added && model == "llama");
    if (types[id] == kUnknown && !unknown) unknown = token_id;
    if (in_vocab) parts.vocab.emplace_back(tokens[id], token_id);
    if (added) {
      AddedToken token;
      token.id = token_id;
      token.content = tokens[id];
      token.special = types[id] != kUserDefined;
      if (token.special) parts.special_contents.insert(token.content);
      if (!token.content.empty()) parts.added_tokens.push_back(std::move(token));
    }
    if (!in_vocab && !added && types[id] != kUnused) {  // UNUSED: padding rows of the embedding, nameless
      reader.fail("tokenizer.ggml.token_type", "entry " + std::to_string(id) + " has unknown type " +
                                                   std::to_string(types[id]) + " (known: 0 to 6)");
    }
  }

  const bool add_bos =
      model == "gpt2" ? byte_level_bpe(reader, limits, parts) : sentencepiece_bpe(reader, tokens, parts);

  parts.bos_id = reader.token_id("tokenizer.ggml.bos_token_id", tokens.size());
  parts.eos_id = reader.token_id("tokenizer.ggml.eos_token_id", tokens.size());
  parts.pad_id = reader.token_id("tokenizer.ggml.padding_token_id", tokens.size());
  const auto unk_id = reader.token_id("tokenizer.ggml.unknown_token_id", tokens.size());
  if (model == "llama") parts.bpe.unk_id = unk_id ? unk_id : unknown;
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

namespace {

// The names model-writer writes for the single-pattern pre-tokenizers (the first of each kind's names).
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kSplitPres = {{
    {"qwen2", kQwen2Pattern},
    {"llama-bpe", kLlama3Pattern},
    {"tekken", kTekkenPattern},
    {"gpt-4o", kGpt4oPattern},
}};

}  // namespace

std::optional<std::string_view> gguf_pre_of_split_pattern(std::string_view pattern) {
  for (const auto& [pre, split] : kSplitPres) {
    if (split == pattern) return pre;
  }
  return std::nullopt;
}

std::optional<std::string_view> split_pattern_of_gguf_pre(std::string_view pre) {
  for (const auto& [name, split] : kSplitPres) {
    if (name == pre) return split;
  }
  return std::nullopt;
}

}  // namespace engine::tokenizer
