// The reasoning gate: everything allowed (and the inner constraint untouched) until the reasoning's end
// tokens are generated, then the inner constraint decides.
#include "serverd/api/reasoning_gated_constraint.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/allow_set_constraint.h"

namespace serverd::api {
namespace {

TEST(ReasoningGatedConstraint, AllowsEverythingUntilTheReasoningEndsThenTheInnerDecides) {
  const auto accepted = std::make_shared<std::vector<std::int32_t>>();
  ReasoningGatedConstraint gate(testing_support::AllowSetConstraint::only({5}, accepted, 1), {70, 71});
  std::vector<std::uint32_t> mask(3);
  gate.fill_bitmask(mask);
  EXPECT_EQ(mask, (std::vector<std::uint32_t>{~0u, ~0u, ~0u}));
  // 70 then something else is not the end; 70 70 71 is.
  for (const std::int32_t t : {9, 70, 3, 70, 70}) EXPECT_TRUE(gate.accept(t)) << t;
  EXPECT_FALSE(gate.reasoning_ended());
  EXPECT_TRUE(gate.accept(71));
  EXPECT_TRUE(gate.reasoning_ended());
  EXPECT_TRUE(accepted->empty());  // the reasoning's tokens never reached the inner constraint
  gate.fill_bitmask(mask);
  EXPECT_EQ(mask, (std::vector<std::uint32_t>{1u << 5, 0u, 0u}));
  EXPECT_FALSE(gate.is_terminated());
  EXPECT_FALSE(gate.accept(6));
  EXPECT_TRUE(gate.accept(5));
  EXPECT_TRUE(gate.is_terminated());
  EXPECT_EQ(*accepted, std::vector<std::int32_t>{5});
}

TEST(ReasoningGatedConstraint, NeedsTheEndTokens) {
  EXPECT_THROW(ReasoningGatedConstraint(nullptr, {}), std::invalid_argument);
}

}  // namespace
}  // namespace serverd::api
