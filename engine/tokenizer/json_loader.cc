// Reads tokenizer.json (and tokenizer_config.json) into the parts of a tokenizer.
#include <rapidjson/document.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "engine/format/json.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_model.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

using rapidjson::Value;

std::string describe(const Value& value) {
  return std::string(engine::format::json_type_name(value));
}

// Walks a parsed document, naming the file and the field in every error.
class Reader {
 public:
  Reader(std::string name, const LoadLimits& limits) : name_(std::move(name)), limits_(limits) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw TokenizerError(name_ + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  const std::string& name() const { return name_; }
  const LoadLimits& limits() const { return limits_; }

  // The member, or null when it is absent or JSON null.
  const Value* find(const Value& object, const char* key) const {
    const auto it = object.FindMember(key);
    if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
    return &it->value;
  }
  const Value& require(const Value& object, const std::string& path, const char* key) const {
    const Value* value = find(object, key);
    if (value == nullptr) fail(join(path, key), "missing");
    return *value;
  }
  const Value& object(const Value& value, const std::string& path) const {
    if (!value.IsObject()) fail(path, "expected an object, found " + describe(value));
    return value;
  }
  const Value& array(const Value& value, const std::string& path) const {
    if (!value.IsArray()) fail(path, "expected an array, found " + describe(value));
    return value;
  }
  std::string string(const Value& value, const std::string& path) const {
    if (!value.IsString()) fail(path, "expected a string, found " + describe(value));
    return std::string(value.GetString(), value.GetStringLength());
  }
  std::string string_member(const Value& object, const std::string& path, const char* key) const {
    return string(require(object, path, key), join(path, key));
  }
  bool boolean(const Value& object, const std::string& path, const char* key, bool fallback) const {
    const Value* value = find(object, key);
    if (value == nullptr) return fallback;
    if (!value->IsBool()) fail(join(path, key), "expected a boolean, found " + describe(*value));
    return value->GetBool();
  }
  std::int32_t id(const Value& value, const std::string& path) const {
    if (!value.IsUint64() || value.GetUint64() >= limits_.max_vocab) {
      fail(path, "expected a token id below " + std::to_string(limits_.max_vocab) + ", found " +
                     (value.IsNumber() ? "a number out of range" : describe(value)));
    }
    return static_cast<std::int32_t>(value.GetUint64());
  }
  void check_count(std::size_t count, const std::string& path) const {
    if (count > limits_.max_vocab) {
      fail(path, std::to_string(count) + " entries, more than the limit of " + std::to_string(limits_.max_vocab));
    }
  }
  void check_depth(std::size_t depth, const std::string& path) const {
    if (depth > limits_.max_nesting) fail(path, "nested deeper than " + std::to_string(limits_.max_nesting));
  }

  static std::string join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
  static std::string index(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

 private:
  std::string name_;
  LoadLimits limits_;
};

rapidjson::Document parse_document(std::string_view text, const std::string& name) {
  std::size_t consumed = 0;
  std::string error;
  rapidjson::Document doc = engine::format::parse_json_prefix(text, consumed, error);
  if (!error.empty()) throw TokenizerError(name + ": not valid JSON: " + error);
  for (std::size_t i = consumed; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      throw TokenizerError(name + ": not valid JSON: unexpected data after the document at byte " + std::to_string(i));
    }
  }
  if (!doc.IsObject()) throw TokenizerError(name + ": expected a JSON object at the top");
  return doc;
}

std::string read_bounded(const std::filesystem::path& path, std::uintmax_t limit) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw TokenizerError(path.string() + ": cannot read: " + error.message());
  if (size > limit) {
    throw TokenizerError(path.string() + ": " + std::to_string(size) + " bytes, more than the limit of " +
                         std::to_string(limit));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size))) {
    throw TokenizerError(path.string() + ": cannot read");
  }
  return text;
}

