// The tokenizer on small hand-written tokenizer.json files: BPE, added tokens, post-processors, decoding,
// streaming, the configuration file, and every refusal naming the file and the field.
#include "engine/tokenizer/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/temp_dir.h"
#include "tests/support/tiny_tokenizer.h"

namespace engine::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tiny::merge;

std::string utf8(std::initializer_list<char32_t> chars) {
  std::string out;
  for (const char32_t c : chars) unicode::append_utf8(out, c);
  return out;
}

// "hello" merges fully; "Ġw o r l d" merges to " world" ("Ġ" is the byte-level space).
tiny::Spec hello_world() {
  tiny::Spec spec;
  spec.merges = {merge("l", "l"), merge("h", "e"),   merge("he", "ll"),  merge("hell", "o"), merge(" ", "w"),
                 merge("o", "r"), merge(" w", "or"), merge(" wor", "l"), merge(" worl", "d")};
  return spec;
}

TEST(Bpe, AppliesMergesByRank) {
  const Tokenizer tokenizer = tiny::load(hello_world());
  EXPECT_EQ(tokenizer.encode("hello world"), tiny::ids(tokenizer, {"hello", " world"}));
  EXPECT_EQ(tokenizer.encode("hellx"), tiny::ids(tokenizer, {"hell", "x"}));
  EXPECT_EQ(tokenizer.encode("ohell"), tiny::ids(tokenizer, {"o", "hell"}));
  EXPECT_EQ(tokenizer.encode(""), std::vector<std::int32_t>{});
}

TEST(Bpe, TiesGoToTheLeftmostPair) {
  tiny::Spec spec;
  spec.merges = {merge("a", "a")};
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("aaa"), tiny::ids(tokenizer, {"aa", "a"}));
  EXPECT_EQ(tokenizer.encode("aaaa"), tiny::ids(tokenizer, {"aa", "aa"}));
}

// A lower rank wins even when it appears later in the word.
TEST(Bpe, LowerRankFirstWherever) {
  tiny::Spec spec;
  spec.merges = {merge("b", "c"), merge("a", "b")};
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("abc"), tiny::ids(tokenizer, {"a", "bc"}));
}

TEST(Bpe, MergesMayBeWrittenAsPairs) {
  tiny::Spec spec = hello_world();
  spec.merges_as_pairs = true;
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("hello world"), tiny::ids(tokenizer, {"hello", " world"}));
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  tiny::Spec spec;
  spec.merges = {merge("a", "b")};
  spec.extra = {"abc"};
  EXPECT_EQ(tiny::load(spec).encode("abc"), tiny::ids(tiny::load(spec), {"ab", "c"}));
  spec.model_options = R"("ignore_merges": true,)";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("abc"), tiny::ids(tokenizer, {"abc"}));
  EXPECT_EQ(tokenizer.encode("abcab"), tiny::ids(tokenizer, {"ab", "c", "ab"}));
}

// Without a ByteLevel step, the model works on characters: unknown ones become the unk token (fused
// when asked), <0xXX> byte tokens when byte_fallback finds them, or nothing.
TEST(Bpe, CharacterLevelUnknownsAndByteFallback) {
  const auto model = [](const std::string& options) {
    return std::string(R"({"added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null,
        "decoder": null, "model": {"type": "BPE", )") +
           options +
           R"( "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "<0xC3>": 4, "<0xA9>": 5}, "merges": ["a b"]}})";
  };
  const auto none = Tokenizer::from_json(model(""), "m.json");
  EXPECT_THAT(none.encode("ab?ab"), ElementsAre(3, 3));
  const auto unk = Tokenizer::from_json(model(R"("unk_token": "<unk>",)"), "m.json");
  EXPECT_THAT(unk.encode("a??b"), ElementsAre(1, 0, 0, 2));
  const auto fused = Tokenizer::from_json(model(R"("unk_token": "<unk>", "fuse_unk": true,)"), "m.json");
  EXPECT_THAT(fused.encode("a??b"), ElementsAre(1, 0, 2));
  const auto fallback = Tokenizer::from_json(model(R"("unk_token": "<unk>", "byte_fallback": true,)"), "m.json");
  EXPECT_THAT(fallback.encode("aéb?"), ElementsAre(1, 4, 5, 2, 0));
  EXPECT_EQ(none.decode(std::vector<std::int32_t>{1, 2, 3}), "a b ab");  // no decoder: joined with spaces
}

