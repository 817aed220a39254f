#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace engine::backend {
namespace {

using ::testing::HasSubstr;

KvCacheShape shape() {
  KvCacheShape s;
  s.num_layers = 1;
  s.num_kv_heads = 1;
  s.head_dim = 64;
  s.block_size = 16;
  s.num_blocks = 8;
  return s;
}

std::string refusal(const StepLayout& layout) {
  try {
    check_step_layout(layout, shape(), "test");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(StepLayout, AValidStepPasses) {
  const std::vector<std::int32_t> a = {3, 5}, b = {7};
  StepLayout layout{{{10, 20, {a}}, {0, 1, {b}}}, std::vector<std::int32_t>(21, 1), {19, 20}};
  EXPECT_EQ(refusal(layout), "");
}

TEST(StepLayout, RefusalsNameTheBackendAndTheNumbers) {
  const std::vector<std::int32_t> one = {3}, outside = {8};
  // 20 positions need two blocks of 16.
  EXPECT_THAT(refusal({{{0, 20, {one}}}, std::vector<std::int32_t>(20, 1), {}}),
              HasSubstr("test backend: sequence 0 reaches position 20 but its block table covers 16"));
  EXPECT_THAT(refusal({{{0, 1, {outside}}}, {1}, {}}), HasSubstr("block 8 is outside the cache's 8 blocks"));
  EXPECT_THAT(refusal({{{0, 2, {one}}}, {1}, {}}), HasSubstr("the step lists 1 tokens but its sequences add up to 2"));
  EXPECT_THAT(refusal({{{0, 1, {one}}}, {1}, {1}}), HasSubstr("logit row 1 is past the step's 1 tokens"));
}

// A cache of two groups: layer 0 full, layer 1 sliding with a window of 20. Each sequence has a table per group;
// the sliding one's entries behind the window of the step's first query may be the null block, no others.
KvCacheShape grouped_shape() {
  KvCacheShape s = shape();
  s.num_layers = 2;
  s.groups = {{0, {0}}, {20, {1}}};
  return s;
}

TEST(StepLayout, GroupedCachesCheckEveryTableAndTheNullBlock) {
  const auto refusal_of = [](const StepLayout& layout) -> std::string {
    try {
      check_step_layout(layout, grouped_shape(), "test");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(grouped_shape().layers_per_block(), 1u);
  EXPECT_EQ(grouped_shape().place(1).group, 1u);
  EXPECT_TRUE(grouped_shape().has_null_block());
  EXPECT_FALSE(shape().has_null_block());
  const std::vector<std::int32_t> full = {1, 2, 3}, sliding = {kNullBlock, 4, 5}, early = {1, kNullBlock, 5};
  // Position 40's window reads from 21 on: block 1 and 2; block 0 may be the null block.
  EXPECT_EQ(refusal_of({{{40, 1, {full, sliding}}}, {1}, {}}), "");
  EXPECT_THAT(refusal_of({{{40, 1, {full}}}, {1}, {}}),
              HasSubstr("sequence 0 has 1 block tables for the cache's 2 groups"));
  EXPECT_THAT(refusal_of({{{40, 1, {full, early}}}, {1}, {}}),
              HasSubstr("reads positions 21 to 40 of group 1 but block 1 of its table is the null block"));
  EXPECT_THAT(refusal_of({{{40, 1, {sliding, sliding}}}, {1}, {}}),
              HasSubstr("reads positions 0 to 40 of group 0 but block 0 of its table is the null block"));
  // Without a sliding group, block 0 is a block like any other.
  EXPECT_EQ(refusal({{{0, 1, {std::vector<std::int32_t>{kNullBlock}}}}, {1}, {}}), "");
}

// Every layer in exactly one group, and in one that keeps all it reads.
TEST(StepLayout, GroupsAreCheckedAgainstTheAttentionPlan) {
  auto cpu = make_cpu_backend(1);
  RopeSpec rope;
  rope.inv_freq.assign(32, 1.0);
  const AttentionPlan plan{{rope}, {LayerAttention{}, LayerAttention{.sliding_window = 20}}};
  const auto refusal_of = [&](std::vector<KvCacheGroup> groups) -> std::string {
    KvCacheShape s = grouped_shape();
    s.groups = std::move(groups);
    try {
      cpu->init_cache(s, plan);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal_of({{0, {0}}, {20, {1}}}), "");
  EXPECT_EQ(refusal_of({{0, {0, 1}}}), "");  // a full group keeps every position
  EXPECT_THAT(refusal_of({{0, {0}}, {20, {1, 0}}}),
              HasSubstr("KV cache group 1 names layer 0, which another group holds"));
  EXPECT_THAT(refusal_of({{0, {0}}, {20, {2}}}), HasSubstr("KV cache group 1 names layer 2 of a model of 2"));
  EXPECT_THAT(refusal_of({{0, {0}}}), HasSubstr("layer 1 is in none of the KV cache's 1 groups"));
  EXPECT_THAT(refusal_of({{20, {0}}, {20, {1}}}),
              HasSubstr("layer 0 reads every position but KV cache group 0 keeps 20"));
  EXPECT_THAT(refusal_of({{0, {0}}, {10, {1}}}), HasSubstr("layer 1 reads 20 positions but KV cache group 1 keeps 10"));
}

// The CPU backend keeps its KV cache in f32, f16 or bf16 (--kv-cache-dtype); another type is refused by name.
TEST(StepLayout, TheCpuBackendRefusesAKvCacheTypeItCannotStore) {
  auto cpu = make_cpu_backend(1);
  KvCacheShape q8 = shape();
  q8.kv_type = quant::WeightType::Q8_0;
  RopeSpec rope;
  rope.inv_freq.assign(32, 1.0);
  try {
    cpu->init_cache(q8, rope);
    FAIL() << "a Q8_0 cache was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("a KV cache of Q8_0: the CPU stores keys and values as F32, F16 or BF16"));
  }
  KvCacheShape bf16 = shape();
  bf16.kv_type = quant::WeightType::BF16;
  cpu->init_cache(bf16, rope);  // a bf16 cache is the CPU's default since --kv-cache-dtype
}

// An attention plan names a RoPE for each layer of the cache among its own, each with a frequency per pair of
// dimensions; the CPU backend refuses one that does not, naming the layer or the rope.
TEST(StepLayout, AnAttentionPlanIsCheckedAgainstTheCache) {
  auto cpu = make_cpu_backend(1);
  const auto refusal_of = [&](const AttentionPlan& plan) -> std::string {
    try {
      cpu->init_cache(shape(), plan);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  RopeSpec rope;
  rope.inv_freq.assign(32, 1.0);
  EXPECT_THAT(refusal_of({{rope}, {LayerAttention{}, LayerAttention{}}}),
              HasSubstr("an attention plan of 2 layers for a cache of 1"));
  EXPECT_THAT(refusal_of({{rope}, {LayerAttention{.rope = 1}}}),
              HasSubstr("layer 0 uses rotary embedding 1 of the plan's 1"));
  RopeSpec long_rope;
  long_rope.inv_freq.assign(33, 1.0);
  EXPECT_THAT(refusal_of({{rope, long_rope}, {LayerAttention{}}}),
              HasSubstr("rotary embedding 1 has 33 frequencies; heads of 64 take 1 to 32"));
  EXPECT_THAT(refusal_of({{RopeSpec{}}, {LayerAttention{}}}), HasSubstr("rotary embedding 0 has 0 frequencies"));
  RopeSpec unscaled = rope;
  unscaled.attention_factor = 0;
  EXPECT_THAT(refusal_of({{unscaled}, {LayerAttention{}}}),
              HasSubstr("rotary embedding 0 has an attention factor of 0.000000; it must be positive"));
  // Partial rotary (Phi-3's): fewer frequencies than the head's pairs.
  RopeSpec partial;
  partial.inv_freq.assign(24, 1.0);
  EXPECT_EQ(refusal_of({{partial}, {LayerAttention{}}}), "");
  EXPECT_EQ(refusal_of({{rope}, {LayerAttention{.rope = std::nullopt, .sliding_window = 4}}}), "");
}

}  // namespace
}  // namespace engine::backend
