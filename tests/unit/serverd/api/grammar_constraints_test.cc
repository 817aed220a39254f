// The model's ConstraintCompiler: the grammar engine over the tokenizer's vocabulary, one compilation per
// request, a fresh matcher per sequence, stop ids allowed exactly when the output is complete, and the
// engine's errors passed on.
#include "serverd/api/grammar_constraints.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

using Kind = engine::grammar::StructuredOutputSpec::Kind;
using serverd_test::kEos;

bool allowed(engine::sampling::TokenConstraint& constraint, std::int32_t token) {
  std::vector<std::uint32_t> mask(engine::sampling::bitmask_words(320));
  constraint.fill_bitmask(mask);
  return (mask[static_cast<std::size_t>(token) / 32] >> (token % 32)) & 1u;
}

TEST(GrammarConstraints, EverySequenceGetsItsOwnMatcherOfOneCompilation) {
  const serverd_test::TestModel model;
  GrammarConstraints constraints(model.tokenizer, 320, {kEos});
  engine::grammar::StructuredOutputSpec spec;
  spec.kind = Kind::Choice;
  spec.choices = {"yes", "no"};
  const ConstraintFactory factory = constraints.compile(spec);
  auto first = factory();
  auto second = factory();
  EXPECT_TRUE(allowed(*first, 'y'));
  EXPECT_TRUE(allowed(*first, 'n'));
  EXPECT_FALSE(allowed(*first, 'x'));
  EXPECT_FALSE(allowed(*first, kEos));  // nothing is complete yet
  ASSERT_TRUE(first->accept('n'));
  ASSERT_TRUE(first->accept('o'));
  EXPECT_TRUE(allowed(*first, kEos));
  EXPECT_FALSE(allowed(*first, 300));  // the padding rows past the tokenizer are never allowed
  // The second sequence has not moved.
  EXPECT_TRUE(allowed(*second, 'y'));
  EXPECT_FALSE(allowed(*second, 'o'));
}

TEST(GrammarConstraints, TheEnginesErrorsReachTheCaller) {
  const serverd_test::TestModel model;
  GrammarConstraints constraints(model.tokenizer, 320, {kEos});
  engine::grammar::StructuredOutputSpec spec;
  spec.kind = Kind::Regex;
  spec.text = "(ab";
  EXPECT_THROW(constraints.compile(spec), engine::grammar::GrammarError);
}

TEST(GrammarConstraints, AStopIdOutsideTheLogitsIsRefusedAtLoad) {
  const serverd_test::TestModel model;
  EXPECT_THROW(GrammarConstraints(model.tokenizer, 320, {400}), engine::grammar::GrammarError);
}

}  // namespace
}  // namespace serverd::api