// A SentencePiece-style tokenizer.json: characters, "▁", byte tokens for "é", and merges in plain text.
std::string spm_json(
    const std::string& normalizer, const std::string& pre_tokenizer, const std::string& decoder,
    const std::string& model_options = R"("byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",)") {
  return R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
      "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(, "post_processor": null, "decoder": )" + decoder +
         R"(, "model": {"type": "BPE", )" + model_options +
         R"( "vocab": {"<unk>": 0, "<s>": 1, "▁": 2, "h": 3, "i": 4, "▁h": 5, "▁hi": 6, "1": 7, "2": 8, "12": 9,
          "<0xC3>": 10, "<0xA9>": 11}, "merges": ["▁ h", "▁h i", "1 2"]}})";
}
const std::string kLlama2Normalizer = R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})";
const std::string kLlama2Decoder = R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";

TEST(SentencePiece, Llama2PipelineWithByteFallback) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_json(kLlama2Normalizer, "null", kLlama2Decoder), "spm.json");
  EXPECT_THAT(tokenizer.encode("hi hi"), ElementsAre(6, 6));
  EXPECT_THAT(tokenizer.encode("hié"), ElementsAre(6, 10, 11));
  EXPECT_THAT(tokenizer.encode("<s>hi"), ElementsAre(1, 6));  // every stretch gets its "▁" (legacy)
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{6, 6}), "hi hi");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{6, 10, 11}), "hié");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{6, 10, 6}), "hi" + utf8({0xFFFD}) + " hi");
  EXPECT_FALSE(tokenizer.decode_joins_with_spaces());
  EXPECT_EQ(tokenizer.id_to_bytes(6), " hi");
  EXPECT_EQ(tokenizer.id_to_bytes(10), "\xC3");
}

TEST(SentencePiece, StreamingWaitsForByteRunsToEnd) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_json(kLlama2Normalizer, "null", kLlama2Decoder), "spm.json");
  IncrementalDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(6), "hi");
  EXPECT_EQ(decoder.push(10), "");
  EXPECT_EQ(decoder.push(11), "");
  EXPECT_EQ(decoder.push(6), "é hi");
  EXPECT_EQ(decoder.push(10), "");
  EXPECT_EQ(decoder.flush(), utf8({0xFFFD}));
  EXPECT_EQ(decoder.push(6), "hi");  // flush starts a new text: its first space is stripped again
}

TEST(SentencePiece, MetaspacePreTokenizerSchemes) {
  const auto load = [](const std::string& scheme, bool split) {
    const std::string metaspace = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")" + scheme +
                                  R"(", "split": )" + (split ? "true" : "false") + "}";
    return Tokenizer::from_json(spm_json("null", metaspace, metaspace), "spm.json");
  };
  EXPECT_THAT(load("always", true).encode("hi hi"), ElementsAre(6, 6));
  EXPECT_THAT(load("always", true).encode("<s>hi"), ElementsAre(1, 6));
  EXPECT_THAT(load("first", false).encode("<s>hi"), ElementsAre(1, 3, 4));  // not at the start of the input
  EXPECT_THAT(load("first", false).encode("hi<s>hi"), ElementsAre(6, 1, 3, 4));
  EXPECT_THAT(load("never", true).encode("hi hi"), ElementsAre(3, 4, 6));
  EXPECT_EQ(load("first", true).decode(std::vector<std::int32_t>{6, 6}), "hi hi");
  EXPECT_EQ(load("never", true).decode(std::vector<std::int32_t>{6, 6}), " hi hi");
}