Regex compile(const Reader& reader, const Value& pattern, const std::string& path, bool allow_empty) {
  reader.object(pattern, path);
  try {
    if (const Value* regex = reader.find(pattern, "Regex")) {
      return Regex::from_oniguruma(reader.string(*regex, Reader::join(path, "Regex")));
    }
    if (const Value* literal = reader.find(pattern, "String")) {
      const std::string text = reader.string(*literal, Reader::join(path, "String"));
      if (text.empty() && !allow_empty) reader.fail(Reader::join(path, "String"), "an empty pattern is not supported");
      // The reference's Split treats an empty string as matching nowhere.
      if (text.empty()) return Regex::from_pcre2("(?!)");
      return Regex::literal(text);
    }
  } catch (const std::invalid_argument& e) {
    reader.fail(path, std::string("bad regex: ") + e.what());
  }
  reader.fail(path, "expected {\"Regex\": ...} or {\"String\": ...}");
}

std::unique_ptr<Normalizer> parse_normalizer(const Reader& reader, const Value& value, const std::string& path,
                                             std::size_t depth) {
  reader.check_depth(depth, path);
  reader.object(value, path);
  const std::string type = reader.string_member(value, path, "type");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(reader.boolean(value, path, "strip_left", true),
                                             reader.boolean(value, path, "strip_right", true));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(reader.string_member(value, path, "prepend"));
  if (type == "Replace") {
    const std::string pattern_path = Reader::join(path, "pattern");
    Regex pattern = compile(reader, reader.require(value, path, "pattern"), pattern_path, false);
    return std::make_unique<ReplaceNormalizer>(std::move(pattern), reader.string_member(value, path, "content"));
  }
  if (type == "Sequence") {
    const std::string list_path = Reader::join(path, "normalizers");
    const Value& list = reader.array(reader.require(value, path, "normalizers"), list_path);
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      steps.push_back(parse_normalizer(reader, list[i], Reader::index(list_path, i), depth + 1));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  reader.fail(Reader::join(path, "type"), "unsupported normalizer type \"" + type + "\"");
}

// One character of text ("▁" for Metaspace, " " for Strip), as the reference's char fields.
std::string one_char(const Reader& reader, const Value& object, const std::string& path, const char* key,
                     std::optional<std::string> fallback) {
  const Value* value = reader.find(object, key);
  if (value == nullptr && fallback) return *fallback;
  std::string text =
      reader.string(value == nullptr ? reader.require(object, path, key) : *value, Reader::join(path, key));
  std::size_t pos = 0;
  if (!text.empty()) unicode::next_char(text, pos);
  if (text.empty() || pos != text.size()) {
    reader.fail(Reader::join(path, key), "expected one character, found \"" + text + "\"");
  }
  return text;
}

struct MetaspaceOptions {
  std::string replacement;
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
};

// Metaspace's fields, shared by the pre-tokenizer and the decoder, read as the reference reads them:
// prepend_scheme defaults to always, and the older add_prefix_space may only say false beside "never".
MetaspaceOptions parse_metaspace(const Reader& reader, const Value& value, const std::string& path) {
  MetaspaceOptions options;
  options.replacement = one_char(reader, value, path, "replacement", std::nullopt);
  options.split = reader.boolean(value, path, "split", true);
  std::string name = "always";
  if (const Value* scheme = reader.find(value, "prepend_scheme")) {
    name = reader.string(*scheme, Reader::join(path, "prepend_scheme"));
  }
  constexpr std::array<std::pair<std::string_view, PrependScheme>, 3> kSchemes = {
      {{"always", PrependScheme::Always}, {"first", PrependScheme::First}, {"never", PrependScheme::Never}}};
  const auto scheme = std::find_if(kSchemes.begin(), kSchemes.end(), [&](const auto& s) { return s.first == name; });
  if (scheme == kSchemes.end()) {
    reader.fail(Reader::join(path, "prepend_scheme"),
                "unknown prepend scheme \"" + name + "\" (expected always, first or never)");
  }
  options.prepend = scheme->second;
  if (!reader.boolean(value, path, "add_prefix_space", true) && options.prepend != PrependScheme::Never) {
    reader.fail(Reader::join(path, "add_prefix_space"),
                "false does not match prepend_scheme \"" + name +
                    "\" (the reference refuses the file too); write \"prepend_scheme\": \"never\"");
  }
  return options;
}

struct PreTokenizerState {
  std::string byte_level_path;  // where the ByteLevel step is, once seen
};

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Reader& reader, const Value& value, const std::string& path,
                                                  std::size_t depth, PreTokenizerState& state) {
  reader.check_depth(depth, path);
  reader.object(value, path);
  const std::string type = reader.string_member(value, path, "type");
  if (type == "Sequence") {
    const std::string list_path = Reader::join(path, "pretokenizers");
    const Value& list = reader.array(reader.require(value, path, "pretokenizers"), list_path);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      steps.push_back(parse_pre_tokenizer(reader, list[i], Reader::index(list_path, i), depth + 1, state));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  // The model reads raw bytes where ByteLevel would have mapped them, so nothing may come after it.
  if (!state.byte_level_path.empty()) {
    reader.fail(path, "a pre-tokenizer after ByteLevel (" + state.byte_level_path + ") is not supported");
  }
  if (type == "ByteLevel") {
    state.byte_level_path = path;
    return std::make_unique<ByteLevelPreTokenizer>(reader.boolean(value, path, "add_prefix_space", true),
                                                   reader.boolean(value, path, "use_regex", true));
  }
  if (type == "Metaspace") {
    MetaspaceOptions options = parse_metaspace(reader, value, path);
    return std::make_unique<MetaspacePreTokenizer>(std::move(options.replacement), options.prepend, options.split);
  }
  if (type == "Digits") return make_digits_pre_tokenizer(reader.boolean(value, path, "individual_digits", false));
  if (type == "Split") {
    Regex pattern = compile(reader, reader.require(value, path, "pattern"), Reader::join(path, "pattern"), true);
    const std::string behavior = reader.string_member(value, path, "behavior");
    SplitBehavior split;
    if (behavior == "Removed") {
      split = SplitBehavior::Removed;
    } else if (behavior == "Isolated") {
      split = SplitBehavior::Isolated;
    } else if (behavior == "MergedWithPrevious") {
      split = SplitBehavior::MergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      split = SplitBehavior::MergedWithNext;
    } else if (behavior == "Contiguous") {
      split = SplitBehavior::Contiguous;
    } else {
      reader.fail(Reader::join(path, "behavior"), "unknown split behavior \"" + behavior + "\"");
    }
    return std::make_unique<SplitPreTokenizer>(std::move(pattern), split, reader.boolean(value, path, "invert", false));
  }
  reader.fail(Reader::join(path, "type"), "unsupported pre-tokenizer type \"" + type + "\"");
}

void parse_model(const Reader& reader, const Value& value, TokenizerParts& parts) {
  const std::string path = "model";
  reader.object(value, path);
  const Value* type = reader.find(value, "type");
  if (type != nullptr && reader.string(*type, "model.type") != "BPE") {
    reader.fail("model.type", "unsupported model type \"" + reader.string(*type, "model.type") + "\" (only BPE)");
  }
  if (type == nullptr && reader.find(value, "merges") == nullptr) reader.fail("model.type", "missing");

  if (const Value* dropout = reader.find(value, "dropout")) {
    if (!dropout->IsNumber() || dropout->GetDouble() != 0.0) {
      reader.fail("model.dropout", "BPE dropout is random; only null or 0 is supported");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const Value* affix = reader.find(value, key);
        affix != nullptr && !reader.string(*affix, Reader::join(path, key)).empty()) {
      reader.fail(Reader::join(path, key), "subword prefixes and suffixes are not supported");
    }
  }
  parts.bpe.ignore_merges = reader.boolean(value, path, "ignore_merges", false);
  parts.bpe.fuse_unk = reader.boolean(value, path, "fuse_unk", false);
  parts.bpe.byte_fallback = reader.boolean(value, path, "byte_fallback", false);

  const Value& vocab = reader.object(reader.require(value, path, "vocab"), "model.vocab");
  reader.check_count(vocab.MemberCount(), "model.vocab");
  parts.vocab.reserve(vocab.MemberCount());
  for (auto it = vocab.MemberBegin(); it != vocab.MemberEnd(); ++it) {
    std::string token(it->name.GetString(), it->name.GetStringLength());
    const std::int32_t id = reader.id(it->value, "model.vocab[\"" + token + "\"]");
    parts.vocab.emplace_back(std::move(token), id);
  }

  if (const Value* unk = reader.find(value, "unk_token")) {
    const std::string token = reader.string(*unk, "model.unk_token");
    const auto it =
        std::find_if(parts.vocab.begin(), parts.vocab.end(), [&](const auto& entry) { return entry.first == token; });
    if (it == parts.vocab.end()) reader.fail("model.unk_token", "\"" + token + "\" is not in model.vocab");
    parts.bpe.unk_id = it->second;
  }

  const std::string merges_path = "model.merges";
  const Value& merges = reader.array(reader.require(value, path, "merges"), merges_path);
  reader.check_count(merges.Size(), merges_path);
  parts.merges.reserve(merges.Size());
  for (rapidjson::SizeType i = 0; i < merges.Size(); ++i) {
    const Value& merge = merges[i];
    const std::string merge_path = Reader::index(merges_path, i);
    if (merge.IsString()) {
      // "a b": tokens never hold a space in a vocabulary whose merges are written this way.
      const std::string_view text(merge.GetString(), merge.GetStringLength());
      const auto space = text.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 == text.size()) {
        reader.fail(merge_path, "expected \"left right\", found \"" + std::string(text) + "\"");
      }
      parts.merges.emplace_back(std::string(text.substr(0, space)), std::string(text.substr(space + 1)));
    } else if (merge.IsArray() && merge.Size() == 2) {
      parts.merges.emplace_back(reader.string(merge[0], Reader::index(merge_path, 0)),
                                reader.string(merge[1], Reader::index(merge_path, 1)));
    } else {
      reader.fail(merge_path, "expected \"left right\" or [left, right], found " + describe(merge));
    }
  }
  parts.merges_field = merges_path;
}

