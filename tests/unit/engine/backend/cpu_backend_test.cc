#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"

namespace engine::backend {
namespace {

// The CPU backend repacks a matrix where its SIMD level reads a repacking, but never a table only looked up
// (an embedding the output does not share): the products never stream it, so a repacking would only double
// its memory.
TEST(CpuBackend, ALookupOnlyTableIsNotRepacked) {
  const auto type = quant::WeightType::Q4_K;
  const std::vector<std::byte> blocks(32 * *quant::row_bytes(type, 256));
  {
    cpu::ThreadPool pool(1);
    if (cpu::repack_weights(pool, {type, blocks.data(), 32, 256}) == nullptr) {
      GTEST_SKIP() << "the SIMD level " << cpu::simd_level() << " reads Q4_K as stored";
    }
  }
  auto backend = make_cpu_backend(1);
  WeightSource source{type, blocks, 32, 256};
  const Weight product = backend->add_weight(source);
  source.lookup_only = true;
  const Weight table = backend->add_weight(source);
  const auto* product_matrix = static_cast<const cpu::WeightMatrix*>(product.handle);
  const auto* table_matrix = static_cast<const cpu::WeightMatrix*>(table.handle);
  EXPECT_NE(product_matrix->repacked, nullptr);
  EXPECT_EQ(table_matrix->repacked, nullptr);
  EXPECT_EQ(table_matrix->data, blocks.data());
}

}  // namespace
}  // namespace engine::backend
