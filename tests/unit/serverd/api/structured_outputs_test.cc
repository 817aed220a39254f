// A request's constraint compiled once on the request's thread into per-sequence constraints: none when
// none is asked, a 400 naming the field for a grammar error or a model without a compiler, and the
// reasoning gate in front when the output starts inside the reasoning.
#include "serverd/api/structured_outputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "serverd/api/api_error.h"
#include "serverd/api/generator.h"
#include "tests/support/allow_set_constraint.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;

// Allows the tokens of the spec's text (one per byte), and says where a grammar is bad.
class ByteSetCompiler final : public ConstraintCompiler {
 public:
  ConstraintFactory compile(const engine::grammar::StructuredOutputSpec& spec) override {
    ++compilations;
    if (spec.text == "bad") throw engine::grammar::GrammarError("line 1, column 2: expected '::='");
    std::set<std::int32_t> allowed;
    for (const char c : spec.text) allowed.insert(static_cast<unsigned char>(c));
    return [allowed, this] {
      lists.push_back(std::make_shared<std::vector<std::int32_t>>());
      return std::unique_ptr<engine::sampling::TokenConstraint>(
          testing_support::AllowSetConstraint::only(allowed, lists.back()));
    };
  }
  int compilations = 0;
  std::vector<std::shared_ptr<std::vector<std::int32_t>>> lists;
};

StructuredOutputRequest grammar(std::string text) {
  StructuredOutputRequest r;
  r.spec.kind = engine::grammar::StructuredOutputSpec::Kind::Grammar;
  r.spec.text = std::move(text);
  r.field = "structured_outputs.grammar";
  return r;
}

TEST(CompileConstraint, OneCompilationEverySequenceItsOwnConstraint) {
  ByteSetCompiler compiler;
  ModelInfo model;
  model.constraints = &compiler;
  EXPECT_FALSE(compile_constraint(std::nullopt, model));
  const ConstraintFactory factory = compile_constraint(grammar("ab"), model);
  ASSERT_TRUE(factory);
  auto first = factory();
  auto second = factory();
  EXPECT_EQ(compiler.compilations, 1);
  EXPECT_TRUE(first->accept('a'));
  EXPECT_TRUE(second->accept('b'));
  EXPECT_EQ(*compiler.lists[0], std::vector<std::int32_t>{'a'});
  EXPECT_EQ(*compiler.lists[1], std::vector<std::int32_t>{'b'});
}

TEST(CompileConstraint, AGrammarErrorIsA400NamingTheFieldAndThePosition) {
  ByteSetCompiler compiler;
  ModelInfo model;
  model.constraints = &compiler;
  try {
    compile_constraint(grammar("bad"), model);
    FAIL() << "a bad grammar compiled";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    EXPECT_EQ(e.error().param, "structured_outputs.grammar");
    EXPECT_EQ(e.error().message, "Invalid 'structured_outputs.grammar': line 1, column 2: expected '::='");
  }
}

TEST(CompileConstraint, AModelWithoutACompilerRefusesByName) {
  ModelInfo model;
  try {
    compile_constraint(grammar("ab"), model);
    FAIL() << "compiled without a compiler";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().param, "structured_outputs.grammar");
    EXPECT_THAT(e.error().message, HasSubstr("no grammar engine"));
  }
}

TEST(AfterReasoning, GatesEachSequencesConstraintBehindTheEndTokens) {
  ByteSetCompiler compiler;
  ModelInfo model;
  model.constraints = &compiler;
  const auto gated = after_reasoning(compile_constraint(grammar("a"), model), {300});
  auto constraint = gated();
  EXPECT_TRUE(constraint->accept('z'));  // reasoning: anything goes
  EXPECT_TRUE(constraint->accept(300));
  EXPECT_FALSE(constraint->accept('z'));
  EXPECT_TRUE(constraint->accept('a'));
  EXPECT_FALSE(after_reasoning({}, {300}));
}

}  // namespace
}  // namespace serverd::api
