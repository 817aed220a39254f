// The tokenizer from GGUF metadata (tokenizer.ggml.*): the same tokenizer its tokenizer.json gives, and the
// refusals, each naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/tiny_tokenizer.h"

namespace engine::tokenizer {
namespace {

using engine::format::GgufValue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A byte-level vocabulary (ids 0-255), the results of `merges`, then <|bos|> (CONTROL), <tool> (USER_DEFINED)
// and two padding rows (UNUSED), as llama.cpp's converter writes them.
struct TinyGguf {
  std::vector<std::pair<std::string, std::string>> merges = {tiny::merge("l", "l"),   tiny::merge("h", "e"),
                                                             tiny::merge("he", "ll"), tiny::merge("hell", "o"),
                                                             tiny::merge("1", "2"),   tiny::merge("12", "3")};
  std::string pre = "qwen2";
  std::vector<std::string> extra_merge_lines;            // merges whose tokens are not in the list
  std::vector<std::pair<std::string, GgufValue>> extra;  // more metadata, after the usual keys
  std::vector<std::string> drop;                         // usual keys to leave out

  std::vector<std::string> tokens() const {
    const auto& alphabet = unicode::byte_level_alphabet();
    std::vector<std::string> out(alphabet.byte_to_utf8.begin(), alphabet.byte_to_utf8.end());
    for (const auto& [left, right] : merges) out.push_back(left + right);
    out.insert(out.end(), {"<|bos|>", "<tool>", "[PAD0]", "[PAD1]"});
    return out;
  }

  engine::format::GgufLayout layout() const {
    const auto list = tokens();
    std::vector<std::int32_t> types(list.size(), 1);
    types[list.size() - 4] = 3;
    types[list.size() - 3] = 4;
    types[list.size() - 2] = types[list.size() - 1] = 5;
    std::vector<std::string> merge_lines;
    for (const auto& [left, right] : merges) merge_lines.push_back(left + " " + right);
    merge_lines.insert(merge_lines.end(), extra_merge_lines.begin(), extra_merge_lines.end());
    std::vector<std::pair<std::string, GgufValue>> metadata;
    metadata.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
    metadata.emplace_back("tokenizer.ggml.pre", GgufValue::string(pre));
    metadata.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(list));
    metadata.emplace_back("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(types));
    metadata.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(merge_lines));
    metadata.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::scalar<std::uint32_t>(262));
    metadata.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::scalar<std::uint32_t>(262));
    engine::format::GgufWriter writer;
    for (auto& [key, value] : metadata) {
      if (std::find(drop.begin(), drop.end(), key) == drop.end()) writer.add_metadata(key, value);
    }
    for (const auto& [key, value] : extra) writer.add_metadata(key, value);
    const auto file = writer.serialize();
    return engine::format::parse_gguf(file, "tiny.gguf");
  }
};

// The message from_gguf refuses `gguf` with (anything with a layout()).
template <typename Metadata>
std::string error_of(const Metadata& gguf, const char* name = "tiny.gguf") {
  try {
    Tokenizer::from_gguf(gguf.layout(), name);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Gguf, Qwen2PipelineWithAddedTokens) {
  const Tokenizer tokenizer = Tokenizer::from_gguf(TinyGguf{}.layout(), "tiny.gguf");
  EXPECT_EQ(tokenizer.vocab_size(), 266u);
  EXPECT_EQ(tokenizer.bos_id(), 262);
  EXPECT_EQ(tokenizer.config().bos_token, "<|bos|>");
  EXPECT_EQ(tokenizer.config().add_bos_token, false);
  EXPECT_TRUE(tokenizer.is_special(262));
  EXPECT_FALSE(tokenizer.is_special(263));
  // Qwen2's pattern takes digits one at a time, so the 1 2 3 merges never apply; NFC composes e + ◌́.
  EXPECT_THAT(tokenizer.encode("hello<|bos|>123<tool>"), ElementsAre(259, 262, '1', '2', '3', 263));
  EXPECT_EQ(tokenizer.encode("e\xCC\x81"), tokenizer.encode("\xC3\xA9"));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("hello<|bos|>x"), true), "hellox");
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{264, 'x'}), "x");  // padding rows decode to nothing
  EXPECT_EQ(tokenizer.id_to_token(264), std::nullopt);
  EXPECT_EQ(tokenizer.token_to_id("[PAD0]"), std::nullopt);
}

