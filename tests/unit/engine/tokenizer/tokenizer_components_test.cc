// The tokenizer's building blocks: UTF-8 and Unicode helpers, the Oniguruma-to-PCRE2 pattern translation,
// normalizers, pre-tokenizers and token-text decoders, each against what the reference implementation does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string utf8(std::initializer_list<char32_t> chars) {
  std::string out;
  for (const char32_t c : chars) unicode::append_utf8(out, c);
  return out;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  unicode::append_utf8_lossy(bytes, out);
  return out;
}

const std::string kReplacement = utf8({0xFFFD});

TEST(Unicode, ValidatesUtf8) {
  EXPECT_TRUE(unicode::is_valid_utf8(""));
  EXPECT_TRUE(unicode::is_valid_utf8("plain ascii, longer than eight bytes"));
  EXPECT_TRUE(unicode::is_valid_utf8(utf8({0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF})));
  EXPECT_FALSE(unicode::is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(unicode::is_valid_utf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(unicode::is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(unicode::is_valid_utf8("abcdefgh\xE2\x82"));  // truncated after an ASCII run
  EXPECT_FALSE(unicode::is_valid_utf8("\x80"));
}

// Each maximal invalid subsequence becomes one U+FFFD, as String::from_utf8_lossy and TextDecoder do.
TEST(Unicode, LossyDecodingReplacesMaximalSubparts) {
  EXPECT_EQ(lossy("a\xF0\x9F\x98z"), "a" + kReplacement + "z");  // a truncated 4-byte sequence: one
  EXPECT_EQ(lossy("\xE0\x80"), kReplacement + kReplacement);     // E0 80 is never a prefix: two
  EXPECT_EQ(lossy("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(lossy("\xC3"), kReplacement);
  EXPECT_EQ(lossy("\xFF\xFE"), kReplacement + kReplacement);
  EXPECT_EQ(lossy("ok " + utf8({0x1F600})), "ok " + utf8({0x1F600}));
}

TEST(Unicode, LossyDecodingLeavesAnIncompleteTailForLater) {
  std::string out;
  EXPECT_EQ(unicode::append_utf8_lossy("ab\xF0\x9F\x98", out, false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(unicode::append_utf8_lossy("\xF0\x9F\x41", out, false), 3u);  // broken, not incomplete
  EXPECT_EQ(out, kReplacement + "A");
}

TEST(Unicode, NormalizationForms) {
  std::string out;
  EXPECT_TRUE(unicode::normalize("e" + utf8({0x301}), unicode::NormalForm::NFC, out));
  EXPECT_EQ(out, utf8({0xE9}));
  EXPECT_TRUE(unicode::normalize(utf8({0xE9}), unicode::NormalForm::NFD, out));
  EXPECT_EQ(out, "e" + utf8({0x301}));
  EXPECT_TRUE(unicode::normalize(utf8({0x2460, 0xFB01}), unicode::NormalForm::NFKC, out));  // ① ﬁ
  EXPECT_EQ(out, "1fi");
  EXPECT_TRUE(unicode::normalize(utf8({0x1100, 0x1161, 0x11A8}), unicode::NormalForm::NFC, out));  // jamo
  EXPECT_EQ(out, utf8({0xAC01}));
  EXPECT_FALSE(unicode::normalize("already fine", unicode::NormalForm::NFKC, out));
  EXPECT_FALSE(unicode::normalize(utf8({0x4E2D, 0x6587, 0x1F600, 0xE9}), unicode::NormalForm::NFC, out));
}

// The quick check must never call text normalized that utf8proc would change: every code point alone,
// after a letter, and before a combining mark.
TEST(Unicode, QuickCheckNeverMissesAChange) {
  for (const auto form :
       {unicode::NormalForm::NFC, unicode::NormalForm::NFD, unicode::NormalForm::NFKC, unicode::NormalForm::NFKD}) {
    const int options = form == unicode::NormalForm::NFC    ? UTF8PROC_COMPOSE
                        : form == unicode::NormalForm::NFD  ? UTF8PROC_DECOMPOSE
                        : form == unicode::NormalForm::NFKC ? UTF8PROC_COMPOSE | UTF8PROC_COMPAT
                                                            : UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    std::size_t wrong = 0;
    for (char32_t c = 1; c < 0x110000; ++c) {
      // Unassigned code points have no decomposition and combining class 0: nothing to learn there.
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_CN) continue;
      for (const std::string& text : {utf8({c}), utf8({'a', c}), utf8({c, 0x301}), utf8({0x1100, c})}) {
        if (!unicode::quick_check(text, form)) continue;
        utf8proc_uint8_t* result = nullptr;
        const auto length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                         static_cast<utf8proc_ssize_t>(text.size()), &result,
                                         static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
        const bool same =
            length >= 0 && std::string(reinterpret_cast<const char*>(result), static_cast<std::size_t>(length)) == text;
        std::free(result);
        if (!same && ++wrong < 5)
          ADD_FAILURE() << "U+" << std::hex << static_cast<unsigned>(c) << " form " << int(form);
      }
    }
    EXPECT_EQ(wrong, 0u);
  }
}

TEST(Unicode, LowercaseIsPerCharacter) {
  // Rust's char::to_lowercase: no final-sigma rule, and İ becomes i + combining dot.
  EXPECT_EQ(unicode::to_lowercase("ΟΔΟΣ ABC"), "οδοσ abc");
  EXPECT_EQ(unicode::to_lowercase(utf8({0x130})), "i" + utf8({0x307}));
}

TEST(Unicode, WhiteSpaceIsTheUnicodeProperty) {
  for (const unsigned c :
       {0x9u, 0xDu, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(unicode::is_white_space(c)) << std::hex << c;
  }
  for (const unsigned c : {0x8u, 0x1Cu, 0x180Eu, 0x200Bu, 0xFEFFu, 0x61u}) {
    EXPECT_FALSE(unicode::is_white_space(c)) << std::hex << c;
  }
}

TEST(Unicode, ByteLevelAlphabet) {
  EXPECT_EQ(unicode::bytes_to_byte_level(" hi\n"), "Ġhi" + utf8({0x10A}));
  EXPECT_EQ(unicode::byte_level_to_bytes("Ġhi"), " hi");
  EXPECT_EQ(unicode::byte_level_to_bytes("<|x|>"), "<|x|>");
  EXPECT_EQ(unicode::byte_level_to_bytes(utf8({0x4E2D})), std::nullopt);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(unicode::byte_level_to_bytes(unicode::bytes_to_byte_level(all)), all);
}

std::vector<std::string> matches(const Regex& regex, const std::string& text) {
  std::vector<std::string> out;
  regex.for_each_match(text,
                       [&](std::size_t start, std::size_t end) { out.push_back(text.substr(start, end - start)); });
  return out;
}

std::vector<std::pair<std::size_t, std::size_t>> spans(const Regex& regex, const std::string& text) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  regex.for_each_match(text, [&](std::size_t start, std::size_t end) { out.emplace_back(start, end); });
  return out;
}

TEST(Regex, WhitespaceIsOnigurumasNotPcre2s) {
  const auto regex = Regex::from_oniguruma(R"(\s+)");
  EXPECT_THAT(matches(regex, "a" + utf8({0x85, 0xA0}) + "b" + utf8({0xFEFF, 0x200B}) + "c"),
              ElementsAre(utf8({0x85, 0xA0})));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"([^\s\p{L}]+)"), "ab" + utf8({0xFEFF}) + "!" + utf8({0x85}) + "c"),
              ElementsAre(utf8({0xFEFF}) + "!"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"([\S]+)"), "ab c"), ElementsAre("ab", "c"));
}

TEST(Regex, WordCharactersHaveOnigurumasLatin1Quirk) {
  // A bare \w takes ² (and \b follows it); inside a class it does not.
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\w+)"), "x²y ⁰"), ElementsAre("x²y"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"([\w]+)"), "x²y"), ElementsAre("x", "y"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\b\w+\b)"), "²user é" + utf8({0x301}) + "!"),
              ElementsAre("²user", "é" + utf8({0x301})));
}