bool same_token(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.special == b.special && a.single_word == b.single_word && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized;
}

void parse_added_tokens(const Reader& reader, const Value& value, TokenizerParts& parts) {
  const std::string path = "added_tokens";
  reader.array(value, path);
  reader.check_count(value.Size(), path);

  // The reference does not take the ids in the file as given: it adds the tokens in file order, each
  // getting the id its content already has (as an added token, or in the model's vocabulary) or else the
  // next free one after the model's vocabulary, and only warns when that differs from the file.
  // Well-formed files agree; for the others, the reference's ids are the ones the model was trained with.
  // The model's ids of the added contents, found in one pass over the vocabulary (later duplicates win, as
  // in the reference's map). New ids start after the model's vocabulary.
  StringMap<std::int32_t> model_ids;
  for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
    if (value[i].IsObject()) {
      if (const Value* content = reader.find(value[i], "content"); content != nullptr && content->IsString()) {
        model_ids.try_emplace(std::string(content->GetString(), content->GetStringLength()), -1);
      }
    }
  }
  for (const auto& [token, id] : parts.vocab) {
    if (const auto it = model_ids.find(token); it != model_ids.end()) it->second = id;
  }
  std::erase_if(model_ids, [](const auto& entry) { return entry.second < 0; });
  std::int32_t next_id = static_cast<std::int32_t>(parts.vocab.size());
  StringMap<std::int32_t> added_ids;
  std::map<std::int32_t, AddedToken> by_id;

  for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
    const std::string item = Reader::index(path, i);
    const Value& entry = reader.object(value[i], item);
    AddedToken token;
    reader.id(reader.require(entry, item, "id"), Reader::join(item, "id"));  // checked; the id is assigned below
    token.content = reader.string_member(entry, item, "content");
    token.special = reader.boolean(entry, item, "special", false);
    token.single_word = reader.boolean(entry, item, "single_word", false);
    token.lstrip = reader.boolean(entry, item, "lstrip", false);
    token.rstrip = reader.boolean(entry, item, "rstrip", false);
    token.normalized = reader.boolean(entry, item, "normalized", !token.special);
    if (token.content.empty()) continue;
    const auto added = added_ids.find(token.content);
    if (added != added_ids.end() && same_token(by_id[added->second], token)) continue;
    if (added != added_ids.end()) {
      token.id = added->second;
    } else if (const auto model = model_ids.find(token.content); model != model_ids.end()) {
      token.id = model->second;
    } else {
      token.id = next_id++;
    }
    if (static_cast<std::size_t>(token.id) >= reader.limits().max_vocab) {
      reader.fail(Reader::join(item, "id"), "the token would get id " + std::to_string(token.id) + ", not below " +
                                                std::to_string(reader.limits().max_vocab));
    }
    added_ids.insert_or_assign(token.content, token.id);
    if (token.special) parts.special_contents.insert(token.content);
    by_id.insert_or_assign(token.id, token);
  }
  for (auto& [id, token] : by_id) parts.added_tokens.push_back(std::move(token));
}

