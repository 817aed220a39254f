#include "engine/grammar/token_vocabulary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/tiny_tokenizer.h"

namespace {

using engine::grammar::GrammarError;
using engine::grammar::vocabulary_from_tokenizer;
using ::testing::HasSubstr;

// 256 byte tokens (id = byte), "he" (256), " w" (257), then the special "<|end|>" (258) and the plain
// added "<tool>" (259).
tiny::Spec spec() {
  tiny::Spec s;
  s.merges = {tiny::merge("h", "e"), tiny::merge(" ", "w")};
  s.added_tokens =
      R"([{"id": 258, "content": "<|end|>", "special": true}, {"id": 259, "content": "<tool>", "special": false}])";
  return s;
}

TEST(TokenVocabulary, RawBytesOfByteLevelTokensSpecialFlagsAndPadding) {
  const auto tokenizer = tiny::load(spec());
  const auto vocab = vocabulary_from_tokenizer(tokenizer, 264, {258});
  ASSERT_EQ(vocab.token_bytes.size(), 264u);
  ASSERT_EQ(vocab.special.size(), 264u);
  EXPECT_EQ(vocab.token_bytes[0x20], " ");     // spelt "Ġ"
  EXPECT_EQ(vocab.token_bytes[0xC3], "\xC3");  // half a character, spelt "Ã"
  EXPECT_EQ(vocab.token_bytes[0x0A], "\n");    // spelt "Ċ"
  EXPECT_EQ(vocab.token_bytes[256], "he");
  EXPECT_EQ(vocab.token_bytes[257], " w");
  EXPECT_EQ(vocab.token_bytes[258], "<|end|>");
  EXPECT_TRUE(vocab.special[258]);
  EXPECT_EQ(vocab.token_bytes[259], "<tool>");
  EXPECT_FALSE(vocab.special[259]);
  for (std::size_t id = 260; id < 264; ++id) EXPECT_EQ(vocab.token_bytes[id], "") << id;  // padding rows
  EXPECT_EQ(vocab.stop_ids, std::vector<std::int32_t>{258});
}

TEST(TokenVocabulary, RefusesWhatCannotBeDescribed) {
  const auto tokenizer = tiny::load(spec());
  try {
    vocabulary_from_tokenizer(tokenizer, 100, {});
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the tokenizer has 260 ids but the logits only 100"));
  }
  try {
    vocabulary_from_tokenizer(tokenizer, 264, {264});
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("stop id 264 is outside the vocabulary of 264 ids"));
  }
  tiny::Spec joined = spec();
  joined.decoder = "null";
  try {
    vocabulary_from_tokenizer(tiny::load(joined), 264, {});
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("decode puts spaces between tokens"));
  }
}

}  // namespace