TEST(Regex, PosixBracketsHaveOnigurumasUnicodeMeaning) {
  EXPECT_THAT(matches(Regex::from_oniguruma("[[:punct:]]+"), "a!~❤b$"), ElementsAre("!~❤", "$"));
  EXPECT_THAT(matches(Regex::from_oniguruma("[[:alpha:]]+"), "ⅷé1"), ElementsAre("ⅷé"));
  EXPECT_THAT(matches(Regex::from_oniguruma("[[:digit:]]+"), "a٣5b²"), ElementsAre("٣5"));
  EXPECT_THAT(matches(Regex::from_oniguruma("[[:space:]]+"), "a" + utf8({0x85}) + " b"),
              ElementsAre(utf8({0x85}) + " "));
}

TEST(Regex, CaseInsensitiveGroupsFoldSingleCharacters) {
  const auto regex = Regex::from_oniguruma("(?i:'s|'ll)");
  EXPECT_THAT(matches(regex, "it's IT'S it'ſ we'LL"), ElementsAre("'s", "'S", "'ſ", "'LL"));
}

TEST(Regex, AnchorsDotAndIntervals) {
  EXPECT_THAT(matches(Regex::from_oniguruma("^."), "ab\ncd\r\nef\n"), ElementsAre("a", "c", "e"));
  EXPECT_THAT(matches(Regex::from_oniguruma("a$"), "a\na\ra"), ElementsAre("a", "a"));
  EXPECT_THAT(matches(Regex::from_oniguruma("."), "\r\n"), ElementsAre("\r"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\p{N}{1,3})"), "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(matches(Regex::from_oniguruma("a{,2}"), "aaa"), ElementsAre("aa", "a"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\h+)"), "0fG"), ElementsAre("0f"));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\u00e9)"), "é"), ElementsAre("é"));
  EXPECT_THAT(matches(Regex::from_oniguruma("x{y"), "x{y"), ElementsAre("x{y"));
}