TEST(SentencePiece, DigitsBeforeTheModel) {
  const auto load = [](const std::string& digits) {
    return Tokenizer::from_json(
        spm_json("null",
                 R"({"type": "Sequence", "pretokenizers": [)" + digits +
                     R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": false}]})",
                 "null"),
        "spm.json");
  };
  EXPECT_THAT(load("").encode("12"), ElementsAre(9));
  EXPECT_THAT(load(R"({"type": "Digits", "individual_digits": true},)").encode("12"), ElementsAre(7, 8));
  EXPECT_THAT(load(R"({"type": "Digits", "individual_digits": false},)").encode("12"), ElementsAre(9));
}

TEST(ByteLevel, PrefixSpaceAndDecoding) {
  tiny::Spec spec = hello_world();
  spec.pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("world"), tiny::ids(tokenizer, {" world"}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("world")), " world");
  // Every byte has a token: any text round-trips.
  const std::string text = "naïve 😀\t\r\n" + utf8({0x85});
  EXPECT_EQ(tokenizer.decode(tiny::load(hello_world()).encode(text)), text);
}

TEST(ByteLevel, DecodingBrokenUtf8GivesReplacementCharacters) {
  const Tokenizer tokenizer = tiny::load(hello_world());
  const std::vector<std::int32_t> ids = {0xF0, 0x9F, 'h'};  // the first bytes of an emoji, then 'h'
  EXPECT_EQ(tokenizer.decode(ids), utf8({0xFFFD}) + "h");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{0xE2, 0x82, 0xAC}), "€");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{100000, 'h'}), "h");  // unknown ids are dropped
}

TEST(PreTokenizer, AnEmptyStringPatternSplitsNothing) {
  tiny::Spec spec = hello_world();
  spec.pre_tokenizer = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": ""}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.encode("hello world"), tiny::ids(tokenizer, {"hello", " world"}));
}

TEST(Encode, InvalidUtf8IsReadAsReplacementCharacters) {
  const Tokenizer tokenizer = tiny::load(hello_world());
  EXPECT_EQ(tokenizer.encode("h\xFFi"), tokenizer.encode("h" + utf8({0xFFFD}) + "i"));
}

std::string added(int id, const std::string& content, bool special, const std::string& options = "") {
  return R"({"id": )" + std::to_string(id) + R"(, "content": )" + tiny::json_quote(content) + R"(, "special": )" +
         (special ? "true" : "false") + (options.empty() ? "" : ", " + options) + "}";
}

TEST(AddedTokens, MatchedInTheRawTextLongestFirst) {
  tiny::Spec spec = hello_world();
  // The hello_world vocabulary has 265 tokens, so added tokens start at 265.
  spec.added_tokens = "[" + added(265, "<a>", true, R"("normalized": false)") + ", " +
                      added(266, "<a><b>", true, R"("normalized": false)") + ", " +
                      added(267, "hello", false, R"("normalized": false)") + "]";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_THAT(tokenizer.encode("x<a><b>y<a>"), ElementsAre('x', 266, 'y', 265));
  EXPECT_THAT(tokenizer.encode("<a"), ElementsAre('<', 'a'));
  // An added token in the model's vocabulary takes the model's id.
  EXPECT_EQ(tokenizer.token_to_id("hello"), tiny::id(tokenizer, "hello"));
  EXPECT_TRUE(tokenizer.is_special(265));
  EXPECT_FALSE(tokenizer.is_special(tiny::id(tokenizer, "hello")));
  EXPECT_THAT(tokenizer.special_ids(), ElementsAre(265, 266));
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{'x', 265, 'y'}), "x<a>y");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{'x', 265, 'y'}, true), "xy");
}

