// The engine's KV cache sizing on the CPU: kv_cache_bytes when given, else cpu_kv_cache_bytes (serverd's
// VLLM_CPU_KVCACHE_SPACE), and a cache too small names the setting to raise.
#include "engine/runtime/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model_writer/model_writer.h"
#include "tests/support/temp_dir.h"

namespace {

using testing::HasSubstr;

class EngineCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    engine::tools::ModelWriterOptions options;
    options.out_dir = dir_.path();
    engine::tools::write_model(options);
  }
  std::string refusal(const engine::runtime::EngineOptions& options) {
    try {
      engine::runtime::Engine::load(dir_.path(), options);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  engine::runtime::EngineOptions cpu() const {
    engine::runtime::EngineOptions options;
    options.device = engine::runtime::Device::Cpu;
    options.threads = 1;
    return options;
  }
  testing_support::TempDir dir_;
};

TEST_F(EngineCacheTest, TheCpuCacheTakesItsOwnSize) {
  auto options = cpu();
  options.max_model_len = 64;
  options.cpu_kv_cache_bytes = std::size_t{1} << 20;
  const auto engine = engine::runtime::Engine::load(dir_.path(), options);
  const std::size_t blocks = engine->kv_cache().num_blocks();
  EXPECT_EQ(blocks, (std::size_t{1} << 20) / engine->cache_shape().bytes_per_block());
  options.cpu_kv_cache_bytes = std::size_t{2} << 20;
  EXPECT_EQ(engine::runtime::Engine::load(dir_.path(), options)->kv_cache().num_blocks(), 2 * blocks);
}

TEST_F(EngineCacheTest, ATooSmallCacheNamesWhatToRaise) {
  auto options = cpu();
  options.cpu_kv_cache_bytes = 1;
  EXPECT_THAT(refusal(options), HasSubstr("holds no block of"));
  EXPECT_THAT(refusal(options), HasSubstr("raise VLLM_CPU_KVCACHE_SPACE (GiB)"));
  options.cpu_kv_cache_bytes = std::size_t{1} << 20;
  options.max_model_len = 1u << 20;
  EXPECT_THAT(refusal(options), HasSubstr("positions the KV cache of 1048576 bytes holds; lower --max-model-len or "
                                          "raise VLLM_CPU_KVCACHE_SPACE (GiB)"));
  options.kv_cache_bytes = 1;
  EXPECT_THAT(refusal(options), HasSubstr("raise --kv-cache-memory-bytes"));
}

}  // namespace