// Adds what one post-processor puts around a single sequence to `post`.
void parse_post_processor(const Reader& reader, const Value& value, const std::string& path, std::size_t depth,
                          PostProcessor& post) {
  reader.check_depth(depth, path);
  reader.object(value, path);
  const std::string type = reader.string_member(value, path, "type");
  std::vector<std::int32_t> prefix, suffix;
  if (type == "ByteLevel") {
    return;  // it only trims offsets
  } else if (type == "Sequence") {
    const std::string list_path = Reader::join(path, "processors");
    const Value& list = reader.array(reader.require(value, path, "processors"), list_path);
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      parse_post_processor(reader, list[i], Reader::index(list_path, i), depth + 1, post);
    }
    return;
  } else if (type == "TemplateProcessing") {
    const std::string single_path = Reader::join(path, "single");
    const Value& single = reader.array(reader.require(value, path, "single"), single_path);
    const std::string specials_path = Reader::join(path, "special_tokens");
    const Value* specials = reader.find(value, "special_tokens");
    bool seen_sequence = false;
    for (rapidjson::SizeType i = 0; i < single.Size(); ++i) {
      const std::string piece_path = Reader::index(single_path, i);
      const Value& piece = reader.object(single[i], piece_path);
      if (const Value* sequence = reader.find(piece, "Sequence")) {
        const std::string which =
            reader.string_member(reader.object(*sequence, piece_path + ".Sequence"), piece_path + ".Sequence", "id");
        if (which != "A" || seen_sequence)
          reader.fail(piece_path, "a single-sequence template may hold only sequence A, once");
        seen_sequence = true;
        continue;
      }
      const Value* special = reader.find(piece, "SpecialToken");
      if (special == nullptr) reader.fail(piece_path, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      const std::string name = reader.string_member(reader.object(*special, piece_path + ".SpecialToken"),
                                                    piece_path + ".SpecialToken", "id");
      const Value* entry =
          specials == nullptr ? nullptr : reader.find(reader.object(*specials, specials_path), name.c_str());
      if (entry == nullptr) reader.fail(specials_path, "no entry for \"" + name + "\"");
      const std::string entry_path = specials_path + "[\"" + name + "\"]";
      const Value& ids =
          reader.array(reader.require(reader.object(*entry, entry_path), entry_path, "ids"), entry_path + ".ids");
      for (rapidjson::SizeType k = 0; k < ids.Size(); ++k) {
        (seen_sequence ? suffix : prefix).push_back(reader.id(ids[k], Reader::index(entry_path + ".ids", k)));
      }
    }
    if (!seen_sequence) reader.fail(single_path, "no sequence A");
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // {"cls": ["<s>", 0], "sep": ["</s>", 2]}: <s> A </s>
    const auto token_id = [&](const char* key) {
      const std::string key_path = Reader::join(path, key);
      const Value& pair = reader.array(reader.require(value, path, key), key_path);
      if (pair.Size() != 2) reader.fail(key_path, "expected [token, id]");
      return reader.id(pair[1], Reader::index(key_path, 1));
    };
    prefix.push_back(token_id("cls"));
    suffix.push_back(token_id("sep"));
  } else {
    reader.fail(Reader::join(path, "type"), "unsupported post-processor type \"" + type + "\"");
  }
  // A later processor wraps what the earlier ones produced.
  post.prefix.insert(post.prefix.begin(), prefix.begin(), prefix.end());
  post.suffix.insert(post.suffix.end(), suffix.begin(), suffix.end());
}