TEST(AddedTokens, SingleWordAndStripping) {
  tiny::Spec spec = hello_world();
  spec.added_tokens = "[" + added(265, "<m>", false, R"("normalized": false, "single_word": true)") + ", " +
                      added(266, "<l>", false, R"("normalized": false, "lstrip": true)") + ", " +
                      added(267, "<r>", false, R"("normalized": false, "rstrip": true)") + "]";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_THAT(tokenizer.encode("a <m> b"),
              ElementsAre('a', tiny::id(tokenizer, " "), 265, tiny::id(tokenizer, " "), 'b'));
  EXPECT_THAT(tokenizer.encode("a<m>"), ElementsAre('a', '<', 'm', '>'));  // inside a word: text
  EXPECT_THAT(tokenizer.encode("a  <l>b"), ElementsAre('a', 266, 'b'));
  EXPECT_THAT(tokenizer.encode("a<r> \t b"), ElementsAre('a', 267, 'b'));
}

// Normalized added tokens match the normalized text, and decode as their normalized form.
TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  tiny::Spec spec = hello_world();
  spec.normalizer = R"({"type": "Lowercase"})";
  spec.added_tokens = "[" + added(265, "<SEP>", false, R"("normalized": true)") + ", " +
                      added(266, "<CLS>", true, R"("normalized": false)") + "]";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_THAT(tokenizer.encode("x<sep>y<Sep>"), ElementsAre('x', 265, 'y', 265));
  EXPECT_THAT(tokenizer.encode("<CLS>HELLO"), ElementsAre(266, tiny::id(tokenizer, "hello")));
  EXPECT_THAT(tokenizer.encode("<cls>"), ElementsAre('<', 'c', 'l', 's', '>'));
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{265}), "<sep>");
  EXPECT_EQ(tokenizer.id_to_token(265), "<sep>");
  EXPECT_EQ(tokenizer.token_to_id("<SEP>"), 265);
}

// The reference assigns ids itself (the content's existing id, else the next one after the model's
// vocabulary) and only warns when the file says otherwise.
TEST(AddedTokens, IdsAreAssignedAsTheReferenceDoes) {
  tiny::Spec spec = hello_world();  // 265 model tokens
  spec.added_tokens =
      "[" + added(400, "<x>", true) + ", " + added(7, "<y>", true) + ", " + added(500, "h", false) + "]";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_EQ(tokenizer.token_to_id("<x>"), 265);
  EXPECT_EQ(tokenizer.token_to_id("<y>"), 266);
  EXPECT_EQ(tokenizer.token_to_id("h"), 'h');
  EXPECT_EQ(tokenizer.vocab_size(), 267u);
}

TEST(PostProcessor, TemplateAddsSpecialTokensOnlyWhenAsked) {
  tiny::Spec spec = hello_world();
  spec.added_tokens = "[" + added(265, "<s>", true) + ", " + added(266, "</s>", true) + "]";
  spec.post_processor = R"({"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [265], "tokens": ["<s>"]},
                                     "</s>": {"id": "</s>", "ids": [266], "tokens": ["</s>"]}}}]})";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_THAT(tokenizer.encode("hello"), ElementsAre(265, tiny::id(tokenizer, "hello"), 266));
  EXPECT_THAT(tokenizer.encode("hello", false), ElementsAre(tiny::id(tokenizer, "hello")));
  EXPECT_THAT(tokenizer.encode(""), ElementsAre(265, 266));
  std::vector<std::int32_t> ids = {7};
  tokenizer.encode_into("hello", true, ids);
  EXPECT_THAT(ids, ElementsAre(7, 265, tiny::id(tokenizer, "hello"), 266));
}

TEST(PostProcessor, RobertaStyle) {
  tiny::Spec spec = hello_world();
  spec.post_processor = R"({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                             "trim_offsets": true, "add_prefix_space": false})";
  const Tokenizer tokenizer = tiny::load(spec);
  EXPECT_THAT(tokenizer.encode("x"), ElementsAre(0, 'x', 2));
}