TEST(Gguf, Llama3AddsBosAndKeepsWholeWords) {
  TinyGguf gguf;
  gguf.pre = "llama-bpe";
  const Tokenizer tokenizer = Tokenizer::from_gguf(gguf.layout(), "tiny.gguf");
  EXPECT_EQ(tokenizer.config().add_bos_token, true);
  EXPECT_THAT(tokenizer.encode("123 hello"), ElementsAre(262, 261, ' ', 259));  // \p{N}{1,3}, whole words
  EXPECT_THAT(tokenizer.encode("123", false), ElementsAre(261));
  gguf.extra.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::scalar(false));
  gguf.extra.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::scalar(true));
  EXPECT_THAT(Tokenizer::from_gguf(gguf.layout(), "tiny.gguf").encode("123"), ElementsAre(261, 262));
}

TEST(Gguf, Gpt2Pipeline) {
  TinyGguf gguf;
  gguf.pre = "gpt-2";
  gguf.extra.emplace_back("tokenizer.chat_template", GgufValue::string("{{ x }}"));
  const Tokenizer tokenizer = Tokenizer::from_gguf(gguf.layout(), "tiny.gguf");
  EXPECT_THAT(tokenizer.encode("123 hello"), ElementsAre(261, ' ', 259));
  EXPECT_EQ(tokenizer.config().chat_template, "{{ x }}");
}

// The pipelines of the pre-tokenizer names llama.cpp writes for other families, on "123 hello" (the
// vocabulary merges "12" + "3" to 261 and "hello" to 259).
TEST(Gguf, MorePreTokenizerNames) {
  const auto encode = [](const std::string& pre) {
    TinyGguf gguf;
    gguf.pre = pre;
    return Tokenizer::from_gguf(gguf.layout(), "tiny.gguf").encode("123 hello");
  };
  EXPECT_THAT(encode("deepseek-r1-qwen"), ElementsAre('1', '2', '3', ' ', 259));  // qwen2's single digits
  EXPECT_THAT(encode("smollm"), ElementsAre('1', '2', '3', ' ', 259));            // Digits, then GPT-2's split
  EXPECT_THAT(encode("deepseek-v3"), ElementsAre(261, ' ', 259));                 // digit groups of three
  EXPECT_THAT(encode("gpt-4o"), ElementsAre(261, ' ', 259));
  EXPECT_THAT(encode("tekken"), ElementsAre(262, '1', '2', '3', ' ', 259));  // adds a BOS, single digits
}

// A SentencePiece vocabulary (tokenizer.ggml.model "llama"): <unk> (UNKNOWN), <s> and </s> (CONTROL), the
// 256 byte tokens (BYTE), then pieces scored highest first.
struct TinySpm {
  std::vector<std::pair<std::string, float>> pieces = {{"▁", -1},  {"h", -2},  {"i", -3},   {"a", -4},
                                                       {"▁h", -5}, {"hi", -6}, {"▁hi", -7}, {"aa", -8}};
  std::vector<std::pair<std::string, GgufValue>> extra;
  bool scores = true;

  engine::format::GgufLayout layout() const {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<std::int32_t> types = {2, 3, 3};
    std::vector<float> score(3, 0.0f);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      tokens.emplace_back(name);
      types.push_back(6);
      score.push_back(0.0f);
    }
    for (const auto& [piece, value] : pieces) {
      tokens.push_back(piece);
      types.push_back(1);
      score.push_back(value);
    }
    engine::format::GgufWriter writer;
    writer.add_metadata("tokenizer.ggml.model", GgufValue::string("llama"));
    writer.add_metadata("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
    writer.add_metadata("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(types));
    if (scores) writer.add_metadata("tokenizer.ggml.scores", GgufValue::array<float>(score));
    writer.add_metadata("tokenizer.ggml.bos_token_id", GgufValue::scalar<std::uint32_t>(1));
    writer.add_metadata("tokenizer.ggml.eos_token_id", GgufValue::scalar<std::uint32_t>(2));
    for (const auto& [key, value] : extra) writer.add_metadata(key, value);
    const auto file = writer.serialize();
    return engine::format::parse_gguf(file, "spm.gguf");
  }
  Tokenizer load() const { return Tokenizer::from_gguf(layout(), "spm.gguf"); }
};

constexpr std::int32_t kPiece = 259;  // the first piece after <unk>, <s>, </s> and the byte tokens

TEST(GgufSentencePiece, MergesByScoreWithASpacePrefixAndBytesForTheRest) {
  const Tokenizer tokenizer = TinySpm{}.load();
  // "▁hi": "▁h" (score -5) merges before "hi" (-6), then "▁hi"; a BOS is added unless the file says.
  EXPECT_THAT(tokenizer.encode("hi"), ElementsAre(1, kPiece + 6));
  EXPECT_THAT(tokenizer.encode("hi hi", false), ElementsAre(kPiece + 6, kPiece + 6));
  // Equal scores go leftmost first: "▁aaa" is "▁" + "aa" + "a".
  EXPECT_THAT(tokenizer.encode("aaa", false), ElementsAre(kPiece, kPiece + 7, kPiece + 3));
  EXPECT_THAT(tokenizer.encode("é", false), ElementsAre(kPiece, 3 + 0xC3, 3 + 0xA9));  // no piece: its bytes
  EXPECT_THAT(tokenizer.encode("<s>hi", false), ElementsAre(1, kPiece + 6));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("hi é hi")), "<s> hi é hi");  // only the text's first space goes
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("hi é hi"), true), "hi é hi");
  EXPECT_TRUE(tokenizer.is_special(0));  // <unk>, special as in the tokenizer.json
  EXPECT_EQ(tokenizer.id_to_bytes(3 + 0x0A), "\n");
}

