// The correctness corpus converts in full: every hand-written and generated schema is one the converter
// supports (the integration test tests/integration/engine_structured_corpus_test.cc then walks their
// grammars and validates what they produce with ajv).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/grammar/json_schema.h"
#include "engine/grammar/structured_output.h"
#include "tests/support/schema_corpus.h"

namespace engine::grammar {
namespace {

TEST(JsonSchemaCorpus, EverySchemaConvertsAndTheCorpusHasAtLeast300) {
  std::vector<testing_support::CorpusSchema> corpus = testing_support::hand_written_schemas(SCHEMA_CORPUS_DIR);
  const std::size_t hand_written = corpus.size();
  for (auto& generated : testing_support::generated_schemas(17, 260)) corpus.push_back(std::move(generated));
  EXPECT_GE(hand_written, 100u);
  EXPECT_GE(corpus.size(), 300u);
  for (const testing_support::CorpusSchema& entry : corpus) {
    try {
      const std::string gbnf = json_schema_to_gbnf(entry.schema, std::nullopt);
      EXPECT_EQ(gbnf.rfind("root ::= ", 0), 0u) << entry.id;
    } catch (const GrammarError& e) {
      ADD_FAILURE() << entry.id << ": " << e.what() << "\n" << entry.schema;
    }
  }
}

TEST(JsonSchemaCorpus, TheGeneratorIsDeterministicAndVaried) {
  const auto first = testing_support::generated_schemas(17, 64);
  const auto again = testing_support::generated_schemas(17, 64);
  std::set<std::string> distinct;
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].schema, again[i].schema);
    distinct.insert(first[i].schema);
  }
  EXPECT_GT(distinct.size(), 60u);
  EXPECT_NE(testing_support::generated_schemas(18, 1)[0].schema, first[0].schema);
}

}  // namespace
}  // namespace engine::grammar