TEST(IncrementalDecoder, NeverEmitsHalfACharacter) {
  const Tokenizer tokenizer = tiny::load(hello_world());
  const std::string text = "a😀é中" + utf8({0x1F469, 0x1F3FD, 0x200D, 0x1F4BB});
  IncrementalDecoder decoder(tokenizer);
  std::string streamed;
  std::vector<std::string> chunks;
  for (const std::int32_t id : tokenizer.encode(text)) {
    chunks.push_back(decoder.push(id));
    EXPECT_TRUE(unicode::is_valid_utf8(chunks.back()));
    streamed += chunks.back();
  }
  streamed += decoder.flush();
  EXPECT_EQ(streamed, text);
  // The emoji's four byte tokens: three empty chunks, then the whole character.
  EXPECT_THAT(std::vector<std::string>(chunks.begin() + 1, chunks.begin() + 5), ElementsAre("", "", "", "😀"));
}

TEST(IncrementalDecoder, FlushEndsAnIncompleteCharacterAndSkipsSpecials) {
  tiny::Spec spec = hello_world();
  spec.added_tokens = "[" + added(265, "<eos>", true) + "]";
  const Tokenizer tokenizer = tiny::load(spec);
  IncrementalDecoder decoder(tokenizer, true);
  EXPECT_EQ(decoder.push('h'), "h");
  EXPECT_EQ(decoder.push(0xE4), "");
  EXPECT_EQ(decoder.push(265), "");
  EXPECT_EQ(decoder.push(0xB8), "");
  EXPECT_EQ(decoder.flush(), utf8({0xFFFD}));
  EXPECT_EQ(decoder.push(0x41), "A");  // usable again after a flush
  IncrementalDecoder keep(tokenizer, false);
  EXPECT_EQ(keep.push(265), "<eos>");
}

TEST(Config, SpecialTokensTemplateAndFlags) {
  tiny::Spec spec = hello_world();
  spec.added_tokens = "[" + added(265, "<|bos|>", true) + ", " + added(266, "<|eos|>", true) + "]";
  const std::string config = R"({"bos_token": {"content": "<|bos|>", "lstrip": false}, "eos_token": "<|eos|>",
      "pad_token": null, "add_bos_token": true, "chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "{{ messages }}"}]})";
  const Tokenizer tokenizer = Tokenizer::from_json(tiny::json(spec), "tiny.json", config);
  EXPECT_EQ(tokenizer.bos_id(), 265);
  EXPECT_EQ(tokenizer.eos_id(), 266);
  EXPECT_EQ(tokenizer.pad_id(), std::nullopt);
  EXPECT_EQ(tokenizer.config().add_bos_token, true);
  EXPECT_EQ(tokenizer.config().add_eos_token, std::nullopt);
  EXPECT_EQ(tokenizer.config().chat_template, "{{ messages }}");
  EXPECT_EQ(tokenizer.config().bos_token, "<|bos|>");
  // The post-processor decides what encode adds; add_bos_token is only exposed.
  EXPECT_EQ(tokenizer.encode("h"), tiny::ids(tokenizer, {"h"}));
}

TEST(Files, FromDirectoryReadsBothFiles) {
  testing_support::TempDir dir;
  tiny::Spec spec = hello_world();
  spec.added_tokens = "[" + added(265, "<e>", true) + "]";
  testing_support::write_file(dir / "tokenizer.json", tiny::json(spec));
  EXPECT_EQ(Tokenizer::from_directory(dir.path()).eos_id(), std::nullopt);
  testing_support::write_file(dir / "tokenizer_config.json", R"({"eos_token": "<e>", "chat_template": "X"})");
  const Tokenizer tokenizer = Tokenizer::from_directory(dir.path());
  EXPECT_EQ(tokenizer.eos_id(), 265);
  EXPECT_EQ(tokenizer.config().chat_template, "X");
  EXPECT_EQ(tokenizer.id_to_token(tiny::id(tokenizer, " world")), "Ġworld");
  EXPECT_EQ(tokenizer.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tokenizer.token_to_id("nope"), std::nullopt);
}

