#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/grammar/spec_to_gbnf.h"
#include "engine/grammar/structured_output.h"
#include "tests/unit/engine/grammar/grammar_test_support.h"

namespace {

using engine::grammar::CompileBudget;
using engine::grammar::GrammarCompiler;
using engine::grammar::GrammarError;
using engine::grammar::GrammarMatcher;
using engine::grammar::StructuredOutputSpec;
using grammar_test::gbnf;
using ::testing::HasSubstr;

std::string compile_error(GrammarCompiler& compiler, const StructuredOutputSpec& spec) {
  try {
    compiler.compile(spec);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(compiled)";
}

// Bytes of every id, one id per byte value, so any text can be written token by token.
std::shared_ptr<const engine::grammar::TokenVocabulary> byte_vocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.emplace_back("<stop>");
  return grammar_test::vocabulary(tokens, {256}, {256});
}

bool matches(GrammarCompiler& compiler, const StructuredOutputSpec& spec, const std::string& text) {
  GrammarMatcher matcher(compiler.compile(spec));
  for (const char c : text) {
    if (!matcher.accept(static_cast<unsigned char>(c))) return false;
  }
  return matcher.accept(256);
}

TEST(GrammarCompiler, CachesCompiledGrammarsBySpec) {
  GrammarCompiler compiler(byte_vocabulary());
  const auto first = compiler.compile(gbnf("root ::= \"a\""));
  EXPECT_EQ(compiler.compile(gbnf("root ::= \"a\"")), first);
  EXPECT_NE(compiler.compile(gbnf("root ::= \"b\"")), first);
  StructuredOutputSpec choice;
  choice.kind = StructuredOutputSpec::Kind::Choice;
  choice.choices = {"a"};
  EXPECT_NE(compiler.compile(choice), first);  // same language, other kind
}

TEST(GrammarCompiler, EvictsTheLeastRecentlyUsedBeyondItsBound) {
  GrammarCompiler compiler(byte_vocabulary());
  const auto kept = compiler.compile(gbnf("root ::= \"kept\""));
  const auto evicted = compiler.compile(gbnf("root ::= \"evicted\""));
  for (int i = 0; i < 100; ++i) {
    compiler.compile(gbnf("root ::= \"g" + std::to_string(i) + "\""));
    compiler.compile(gbnf("root ::= \"kept\""));  // stays recent
  }
  EXPECT_EQ(compiler.compile(gbnf("root ::= \"kept\"")), kept);
  EXPECT_NE(compiler.compile(gbnf("root ::= \"evicted\"")), evicted);
}

TEST(GrammarCompiler, ConcurrentRequestsShareOneCompilation) {
  GrammarCompiler compiler(byte_vocabulary());
  std::vector<std::shared_ptr<const engine::grammar::CompiledGrammar>> results(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = compiler.compile(gbnf("root ::= [a-z]+ (\",\" [a-z]+)*")); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
}

TEST(GrammarCompiler, ChoicesAreEscapedLiterals) {
  GrammarCompiler compiler(byte_vocabulary());
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::Choice;
  spec.choices = {"yes", "no \"way\"", "back\\slash", "two\nlines", "caf\xC3\xA9", "[a-z]", ""};
  for (const auto& choice : spec.choices) EXPECT_TRUE(matches(compiler, spec, choice)) << choice;
  EXPECT_FALSE(matches(compiler, spec, "q"));  // not "[a-z]" read as a class
  EXPECT_FALSE(matches(compiler, spec, "yesno"));
  EXPECT_FALSE(matches(compiler, spec, "no way"));
  spec.choices = {};
  EXPECT_THAT(compile_error(compiler, spec), HasSubstr("the list of choices is empty"));
  spec.choices = {"ok", "\xC3"};
  EXPECT_THAT(compile_error(compiler, spec), HasSubstr("choice 1 is not valid UTF-8"));
}

// JSON schemas, JSON objects and regexes go through their converters into the same automaton.
TEST(GrammarCompiler, SchemasObjectsAndRegexesCompileThroughTheirConverters) {
  GrammarCompiler compiler(byte_vocabulary());
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::JsonSchema;
  spec.text = R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})";
  EXPECT_TRUE(matches(compiler, spec, R"({"n": 12})"));
  EXPECT_FALSE(matches(compiler, spec, R"({"n": "12"})"));
  EXPECT_FALSE(matches(compiler, spec, R"({})"));
  spec.text = R"({"type": "object", "patternProperties": {}})";
  EXPECT_THAT(compile_error(compiler, spec), HasSubstr("patternProperties"));
  spec.kind = StructuredOutputSpec::Kind::JsonObject;
  spec.text.clear();
  EXPECT_TRUE(matches(compiler, spec, R"({"any": [1, {"b": null}]})"));
  EXPECT_FALSE(matches(compiler, spec, "[1]"));
  spec.kind = StructuredOutputSpec::Kind::Regex;
  spec.text = "[a-c]+-\\d{2}";
  EXPECT_TRUE(matches(compiler, spec, "abc-42"));
  EXPECT_FALSE(matches(compiler, spec, "abc-4"));
  spec.text = "(?=a)";
  EXPECT_THAT(compile_error(compiler, spec), HasSubstr("regex: lookahead is not supported at offset 0"));
}