TEST(GgufSentencePiece, WithoutTheSpacePrefix) {
  TinySpm spm;
  spm.extra.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::scalar(false));
  spm.extra.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::scalar(false));
  const Tokenizer tokenizer = spm.load();
  EXPECT_THAT(tokenizer.encode("hi hi"), ElementsAre(kPiece + 5, kPiece + 6));  // "hi", "▁hi"
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(" hi")), " hi");                  // nothing stripped
}

TEST(GgufSentencePiece, RefusalsNameTheKey) {
  TinySpm missing;
  missing.scores = false;
  EXPECT_THAT(error_of(missing, "spm.gguf"), HasSubstr("spm.gguf: tokenizer.ggml.scores: missing"));
  TinySpm mismatched;
  mismatched.extra.emplace_back("tokenizer.ggml.scores", GgufValue::array<float>(std::vector<float>{1.0f}));
  mismatched.scores = false;
  EXPECT_THAT(error_of(mismatched, "spm.gguf"), HasSubstr("tokenizer.ggml.scores: 1 entries for 267 tokens"));
}

TEST(Gguf, RefusalsNameTheKey) {
  const auto refused = [](auto&& change, const std::vector<std::string>& parts) {
    TinyGguf gguf;
    change(gguf);
    const std::string message = error_of(gguf);
    for (const auto& part : parts) EXPECT_THAT(message, HasSubstr(part));
  };
  refused([](TinyGguf& g) { g.pre = "deepseek-llm"; },
          {"tiny.gguf: tokenizer.ggml.pre", "\"deepseek-llm\"", "supported: qwen2", "gpt-4o"});
  refused([](TinyGguf& g) { g.drop.push_back("tokenizer.ggml.pre"); }, {"tokenizer.ggml.pre: missing"});
  refused([](TinyGguf& g) { g.drop.push_back("tokenizer.ggml.model"); }, {"tokenizer.ggml.model: missing"});
  refused([](TinyGguf& g) { g.drop.push_back("tokenizer.ggml.merges"); }, {"tokenizer.ggml.merges: missing"});
  refused([](TinyGguf& g) { g.drop.push_back("tokenizer.ggml.tokens"); }, {"tokenizer.ggml.tokens: missing"});
  refused(
      [](TinyGguf& g) {
        g.drop.push_back("tokenizer.ggml.model");
        g.extra.emplace_back("tokenizer.ggml.model", GgufValue::string("t5"));
      },
      {"tokenizer.ggml.model", "\"t5\"", "supported: gpt2"});
  refused(
      [](TinyGguf& g) {
        g.drop.push_back("tokenizer.ggml.token_type");
        g.extra.emplace_back("tokenizer.ggml.token_type", GgufValue::array<std::int32_t>(std::vector<std::int32_t>{1}));
      },
      {"tokenizer.ggml.token_type", "1 entries for 266 tokens"});
  refused([](TinyGguf& g) { g.extra_merge_lines.push_back("x q"); },
          {"tokenizer.ggml.merges", "\"xq\" is not in the vocabulary"});
  refused([](TinyGguf& g) { g.extra_merge_lines.push_back("xq"); }, {"tokenizer.ggml.merges", "entry 6"});
  refused(
      [](TinyGguf& g) {
        g.drop.push_back("tokenizer.ggml.bos_token_id");
        g.extra.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::scalar<std::uint32_t>(9999));
      },
      {"tokenizer.ggml.bos_token_id", "below 266"});
  refused(
      [](TinyGguf& g) {
        g.pre = "llama3";
        g.drop.push_back("tokenizer.ggml.bos_token_id");
      },
      {"tokenizer.ggml.add_bos_token", "bos_token_id is missing"});
  refused([](TinyGguf& g) { g.extra_merge_lines.push_back("\xFF a"); }, {"tokenizer.ggml.merges", "not valid UTF-8"});
}

}  // namespace
}  // namespace engine::tokenizer