std::string error_of(const std::string& json, const std::string& config = "") {
  try {
    if (config.empty()) {
      Tokenizer::from_json(json, "bad.json");
    } else {
      Tokenizer::from_json(json, "bad.json", config);
    }
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Refusals, NameTheFileAndTheField) {
  struct Case {
    std::string json;
    std::vector<std::string> message;
  };
  const auto spec_json = [](auto&& change) {
    tiny::Spec spec = hello_world();
    change(spec);
    return tiny::json(spec);
  };
  const std::vector<Case> cases = {
      {"{", {"bad.json", "not valid JSON"}},
      {"[]", {"bad.json", "expected a JSON object"}},
      {"{} x", {"not valid JSON"}},
      {R"({"normalizer": null})", {"bad.json: model: missing"}},
      {R"({"model": {"type": "WordPiece", "vocab": {}}})", {"model.type", "WordPiece", "only BPE"}},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
       {"model.merges", "\"b\" is not in the vocabulary"}},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})", {"model.merges[0]", "left right"}},
      {R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})", {"model.vocab[\"a\"]", "token id"}},
      {R"({"model": {"type": "BPE", "vocab": {"a": 99999999999}, "merges": []}})", {"model.vocab[\"a\"]"}},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "dropout": 0.1}})", {"model.dropout"}},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "unk_token": "<unk>"}})", {"model.unk_token"}},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "continuing_subword_prefix": "##"}})",
       {"model.continuing_subword_prefix"}},
      {spec_json([](tiny::Spec& s) { s.normalizer = R"({"type": "BertNormalizer"})"; }),
       {"normalizer.type", "unsupported normalizer type \"BertNormalizer\""}},
      {spec_json(
           [](tiny::Spec& s) { s.normalizer = R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"x": 1}]})"; }),
       {"normalizer.normalizers[1].type: missing"}},
      {spec_json([](tiny::Spec& s) { s.pre_tokenizer = R"({"type": "BertPreTokenizer"})"; }),
       {"pre_tokenizer.type", "unsupported pre-tokenizer type \"BertPreTokenizer\""}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer =
             R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"}]})";
       }),
       {"pre_tokenizer.pretokenizers[0].pattern", "bad regex"}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer = R"({"type": "Split", "pattern": {"Regex": "[a&&b]"}, "behavior": "Isolated"})";
       }),
       {"pre_tokenizer.pattern", "intersection"}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer = R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})";
       }),
       {"pre_tokenizer.behavior", "Sideways"}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer = R"({"type": "Split", "pattern": {"Glob": "a"}, "behavior": "Isolated"})";
       }),
       {"pre_tokenizer.pattern", "Regex"}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer =
             R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed"}]})";
       }),
       {"pre_tokenizer.pretokenizers[1]", "after ByteLevel (pre_tokenizer.pretokenizers[0])"}},
      {spec_json([](tiny::Spec& s) { s.decoder = R"({"type": "WordPiece"})"; }), {"decoder.type", "WordPiece"}},
      {spec_json([](tiny::Spec& s) { s.decoder = R"({"type": "CTC"})"; }),
       {"decoder.type", "unsupported decoder type \"CTC\""}},
      {spec_json([](tiny::Spec& s) {
         s.decoder = R"({"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Fuse"}]})";
       }),
       {"decoder.decoders[1].type", "ByteLevel together with other decoders"}},
      {spec_json(
           [](tiny::Spec& s) { s.decoder = R"({"type": "Replace", "pattern": {"Regex": "\\s"}, "content": " "})"; }),
       {"decoder.pattern", "only {\"String\": ...}", "no Regex"}},
      {spec_json([](tiny::Spec& s) {
         s.decoder =
             R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Metaspace", "replacement": "▁"}]})";
       }),
       {"decoder.decoders[1].type", "Metaspace after Fuse (decoder.decoders[0])", "only Strip"}},
      {spec_json([](tiny::Spec& s) {
         s.decoder = R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "ByteFallback"}]})";
       }),
       {"decoder.decoders[1].type", "ByteFallback after Fuse"}},
      {spec_json([](tiny::Spec& s) {
         s.decoder = R"({"type": "Sequence", "decoders": [{"type": "Fuse"},
             {"type": "Replace", "pattern": {"String": "ab"}, "content": " "}]})";
       }),
       {"decoder.decoders[1].type", "Replace after Fuse"}},
      {spec_json([](tiny::Spec& s) { s.decoder = R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0})"; }),
       {"decoder.content", "expected one character, found \"ab\""}},
      {spec_json([](tiny::Spec& s) { s.decoder = R"({"type": "Strip", "content": " ", "start": -1})"; }),
       {"decoder.start", "expected a count"}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"})";
       }),
       {"pre_tokenizer.prepend_scheme", "unknown prepend scheme \"sometimes\""}},
      {spec_json([](tiny::Spec& s) {
         s.pre_tokenizer = R"({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false})";
       }),
       {"pre_tokenizer.add_prefix_space", "does not match prepend_scheme \"always\"", "\"never\""}},
      {spec_json([](tiny::Spec& s) { s.pre_tokenizer = R"({"type": "Metaspace", "prepend_scheme": "first"})"; }),
       {"pre_tokenizer.replacement: missing"}},
      {spec_json([](tiny::Spec& s) { s.pre_tokenizer = R"({"type": "Digits", "individual_digits": 1})"; }),
       {"pre_tokenizer.individual_digits", "expected a boolean"}},
      {spec_json([](tiny::Spec& s) { s.post_processor = R"({"type": "Fancy"})"; }), {"post_processor.type", "Fancy"}},
      {spec_json([](tiny::Spec& s) {
         s.post_processor =
             R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {}})";
       }),
       {"post_processor.special_tokens", "no entry for \"<s>\""}},
      {spec_json([](tiny::Spec& s) { s.added_tokens = R"([{"id": 1, "special": true}])"; }),
       {"added_tokens[0].content: missing"}},
      {spec_json([](tiny::Spec& s) { s.added_tokens = R"([{"id": 1, "content": "<x>", "special": "yes"}])"; }),
       {"added_tokens[0].special", "expected a boolean"}},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.json);
    for (const auto& part : c.message) EXPECT_THAT(message, HasSubstr(part)) << c.json.substr(0, 200);
  }
}