struct DecoderState {
  DecoderKind kind = DecoderKind::Join;
  std::vector<DecoderStep> steps;
  std::string fuse_path;  // where Fuse is, once seen
};

std::size_t count_field(const Reader& reader, const Value& object, const std::string& path, const char* key) {
  const Value* value = reader.find(object, key);
  if (value == nullptr) return 0;
  if (!value->IsUint64() || value->GetUint64() > reader.limits().max_vocab) {
    reader.fail(Reader::join(path, key), "expected a count up to " + std::to_string(reader.limits().max_vocab));
  }
  return static_cast<std::size_t>(value->GetUint64());
}

// Adds one decoder (a Sequence adds its members in order) to `state`.
void parse_decoder(const Reader& reader, const Value& value, const std::string& path, std::size_t depth,
                   DecoderState& state) {
  reader.check_depth(depth, path);
  reader.object(value, path);
  const std::string type = reader.string_member(value, path, "type");
  if (type == "Sequence") {
    const std::string list_path = Reader::join(path, "decoders");
    const Value& list = reader.array(reader.require(value, path, "decoders"), list_path);
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      parse_decoder(reader, list[i], Reader::index(list_path, i), depth + 1, state);
    }
    return;
  }
  // ByteLevel works on bytes, the others on token texts: the two do not mix in one decoder.
  const bool byte_level = type == "ByteLevel";
  if (byte_level != (state.kind == DecoderKind::ByteLevel) && state.kind != DecoderKind::Join) {
    reader.fail(Reader::join(path, "type"), "ByteLevel together with other decoders is not supported");
  }
  if (byte_level) {
    if (state.kind == DecoderKind::ByteLevel) reader.fail(Reader::join(path, "type"), "a second ByteLevel decoder");
    state.kind = DecoderKind::ByteLevel;
    return;
  }
  DecoderStep step{};
  if (type == "Replace") {
    step.kind = DecoderStep::Kind::Replace;
    const std::string pattern_path = Reader::join(path, "pattern");
    const Value& pattern = reader.object(reader.require(value, path, "pattern"), pattern_path);
    const Value* literal = reader.find(pattern, "String");
    if (literal == nullptr) {
      reader.fail(pattern_path, "only {\"String\": ...} patterns are supported in a Replace decoder (no Regex)");
    }
    step.pattern = reader.string(*literal, Reader::join(pattern_path, "String"));
    if (step.pattern.empty()) reader.fail(Reader::join(pattern_path, "String"), "an empty pattern is not supported");
    step.content = reader.string_member(value, path, "content");
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::Fuse;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::Strip;
    step.content = one_char(reader, value, path, "content", std::nullopt);
    step.start = count_field(reader, value, path, "start");
    step.stop = count_field(reader, value, path, "stop");
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Kind::Metaspace;
    MetaspaceOptions options = parse_metaspace(reader, value, path);
    step.pattern = std::move(options.replacement);
    step.prepend = options.prepend != PrependScheme::Never;
  } else {
    reader.fail(Reader::join(path, "type"), "unsupported decoder type \"" + type + "\"");
  }
  // After Fuse the one token is the whole text; only steps that a stream can apply piece by piece may
  // follow (see DecoderChain::settled).
  if (!state.fuse_path.empty()) {
    std::size_t pos = 0;
    if (!step.pattern.empty()) unicode::next_char(step.pattern, pos);
    const bool streamable = step.kind == DecoderStep::Kind::Strip ||
                            (step.kind == DecoderStep::Kind::Replace && pos == step.pattern.size());
    if (!streamable) {
      reader.fail(Reader::join(path, "type"), type + " after Fuse (" + state.fuse_path +
                                                  ") is not supported (only Strip and one-character Replace)");
    }
  }
  if (step.kind == DecoderStep::Kind::Fuse) state.fuse_path = path;
  state.kind = DecoderKind::Chain;
  state.steps.push_back(std::move(step));
}

