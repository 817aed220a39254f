#include "engine/format/ggml_types.h"

#include <gtest/gtest.h>

namespace engine::format {
namespace {

// Block sizes and bytes per block of the types the engine loads, as ggml lays them out.
TEST(GgmlTypes, KnowsTheLayoutsTheEngineUses) {
  struct Expected {
    const char* name;
    std::uint32_t id, block, bytes;
  };
  for (const auto& e :
       {Expected{"F32", 0, 1, 4}, Expected{"F16", 1, 1, 2}, Expected{"Q4_0", 2, 32, 18}, Expected{"Q4_1", 3, 32, 20},
        Expected{"Q5_0", 6, 32, 22}, Expected{"Q5_1", 7, 32, 24}, Expected{"Q8_0", 8, 32, 34},
        Expected{"Q2_K", 10, 256, 84}, Expected{"Q3_K", 11, 256, 110}, Expected{"Q4_K", 12, 256, 144},
        Expected{"Q5_K", 13, 256, 176}, Expected{"Q6_K", 14, 256, 210}, Expected{"Q8_K", 15, 256, 292},
        Expected{"IQ4_NL", 20, 32, 18}, Expected{"IQ4_XS", 23, 256, 136}, Expected{"BF16", 30, 1, 2}}) {
    const auto* t = ggml_type_info(e.id);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_size, e.block) << e.name;
    EXPECT_EQ(t->type_size, e.bytes) << e.name;
    EXPECT_EQ(ggml_type_by_name(e.name), t);
  }
}

TEST(GgmlTypes, RetiredAndFutureIdsAreUnknown) {
  for (const std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u})
    EXPECT_EQ(ggml_type_info(id), nullptr) << id;
}

TEST(GgmlTypes, ByteSizeNeedsWholeBlocks) {
  const auto& q8 = *ggml_type_by_name("Q8_0");
  EXPECT_EQ(ggml_byte_size(q8, 64), 68u);
  EXPECT_FALSE(ggml_byte_size(q8, 33));
  EXPECT_FALSE(ggml_byte_size(*ggml_type_by_name("F32"), ~std::uint64_t{0}));
}

}  // namespace
}  // namespace engine::format