TEST(Refusals, NestingIsBounded) {
  std::string normalizer = R"({"type": "NFC"})";
  for (int i = 0; i < 40; ++i) normalizer = R"({"type": "Sequence", "normalizers": [)" + normalizer + "]}";
  tiny::Spec spec = hello_world();
  spec.normalizer = normalizer;
  EXPECT_THAT(error_of(tiny::json(spec)), HasSubstr("nested deeper than"));
}

TEST(Refusals, ConfigErrorsNameTheConfigFile) {
  EXPECT_THAT(error_of(tiny::json(hello_world()), R"({"bos_token": 5})"),
              HasSubstr("tokenizer_config.json: bos_token: expected a string"));
  testing_support::TempDir dir;
  testing_support::write_file(dir / "tokenizer.json", tiny::json(hello_world()));
  testing_support::write_file(dir / "tokenizer_config.json", R"({"chat_template": [{"name": "default"}]})");
  try {
    Tokenizer::from_directory(dir.path());
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "tokenizer_config.json").string() + ": chat_template[0].template: missing"));
  }
}

TEST(Refusals, FilesAreReadWithinLimits) {
  testing_support::TempDir dir;
  EXPECT_THROW(Tokenizer::from_json_file(dir / "missing.json"), TokenizerError);
  testing_support::write_file(dir / "tokenizer.json", tiny::json(hello_world()));
  LoadLimits limits;
  limits.max_json_bytes = 100;
  try {
    Tokenizer::from_json_file(dir / "tokenizer.json", std::nullopt, limits);
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_THAT(e.what(), HasSubstr("more than the limit of 100"));
  }
  limits = {};
  limits.max_vocab = 100;
  EXPECT_THAT(error_of(tiny::json(hello_world())), HasSubstr("(accepted)"));
  try {
    Tokenizer::from_json(tiny::json(hello_world()), "big.json", std::nullopt, limits);
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_THAT(e.what(), HasSubstr("big.json: model.vocab"));
  }
}

}  // namespace
}  // namespace engine::tokenizer