// A special token in tokenizer_config.json: "<s>", {"content": "<s>", ...} or null.
std::optional<std::string> config_token(const Reader& reader, const Value& config, const char* key) {
  const Value* value = reader.find(config, key);
  if (value == nullptr) return std::nullopt;
  if (value->IsObject()) return reader.string_member(*value, key, "content");
  return reader.string(*value, key);
}

TokenizerConfig parse_config(std::string_view text, const std::string& name, const LoadLimits& limits) {
  if (text.size() > limits.max_config_bytes) {
    throw TokenizerError(name + ": " + std::to_string(text.size()) + " bytes, more than the limit of " +
                         std::to_string(limits.max_config_bytes));
  }
  const rapidjson::Document doc = parse_document(text, name);
  const Reader reader(name, limits);
  TokenizerConfig config;
  config.bos_token = config_token(reader, doc, "bos_token");
  config.eos_token = config_token(reader, doc, "eos_token");
  config.pad_token = config_token(reader, doc, "pad_token");
  config.unk_token = config_token(reader, doc, "unk_token");
  if (reader.find(doc, "add_bos_token")) config.add_bos_token = reader.boolean(doc, "", "add_bos_token", false);
  if (reader.find(doc, "add_eos_token")) config.add_eos_token = reader.boolean(doc, "", "add_eos_token", false);
  if (const Value* chat = reader.find(doc, "chat_template")) {
    if (chat->IsString()) {
      config.chat_template = reader.string(*chat, "chat_template");
    } else {
      // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]: the default one, else the first.
      reader.array(*chat, "chat_template");
      for (rapidjson::SizeType i = 0; i < chat->Size(); ++i) {
        const std::string item = Reader::index("chat_template", i);
        const Value& entry = reader.object((*chat)[i], item);
        const bool is_default = reader.string_member(entry, item, "name") == "default";
        if (is_default || !config.chat_template) config.chat_template = reader.string_member(entry, item, "template");
        if (is_default) break;
      }
    }
  }
  return config;
}