TEST(GrammarCompiler, FieldsAKindDoesNotTakeAreRefused) {
  GrammarCompiler compiler(byte_vocabulary());
  auto spec = gbnf("root ::= \"a\"");
  spec.whitespace_pattern = " *";
  EXPECT_THAT(compile_error(compiler, spec),
              HasSubstr("whitespace_pattern applies to JSON outputs only, not to grammar"));
  spec = gbnf("root ::= \"a\"");
  spec.choices = {"a"};
  EXPECT_THAT(compile_error(compiler, spec), HasSubstr("choices apply to the choice kind only"));
}

TEST(GrammarCompiler, ErrorsAreNotCachedAndNamePositions) {
  GrammarCompiler compiler(byte_vocabulary());
  EXPECT_THAT(compile_error(compiler, gbnf("root ::= \"a\" |\n  (")), HasSubstr("line 2, column 3"));
  EXPECT_THAT(compile_error(compiler, gbnf("root ::= \"a\" |\n  (")), HasSubstr("line 2, column 3"));
}

TEST(GrammarCompiler, HonoursTheStateBudget) {
  CompileBudget budget;
  budget.max_states = 100;
  GrammarCompiler compiler(byte_vocabulary(), budget);
  EXPECT_NO_THROW(compiler.compile(gbnf("root ::= [a-z]{10}")));
  EXPECT_THAT(compile_error(compiler, gbnf("root ::= [a-z]{1000}")),
              HasSubstr("over the compile budget of 100 automaton states"));
}

TEST(GrammarCompiler, LargeGrammarsPrecomputeMasksOnSeveralThreadsAlike) {
  // 300 positions: enough for the mask cache to split its walks over threads where the machine has them.
  GrammarCompiler compiler(byte_vocabulary());
  const auto spec = gbnf("root ::= [a-c]{0,299} \"!\"");
  EXPECT_TRUE(matches(compiler, spec, std::string(299, 'b') + "!"));
  EXPECT_FALSE(matches(compiler, spec, std::string(300, 'b') + "!"));
  GrammarMatcher matcher(compiler.compile(spec));
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(matcher.accept('a'));
  const auto ids = grammar_test::allowed(matcher, 257);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{'!', 'a', 'b', 'c'}));
}

TEST(GrammarCompiler, HonoursTheTimeBudget) {
  CompileBudget budget;
  budget.time = std::chrono::milliseconds(0);
  // Enough tokens that precomputing masks outlasts a zero budget's first clock check.
  std::vector<std::string> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back("t" + std::to_string(i));
  GrammarCompiler compiler(grammar_test::vocabulary(tokens), budget);
  EXPECT_THAT(compile_error(compiler, gbnf("root ::= [a-z0-9]*")),
              HasSubstr("compiling took longer than the time budget of 0 ms"));
}

TEST(GrammarCompiler, RefusesAVocabularyWhoseFieldsDisagree) {
  auto vocab = std::make_shared<engine::grammar::TokenVocabulary>();
  vocab->token_bytes = {"a", "b"};
  vocab->special = {false};
  EXPECT_THROW(GrammarCompiler{vocab}, GrammarError);
  vocab->special = {false, false};
  vocab->stop_ids = {2};
  try {
    GrammarCompiler compiler(vocab);
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_THAT(e.what(), HasSubstr("stop id 2 is outside the vocabulary of 2 ids"));
  }
}

}  // namespace