// After an empty match the search moves one character on; an empty match where the last one ended is
// skipped (the onig crate's find_iter).
TEST(Regex, EmptyMatchesFollowTheReference) {
  using Spans = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(spans(Regex::from_oniguruma("x*"), "abxxc"), (Spans{{0, 0}, {1, 1}, {2, 4}, {5, 5}}));
  EXPECT_EQ(spans(Regex::from_oniguruma("x*"), ""), (Spans{{0, 0}}));
  EXPECT_EQ(spans(Regex::from_oniguruma("x*"), "é"), (Spans{{0, 0}, {2, 2}}));
}

// PCRE2 10.42 knows Unicode 14; the translation adds what Unicode 15 and 16 gave each property, and uses
// the Script property for scripts as Oniguruma does.
TEST(Regex, PropertiesIncludeNewerUnicode) {
  const auto letters = Regex::from_oniguruma(R"(\p{L}+)");
  const std::string cjk_h = utf8({0x31350, 0x31351});  // CJK Unified Ideographs Extension H (Unicode 15)
  EXPECT_THAT(matches(letters, "ab " + cjk_h + "!"), ElementsAre("ab", cjk_h));
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\d+)"), utf8({0x11F50, 0x11F51}) + "x1"),
              ElementsAre(utf8({0x11F50, 0x11F51}), "1"));  // Kawi digits
  EXPECT_THAT(matches(Regex::from_oniguruma(R"([^\p{L}\s]+)"), "a" + cjk_h + "-b"), ElementsAre("-"));
  // U+3001 (、) has Han among its script extensions, but its script is Common.
  EXPECT_THAT(matches(Regex::from_oniguruma(R"(\p{Han}+)"), utf8({0x4E2D, 0x3001, 0x6587})),
              ElementsAre(utf8({0x4E2D}), utf8({0x6587})));
  EXPECT_THAT(translate_oniguruma_pattern(R"(\p{L})"), HasSubstr("\\x{31350}-\\x{323AF}"));
}