// tokenizer.json text (and tokenizer_config.json text, when given) to a model; `name` and `config_name`
// stand for the files in messages.
std::shared_ptr<const TokenizerModel> load_json(std::string_view tokenizer_json, const std::string& name,
                                                std::optional<std::string_view> tokenizer_config,
                                                const std::string& config_name, const LoadLimits& limits) {
  if (tokenizer_json.size() > limits.max_json_bytes) {
    throw TokenizerError(name + ": " + std::to_string(tokenizer_json.size()) + " bytes, more than the limit of " +
                         std::to_string(limits.max_json_bytes));
  }
  const rapidjson::Document doc = parse_document(tokenizer_json, name);
  const Reader reader(name, limits);

  TokenizerParts parts;
  parts.name = name;
  parse_model(reader, reader.require(doc, "", "model"), parts);
  if (const Value* added = reader.find(doc, "added_tokens")) parse_added_tokens(reader, *added, parts);
  if (const Value* normalizer = reader.find(doc, "normalizer")) {
    parts.normalizer = parse_normalizer(reader, *normalizer, "normalizer", 0);
  }
  if (const Value* pre = reader.find(doc, "pre_tokenizer")) {
    PreTokenizerState state;
    parts.pre_tokenizer = parse_pre_tokenizer(reader, *pre, "pre_tokenizer", 0, state);
    parts.bpe.byte_level = !state.byte_level_path.empty();
  }
  if (const Value* post = reader.find(doc, "post_processor")) {
    parse_post_processor(reader, *post, "post_processor", 0, parts.post_processor);
  }
  if (const Value* decoder = reader.find(doc, "decoder")) {
    DecoderState state;
    parse_decoder(reader, *decoder, "decoder", 0, state);
    parts.decoder = state.kind;
    if (state.kind == DecoderKind::Chain) parts.chain = std::make_unique<DecoderChain>(std::move(state.steps));
  }
  if (tokenizer_config) parts.config = parse_config(*tokenizer_config, config_name, limits);
  return assemble(std::move(parts));
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view name,
                               std::optional<std::string_view> tokenizer_config, const LoadLimits& limits) {
  return Tokenizer(load_json(tokenizer_json, std::string(name), tokenizer_config, "tokenizer_config.json", limits));
}

Tokenizer Tokenizer::from_json_file(const std::filesystem::path& tokenizer_json,
                                    const std::optional<std::filesystem::path>& tokenizer_config,
                                    const LoadLimits& limits) {
  const std::string text = read_bounded(tokenizer_json, limits.max_json_bytes);
  std::optional<std::string> config;
  if (tokenizer_config) config = read_bounded(*tokenizer_config, limits.max_config_bytes);
  return Tokenizer(load_json(text, tokenizer_json.string(),
                             config ? std::optional<std::string_view>(*config) : std::nullopt,
                             tokenizer_config ? tokenizer_config->string() : std::string(), limits));
}

Tokenizer Tokenizer::from_directory(const std::filesystem::path& dir, const LoadLimits& limits) {
  const auto config = dir / "tokenizer_config.json";
  std::error_code error;
  const bool has_config = std::filesystem::is_regular_file(config, error);
  return from_json_file(dir / "tokenizer.json", has_config ? std::optional(config) : std::nullopt, limits);
}

}  // namespace engine::tokenizer
