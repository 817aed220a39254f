#include "engine/model_writer/model_writer_tokenizer.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/format/json.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tools {

namespace {

using Json = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

// Enough merges that common English words become one token, few enough that the embedding stays small.
constexpr std::size_t kMerges = 300;

constexpr std::string_view kSampleText =
    "The river ran past the old mill, where the miller kept his books and his bread. Every morning he "
    "opened the doors, looked at the water, and counted the sacks that the farmers had brought in the "
    "night before. There were seven of them on Monday, nine on Tuesday, and on Wednesday there were none "
    "at all, because the bridge had fallen into the river during the storm.\n"
    "\"What shall we do now?\" asked his daughter. She was the one who kept the accounts when he was "
    "tired, and she knew that a mill without grain is only a house with a wheel. The miller thought for a "
    "long time. Then he said that they would build a boat, and that the boat would carry the grain across "
    "the water until the bridge was built again.\n"
    "So they built the boat. It took them three weeks, and it leaked a little, but it floated. The farmers "
    "came to the other bank with their carts, and the daughter rowed across, and the grain came over one "
    "sack at a time. In the evenings they sat by the fire and talked about the things they would do when "
    "the work was done: travel to the city, read the books in the library, and learn the names of the "
    "stars that they could see above the water.\n"
    "When the new bridge was finished, the people of the town held a festival. There was music and there "
    "was dancing, and the miller gave bread to everyone who came. His daughter kept the boat, and on "
    "quiet days she still rowed out to the middle of the river, where the water was deep and still, and "
    "watched the light change on the surface while the wheel of the mill turned and turned.\n";

// The chat templates of the generated tokenizers: ChatML as Qwen uses it, and Llama 3's header/eot form.
constexpr std::string_view kChatMlTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
constexpr std::string_view kLlama3Template =
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

bool is_letter(unsigned char c) {
  return std::isalpha(c) != 0 || c >= 0x80;
}

// Splits ASCII-ish text roughly as the Split patterns do (a leading space joins the word after it); the
// pieces only decide which merges are learnt, so the approximation costs nothing but merge choice.
std::vector<std::string> pre_split(std::string_view text) {
  std::vector<std::string> pieces;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    std::size_t end = i;
    if (is_letter(at(i)) || (at(i) == ' ' && i + 1 < text.size() && is_letter(at(i + 1)))) {
      end = i + 1;
      while (end < text.size() && is_letter(at(end))) ++end;
    } else if (std::isdigit(at(i)) != 0) {
      end = i + 1;
    } else if (std::isspace(at(i)) != 0) {
      end = i + 1;
      while (end < text.size() && std::isspace(at(end)) != 0) ++end;
      // A space before a word belongs to the word.
      if (end - i > 1 && end < text.size() && text[end - 1] == ' ') --end;
    } else {
      end = i + 1;
      while (end < text.size() && !is_letter(at(end)) && std::isdigit(at(end)) == 0 && std::isspace(at(end)) == 0)
        ++end;
    }
    pieces.emplace_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

// Byte-pair encoding training on the sample text: repeatedly merge the most frequent adjacent pair (ties go
// to the smallest pair, so the result is the same everywhere). Returns merges as raw byte strings.
std::vector<std::pair<std::string, std::string>> learn_merges(std::string_view text, std::size_t count) {
  std::map<std::string, std::int64_t> piece_counts;
  for (auto& piece : pre_split(text)) ++piece_counts[piece];
  std::vector<std::pair<std::vector<std::string>, std::int64_t>> words;
  for (const auto& [piece, n] : piece_counts) {
    std::vector<std::string> symbols;
    for (const char c : piece) symbols.emplace_back(1, c);
    words.emplace_back(std::move(symbols), n);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (merges.size() < count) {
    std::map<std::pair<std::string, std::string>, std::int64_t> pairs;
    for (const auto& [symbols, n] : words) {
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) pairs[{symbols[k], symbols[k + 1]}] += n;
    }
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const auto [left, right] = best->first;
    merges.emplace_back(left, right);
    for (auto& [symbols, n] : words) {
      std::vector<std::string> merged;
      for (std::size_t k = 0; k < symbols.size(); ++k) {
        if (k + 1 < symbols.size() && symbols[k] == left && symbols[k + 1] == right) {
          merged.push_back(left + right);
          ++k;
        } else {
          merged.push_back(symbols[k]);
        }
      }
      symbols = std::move(merged);
    }
  }
  return merges;
}

std::string to_string(const rapidjson::StringBuffer& buffer) {
  return {buffer.GetString(), buffer.GetSize()};
}

void key(Json& json, std::string_view k) {
  json.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void string(Json& json, std::string_view s) {
  json.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void byte_level_step(Json& json) {
  json.StartObject();
  key(json, "type");
  string(json, "ByteLevel");
  key(json, "add_prefix_space");
  json.Bool(false);
  key(json, "trim_offsets");
  json.Bool(false);
  key(json, "use_regex");
  json.Bool(false);
  json.EndObject();
}

// An added token: the family's special tokens, and a scripted model's pieces (not special: their text is
// part of the reply).
struct Special {
  std::string content;
  std::int32_t id;
  bool special = true;
};

std::string generated_tokenizer_json(bool llama, const std::vector<std::string>& vocab,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     const std::vector<Special>& specials) {
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartObject();
  key(json, "version");
  string(json, "1.0");
  key(json, "truncation");
  json.Null();
  key(json, "padding");
  json.Null();
  key(json, "added_tokens");
  json.StartArray();
  for (const auto& s : specials) {
    json.StartObject();
    key(json, "id");
    json.Int(s.id);
    key(json, "content");
    string(json, s.content);
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"}) {
      key(json, flag);
      json.Bool(false);
    }
    key(json, "special");
    json.Bool(s.special);
    json.EndObject();
  }
  json.EndArray();
  key(json, "normalizer");
  if (llama) {
    json.Null();
  } else {
    json.StartObject();
    key(json, "type");
    string(json, "NFC");
    json.EndObject();
  }
  key(json, "pre_tokenizer");
  json.StartObject();
  key(json, "type");
  string(json, "Sequence");
  key(json, "pretokenizers");
  json.StartArray();
  json.StartObject();
  key(json, "type");
  string(json, "Split");
  key(json, "pattern");
  json.StartObject();
  key(json, "Regex");
  // Qwen2's and Llama 3's Split patterns differ in how many digits make a piece.
  string(json, *tokenizer::split_pattern_of_gguf_pre(llama ? "llama-bpe" : "qwen2"));
  json.EndObject();
  key(json, "behavior");
  string(json, "Isolated");
  key(json, "invert");
  json.Bool(false);
  json.EndObject();
  byte_level_step(json);
  json.EndArray();
  json.EndObject();
  key(json, "post_processor");
  if (llama) {
    // Llama 3 starts every encoded text with <|begin_of_text|>.
    const auto& bos = specials.front();
    json.StartObject();
    key(json, "type");
    string(json, "Sequence");
    key(json, "processors");
    json.StartArray();
    byte_level_step(json);
    json.StartObject();
    key(json, "type");
    string(json, "TemplateProcessing");
    const auto piece = [&](const char* kind, std::string_view id) {
      json.StartObject();
      key(json, kind);
      json.StartObject();
      key(json, "id");
      string(json, id);
      key(json, "type_id");
      json.Int(0);
      json.EndObject();
      json.EndObject();
    };
    key(json, "single");
    json.StartArray();
    piece("SpecialToken", bos.content);
    piece("Sequence", "A");
    json.EndArray();
    key(json, "pair");
    json.StartArray();
    piece("SpecialToken", bos.content);
    piece("Sequence", "A");
    piece("SpecialToken", bos.content);
    piece("Sequence", "B");
    json.EndArray();
    key(json, "special_tokens");
    json.StartObject();
    key(json, bos.content);
    json.StartObject();
    key(json, "id");
    string(json, bos.content);
    key(json, "ids");
    json.StartArray();
    json.Int(bos.id);
    json.EndArray();
    key(json, "tokens");
    json.StartArray();
    string(json, bos.content);
    json.EndArray();
    json.EndObject();
    json.EndObject();
    json.EndObject();
    json.EndArray();
    json.EndObject();
  } else {
    byte_level_step(json);
  }
  key(json, "decoder");
  byte_level_step(json);
  key(json, "model");
  json.StartObject();
  key(json, "type");
  string(json, "BPE");
  key(json, "dropout");
  json.Null();
  key(json, "unk_token");
  json.Null();
  key(json, "continuing_subword_prefix");
  string(json, "");
  key(json, "end_of_word_suffix");
  string(json, "");
  key(json, "fuse_unk");
  json.Bool(false);
  key(json, "byte_fallback");
  json.Bool(false);
  key(json, "ignore_merges");
  json.Bool(llama);
  key(json, "vocab");
  json.StartObject();
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    key(json, vocab[id]);
    json.Uint64(id);
  }
  json.EndObject();
  key(json, "merges");
  json.StartArray();
  for (const auto& [left, right] : merges) {
    json.SetFormatOptions(rapidjson::kFormatSingleLineArray);
    json.StartArray();
    string(json, left);
    string(json, right);
    json.EndArray();
    json.SetFormatOptions(rapidjson::kFormatDefault);
  }
  json.EndArray();
  json.EndObject();
  json.EndObject();
  return to_string(buffer) + "\n";
}

std::string generated_tokenizer_config(bool llama, const std::vector<Special>& specials,
                                       std::string_view chat_template) {
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartObject();
  key(json, "add_bos_token");
  json.Bool(llama);
  key(json, "add_prefix_space");
  json.Bool(false);
  key(json, "added_tokens_decoder");
  json.StartObject();
  for (const auto& s : specials) {
    key(json, std::to_string(s.id));
    json.StartObject();
    key(json, "content");
    string(json, s.content);
    for (const char* flag : {"lstrip", "normalized", "rstrip", "single_word"}) {
      key(json, flag);
      json.Bool(false);
    }
    key(json, "special");
    json.Bool(s.special);
    json.EndObject();
  }
  json.EndObject();
  key(json, "bos_token");
  if (llama) {
    string(json, "<|begin_of_text|>");
  } else {
    json.Null();
  }
  key(json, "chat_template");
  string(json, chat_template);
  key(json, "clean_up_tokenization_spaces");
  json.Bool(false);
  key(json, "eos_token");
  string(json, llama ? "<|eot_id|>" : "<|im_end|>");
  key(json, "model_max_length");
  json.Uint64(131072);
  key(json, "pad_token");
  if (llama) {
    json.Null();
  } else {
    string(json, "<|endoftext|>");
  }
  key(json, "tokenizer_class");
  string(json, llama ? "PreTrainedTokenizerFast" : "Qwen2Tokenizer");
  key(json, "unk_token");
  json.Null();
  json.EndObject();
  return to_string(buffer) + "\n";
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

rapidjson::Document parse_file(const std::string& text, const std::filesystem::path& path) {
  std::size_t consumed = 0;
  std::string error;
  auto doc = format::parse_json_prefix(text, consumed, error);
  if (!error.empty()) throw std::runtime_error(path.string() + ": not valid JSON: " + error);
  if (!doc.IsObject()) throw std::runtime_error(path.string() + ": not a JSON object");
  return doc;
}

const rapidjson::Value* member(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return nullptr;
  const auto it = object.FindMember(name);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::string string_of(const rapidjson::Value& value) {
  return {value.GetString(), value.GetStringLength()};
}

// A special token of tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> config_token(const rapidjson::Value& config, const char* name) {
  const auto* value = member(config, name);
  if (value == nullptr) return std::nullopt;
  if (value->IsString()) return string_of(*value);
  if (const auto* content = member(*value, "content"); content != nullptr && content->IsString()) {
    return string_of(*content);
  }
  return std::nullopt;
}

// The Split pattern of a tokenizer.json pre-tokenizer (itself or inside a Sequence), or "".
std::string split_pattern(const rapidjson::Value& pre) {
  if (const auto* type = member(pre, "type"); type != nullptr && type->IsString()) {
    if (string_of(*type) == "Split") {
      if (const auto* regex = member(*member(pre, "pattern"), "Regex"); regex != nullptr && regex->IsString())
        return string_of(*regex);
    }
    if (string_of(*type) == "Sequence") {
      if (const auto* steps = member(pre, "pretokenizers"); steps != nullptr && steps->IsArray()) {
        for (const auto& step : steps->GetArray()) {
          if (auto found = split_pattern(step); !found.empty()) return found;
        }
      }
    }
  }
  return "";
}

// Fills bos/eos/pad, stop ids and GGUF flags from the token list and the config's token names.
void resolve_special_ids(TokenizerSpec& spec, const std::optional<std::string>& bos,
                         const std::optional<std::string>& eos, const std::optional<std::string>& pad,
                         const std::string& config_name) {
  const auto id_of = [&](const std::string& text) -> std::optional<std::int32_t> {
    for (std::size_t id = 0; id < spec.tokens.size(); ++id) {
      if (spec.tokens[id] == text && spec.token_types[id] != GgufTokenType::Unused)
        return static_cast<std::int32_t>(id);
    }
    return std::nullopt;
  };
  if (!eos) throw std::runtime_error(config_name + ": names no eos_token");
  const auto eos_id = id_of(*eos);
  if (!eos_id) throw std::runtime_error(config_name + ": eos_token \"" + *eos + "\" is not a token");
  spec.eos_id = *eos_id;
  // Qwen's configs name no bos_token, but their config.json gives <|endoftext|> as bos_token_id.
  spec.bos_id = bos ? id_of(*bos) : id_of("<|endoftext|>");
  spec.pad_id = pad ? id_of(*pad) : std::nullopt;
  spec.stop_ids = {spec.eos_id};
  for (const char* stop : {"<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>"}) {
    const auto id = id_of(stop);
    if (id && std::find(spec.stop_ids.begin(), spec.stop_ids.end(), *id) == spec.stop_ids.end() &&
        spec.token_types[static_cast<std::size_t>(*id)] == GgufTokenType::Control) {
      spec.stop_ids.push_back(*id);
    }
  }
}

}  // namespace

std::string_view tokenizer_sample_text() {
  return kSampleText;
}

TokenizerSpec generated_tokenizer(model::Architecture arch, std::span<const std::string> added_texts) {
  const bool llama = arch == model::Architecture::Llama;
  const auto raw_merges = learn_merges(kSampleText, kMerges);

  TokenizerSpec spec;
  std::vector<std::pair<std::string, std::string>> merges;
  std::set<std::string> known;
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(tokenizer::unicode::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    known.insert(spec.tokens.back());
  }
  for (const auto& [left, right] : raw_merges) {
    auto l = tokenizer::unicode::bytes_to_byte_level(left);
    auto r = tokenizer::unicode::bytes_to_byte_level(right);
    if (known.insert(l + r).second) spec.tokens.push_back(l + r);
    spec.merges.push_back(l + " " + r);
    merges.emplace_back(std::move(l), std::move(r));
  }
  const std::vector<std::string> vocab = spec.tokens;
  spec.token_types.assign(spec.tokens.size(), GgufTokenType::Normal);

  std::vector<std::string> special_texts =
      llama ? std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                       "<|end_header_id|>", "<|eot_id|>"}
            : std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  // Phi-3's vocabulary keeps SentencePiece's specials, and llama.cpp looks them up by name in every file
  // whose general.name says phi3 (it fails to load one without them).
  if (arch == model::Architecture::Phi3) special_texts.insert(special_texts.end(), {"<unk>", "<s>", "</s>"});
  std::vector<Special> specials;
  for (const auto& text : special_texts) {
    specials.push_back({text, static_cast<std::int32_t>(spec.tokens.size())});
    spec.tokens.push_back(text);
    spec.token_types.push_back(GgufTokenType::Control);
  }
  for (const auto& text : added_texts) {
    specials.push_back({text, static_cast<std::int32_t>(spec.tokens.size()), false});
    spec.tokens.push_back(text);
    spec.token_types.push_back(GgufTokenType::UserDefined);
  }

  spec.chat_template = std::string(llama ? kLlama3Template : kChatMlTemplate);
  spec.tokenizer_json = generated_tokenizer_json(llama, vocab, merges, specials);
  spec.tokenizer_config_json = generated_tokenizer_config(llama, specials, spec.chat_template);
  spec.gguf_pre = llama ? "llama-bpe" : "qwen2";
  spec.add_bos = llama;
  resolve_special_ids(spec, llama ? std::optional<std::string>("<|begin_of_text|>") : std::nullopt,
                      llama ? "<|eot_id|>" : "<|im_end|>",
                      llama ? std::nullopt : std::optional<std::string>("<|endoftext|>"), "tokenizer_config.json");
  return spec;
}

TokenizerSpec tokenizer_from_directory(const std::filesystem::path& dir) {
  const auto json_path = dir / "tokenizer.json";
  const auto config_path = dir / "tokenizer_config.json";
  TokenizerSpec spec;
  spec.tokenizer_json = read_text(json_path);
  spec.tokenizer_config_json = read_text(config_path);
  const auto doc = parse_file(spec.tokenizer_json, json_path);
  const auto config = parse_file(spec.tokenizer_config_json, config_path);
  const auto fail = [&](const std::string& what) { throw std::runtime_error(json_path.string() + ": " + what); };

  const auto* model = member(doc, "model");
  const auto* type = model != nullptr ? member(*model, "type") : nullptr;
  if (type == nullptr || !type->IsString() || string_of(*type) != "BPE") fail("model.type is not BPE");
  const auto* pre = member(doc, "pre_tokenizer");
  const std::string pattern = pre != nullptr ? split_pattern(*pre) : "";
  if (const auto gguf_pre = tokenizer::gguf_pre_of_split_pattern(pattern)) {
    spec.gguf_pre = std::string(*gguf_pre);
  } else {
    fail("the pre-tokenizer is not Qwen2's, Llama 3's, Tekken's or o200k's, so tokenizer.ggml.pre cannot name it");
  }

  std::map<std::int64_t, std::pair<std::string, GgufTokenType>> by_id;
  const auto* vocab = member(*model, "vocab");
  if (vocab == nullptr || !vocab->IsObject()) fail("model.vocab is not an object");
  for (const auto& entry : vocab->GetObject()) {
    if (!entry.value.IsInt64() || entry.value.GetInt64() < 0) fail("model.vocab holds a bad id");
    by_id[entry.value.GetInt64()] = {string_of(entry.name), GgufTokenType::Normal};
  }
  if (const auto* added = member(doc, "added_tokens"); added != nullptr && added->IsArray()) {
    for (const auto& token : added->GetArray()) {
      const auto* id = member(token, "id");
      const auto* content = member(token, "content");
      if (id == nullptr || !id->IsInt64() || content == nullptr || !content->IsString())
        fail("added_tokens holds an entry without id or content");
      const auto* special = member(token, "special");
      const bool is_special = special != nullptr && special->IsBool() && special->GetBool();
      by_id[id->GetInt64()] = {string_of(*content), is_special ? GgufTokenType::Control : GgufTokenType::UserDefined};
    }
  }
  if (by_id.empty()) fail("the vocabulary is empty");
  const auto count = static_cast<std::size_t>(by_id.rbegin()->first) + 1;
  spec.tokens.resize(count);
  spec.token_types.assign(count, GgufTokenType::Unused);
  for (std::size_t id = 0; id < count; ++id) spec.tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (auto& [id, entry] : by_id) {
    spec.tokens[static_cast<std::size_t>(id)] = std::move(entry.first);
    spec.token_types[static_cast<std::size_t>(id)] = entry.second;
  }

  const auto* merges = member(*model, "merges");
  if (merges == nullptr || !merges->IsArray()) fail("model.merges is not an array");
  spec.merges.reserve(merges->Size());
  for (const auto& merge : merges->GetArray()) {
    if (merge.IsString()) {
      spec.merges.push_back(string_of(merge));
    } else if (merge.IsArray() && merge.Size() == 2 && merge[0].IsString() && merge[1].IsString()) {
      spec.merges.push_back(string_of(merge[0]) + " " + string_of(merge[1]));
    } else {
      fail("model.merges holds an entry that is not a pair");
    }
  }

  if (const auto* chat = member(config, "chat_template")) {
    if (chat->IsString()) {
      spec.chat_template = string_of(*chat);
    } else if (chat->IsArray()) {
      for (const auto& entry : chat->GetArray()) {
        const auto* name = member(entry, "name");
        const auto* text = member(entry, "template");
        if (text == nullptr || !text->IsString()) continue;
        const bool is_default = name != nullptr && name->IsString() && string_of(*name) == "default";
        if (is_default || spec.chat_template.empty()) spec.chat_template = string_of(*text);
        if (is_default) break;
      }
    }
  }
  const auto* add_bos = member(config, "add_bos_token");
  spec.add_bos = add_bos != nullptr && add_bos->IsBool() ? add_bos->GetBool() : spec.gguf_pre == "llama-bpe";
  resolve_special_ids(spec, config_token(config, "bos_token"), config_token(config, "eos_token"),
                      config_token(config, "pad_token"), config_path.string());
  return spec;
}

std::vector<std::pair<std::string, format::GgufValue>> gguf_tokenizer_metadata(const TokenizerSpec& spec,
                                                                               std::uint64_t rows) {
  using format::GgufValue;
  if (rows < spec.tokens.size()) {
    throw std::invalid_argument("the embedding has " + std::to_string(rows) + " rows, fewer than the tokenizer's " +
                                std::to_string(spec.tokens.size()) + " tokens");
  }
  std::vector<std::string> tokens = spec.tokens;
  std::vector<std::int32_t> types;
  types.reserve(rows);
  for (const auto type : spec.token_types) types.push_back(static_cast<std::int32_t>(type));
  while (tokens.size() < rows) {
    tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
    types.push_back(static_cast<std::int32_t>(GgufTokenType::Unused));
  }
  std::vector<std::pair<std::string, GgufValue>> out;
  out.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
  out.emplace_back("tokenizer.ggml.pre", GgufValue::string(spec.gguf_pre));
  out.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  out.emplace_back("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(types));
  out.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(spec.merges));
  if (spec.bos_id) {
    out.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::scalar(static_cast<std::uint32_t>(*spec.bos_id)));
  }
  out.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::scalar(static_cast<std::uint32_t>(spec.eos_id)));
  if (spec.pad_id) {
    out.emplace_back("tokenizer.ggml.padding_token_id", GgufValue::scalar(static_cast<std::uint32_t>(*spec.pad_id)));
  }
  out.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::scalar(spec.add_bos));
  if (!spec.chat_template.empty()) {
    out.emplace_back("tokenizer.chat_template", GgufValue::string(spec.chat_template));
  }
  return out;
}

}  // namespace engine::tools