TEST(Regex, LiteralPatternsMatchExactly) {
  EXPECT_THAT(matches(Regex::literal("a.b*"), "a.b* axbb a.b*"), ElementsAre("a.b*", "a.b*"));
}

TEST(Regex, RefusesWhatItCannotTranslate) {
  for (const char* pattern : {"[a-z&&[^aeiou]]", "[[a]b]", R"([\W])", R"([\H])", "a{2}+", "a{2}?", "(?s:a)",
                              "[[:graph:]]", "[[:^alpha:]]", "[abc", R"(\O)"}) {
    EXPECT_THROW(Regex::from_oniguruma(pattern), std::invalid_argument) << pattern;
  }
  try {
    Regex::from_oniguruma("(a");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("offset"));
  }
}

TEST(Regex, SurvivesHugeInputs) {
  // Deep backtracking falls back from the JIT stack to the interpreter instead of failing.
  const auto regex = Regex::from_oniguruma(R"(\s*[\r\n]+|\s+(?!\S)|\s+)");
  const std::string spaces(200000, ' ');
  EXPECT_THAT(spans(regex, spaces + "x"), ElementsAre(std::pair<std::size_t, std::size_t>{0, 199999},
                                                      std::pair<std::size_t, std::size_t>{199999, 200000}));
}

std::string normalized(const Normalizer& normalizer, std::string text) {
  normalizer.normalize(text);
  return text;
}

TEST(Normalizers, EachDoesWhatTheReferenceDoes) {
  EXPECT_EQ(normalized(UnicodeNormalizer(unicode::NormalForm::NFKC), "ﬁ①"), "fi1");
  EXPECT_EQ(normalized(LowercaseNormalizer(), "ÀB"), "àb");
  EXPECT_EQ(normalized(StripNormalizer(true, true), utf8({0x3000}) + " a b \t" + utf8({0x85})), "a b");
  EXPECT_EQ(normalized(StripNormalizer(false, true), "  a  "), "  a");
  EXPECT_EQ(normalized(StripNormalizer(true, true), utf8({0xFEFF}) + "a"), utf8({0xFEFF}) + "a");  // not space
  EXPECT_EQ(normalized(StripAccentsNormalizer(), "e" + utf8({0x301}) + "a" + utf8({0x20DD})), "ea");
  EXPECT_EQ(normalized(ReplaceNormalizer(Regex::from_oniguruma(R"(\s+)"), "_"), "a  b\tc"), "a_b_c");
  EXPECT_EQ(normalized(ReplaceNormalizer(Regex::literal(" "), "▁"), " a b"), "▁a▁b");
  EXPECT_EQ(normalized(PrependNormalizer("▁"), "a"), "▁a");
  EXPECT_EQ(normalized(PrependNormalizer("▁"), ""), "");
  std::vector<std::unique_ptr<Normalizer>> steps;
  steps.push_back(std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFD));
  steps.push_back(std::make_unique<StripAccentsNormalizer>());
  steps.push_back(std::make_unique<LowercaseNormalizer>());
  EXPECT_EQ(normalized(SequenceNormalizer(std::move(steps)), "Crème BRÛLÉE"), "creme brulee");
}

std::vector<std::string> pre_tokenized(const PreTokenizer& pre_tokenizer, const std::string& text) {
  Pieces pieces;
  pieces.reset(text);
  pre_tokenizer.pre_tokenize(pieces);
  return {pieces.views.begin(), pieces.views.end()};
}

// The reference's documented example for each SplitDelimiterBehavior.
TEST(PreTokenizers, SplitBehaviors) {
  const std::string text = "the-final--countdown";
  const auto split = [&](SplitBehavior behavior, bool invert = false) {
    return pre_tokenized(SplitPreTokenizer(Regex::literal("-"), behavior, invert), text);
  };
  EXPECT_THAT(split(SplitBehavior::Removed), ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(split(SplitBehavior::Isolated), ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(split(SplitBehavior::MergedWithPrevious), ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(split(SplitBehavior::MergedWithNext), ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(split(SplitBehavior::Contiguous), ElementsAre("the", "-", "final", "--", "countdown"));
  EXPECT_THAT(split(SplitBehavior::Removed, true), ElementsAre("-", "-", "-"));
}

TEST(PreTokenizers, ByteLevelSplitsLikeGpt2) {
  EXPECT_THAT(pre_tokenized(ByteLevelPreTokenizer(false, true), "Hello world's  42!!"),
              ElementsAre("Hello", " world", "'s", " ", " 42", "!!"));
  EXPECT_THAT(pre_tokenized(ByteLevelPreTokenizer(true, false), "Hello"), ElementsAre(" Hello"));
  EXPECT_THAT(pre_tokenized(ByteLevelPreTokenizer(true, false), " Hello"), ElementsAre(" Hello"));
}

TEST(PreTokenizers, SequenceAppliesInOrderAndAddsThePrefixToEachPiece) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(std::make_unique<SplitPreTokenizer>(Regex::literal(","), SplitBehavior::Removed, false));
  steps.push_back(std::make_unique<ByteLevelPreTokenizer>(true, false));
  EXPECT_THAT(pre_tokenized(SequencePreTokenizer(std::move(steps)), "a,b, c"), ElementsAre(" a", " b", " c"));
}

TEST(PreTokenizers, MetaspaceReplacesSpacesPrependsAndSplits) {
  const auto metaspace = [](PrependScheme prepend, bool split, const std::string& text, bool at_start = true) {
    Pieces pieces;
    pieces.reset(text, at_start);
    MetaspacePreTokenizer("▁", prepend, split).pre_tokenize(pieces);
    return std::vector<std::string>(pieces.views.begin(), pieces.views.end());
  };
  EXPECT_THAT(metaspace(PrependScheme::Always, true, "Hello  world"), ElementsAre("▁Hello", "▁", "▁world"));
  EXPECT_THAT(metaspace(PrependScheme::Always, false, "Hello world"), ElementsAre("▁Hello▁world"));
  EXPECT_THAT(metaspace(PrependScheme::Always, false, " x"), ElementsAre("▁x"));  // one mark, not two
  EXPECT_THAT(metaspace(PrependScheme::Always, false, "x", false), ElementsAre("▁x"));
  // "first": only where the text begins the input (not after an added token).
  EXPECT_THAT(metaspace(PrependScheme::First, false, "x y"), ElementsAre("▁x▁y"));
  EXPECT_THAT(metaspace(PrependScheme::First, false, "x y", false), ElementsAre("x▁y"));
  EXPECT_THAT(metaspace(PrependScheme::Never, true, "a b"), ElementsAre("a", "▁b"));
  EXPECT_THAT(metaspace(PrependScheme::Always, true, ""), ElementsAre());
}

TEST(PreTokenizers, MetaspaceFirstPrependsOnlyToThePieceThatBeginsTheInput) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(std::make_unique<SplitPreTokenizer>(Regex::literal(","), SplitBehavior::Removed, false));
  steps.push_back(std::make_unique<MetaspacePreTokenizer>("▁", PrependScheme::First, false));
  EXPECT_THAT(pre_tokenized(SequencePreTokenizer(std::move(steps)), "a,b c"), ElementsAre("▁a", "b▁c"));
}

TEST(PreTokenizers, DigitsAloneOrInRuns) {
  const std::string text = "a123b" + utf8({0x663, 0x664}) + "½";  // Arabic-Indic digits, a vulgar fraction
  EXPECT_THAT(pre_tokenized(*make_digits_pre_tokenizer(true), text),
              ElementsAre("a", "1", "2", "3", "b", utf8({0x663}), utf8({0x664}), "½"));
  EXPECT_THAT(pre_tokenized(*make_digits_pre_tokenizer(false), text),
              ElementsAre("a", "123", "b", utf8({0x663, 0x664}) + "½"));
}

// Llama 2's decoder: "▁" back to spaces, byte tokens to bytes, one leading space dropped.
DecoderChain llama2_decoder() {
  return DecoderChain({{DecoderStep::Kind::Replace, "▁", " "},
                       {DecoderStep::Kind::ByteFallback, "", ""},
                       {DecoderStep::Kind::Fuse, "", ""},
                       {DecoderStep::Kind::Strip, "", " ", 1, 0}});
}

TEST(Decoders, ByteFallbackDecodesRunsWholeOrAsOneReplacementPerByte) {
  const DecoderChain chain({{DecoderStep::Kind::ByteFallback, "", ""}});
  EXPECT_EQ(chain.decode({"a", "<0xE2>", "<0x82>", "<0xAC>", "b"}, true), "a€b");
  // Not lossy UTF-8: a run that is not valid is a U+FFFD for each of its bytes, the valid prefix too.
  EXPECT_EQ(chain.decode({"<0xE2>", "<0x82>", "<0xAC>", "<0xE2>"}, true),
            kReplacement + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(chain.decode({"<0xE2>", "x", "<0x41>"}, true), kReplacement + "xA");
  EXPECT_EQ(DecoderChain::byte_token("<0x0a>"), 0x0A);  // either case, as u8::from_str_radix reads it
  EXPECT_EQ(DecoderChain::byte_token("<0x+F>"), 0x0F);
  EXPECT_EQ(DecoderChain::byte_token("<0xG0>"), std::nullopt);
  EXPECT_EQ(DecoderChain::byte_token("<0x100>"), std::nullopt);
  EXPECT_EQ(chain.piece("<0xE2>"), "\xE2");  // one byte, for grammars over raw bytes
}

TEST(Decoders, Llama2ChainStripsOnlyTheStartOfTheText) {
  const DecoderChain chain = llama2_decoder();
  EXPECT_EQ(chain.decode({"▁Hello", "▁world"}, true), "Hello world");
  EXPECT_EQ(chain.decode({"▁world"}, false), " world");  // continuing a text: its space stays
  EXPECT_EQ(chain.decode({"<s>", "▁Hi"}, true), "<s> Hi");
  EXPECT_EQ(chain.piece("▁Hello"), " Hello");
}

TEST(Decoders, MetaspaceDropsTheMarksOfTheFirstTokenUnlessNever) {
  const DecoderChain first({{DecoderStep::Kind::Metaspace, "▁", "", 0, 0, true}});
  EXPECT_EQ(first.decode({"▁a▁b", "▁c"}, true), "ab c");  // every mark of the first token, as the reference
  EXPECT_EQ(first.decode({"▁c"}, false), " c");
  const DecoderChain never({{DecoderStep::Kind::Metaspace, "▁", "", 0, 0, false}});
  EXPECT_EQ(never.decode({"▁a", "▁b"}, true), " a b");
}

TEST(Decoders, SettledSaysWhenAStreamMayBeCut) {
  const DecoderChain chain = llama2_decoder();
  EXPECT_TRUE(chain.settled({"▁Hello"}, true));
  EXPECT_FALSE(chain.settled({"▁Hello", "<0xE2>"}, true));  // the byte run may go on
  EXPECT_TRUE(chain.settled({"<0xE2>", "x"}, false));
  EXPECT_TRUE(chain.settled({"▁"}, true));  // the one stripped space is in
  const DecoderChain two({{DecoderStep::Kind::Fuse, "", ""}, {DecoderStep::Kind::Strip, "", " ", 2, 1}});
  EXPECT_FALSE(two.settled({" "}, true));  // a second leading space could still come
  EXPECT_TRUE(two.settled({" x"}, true));
  EXPECT_FALSE(two.settled({"x "}, false));  // the trailing space goes if the text ends here
  EXPECT_EQ(two.decode({" ", " x "}, true), "x");
  EXPECT_EQ(two.decode({" "}, true) + two.decode({" x "}, false), " x");  // why " " was not settled
}

}  // namespace
}  // namespace engine::tokenizer
