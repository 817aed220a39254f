#include "serverd/loader/engine_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace serverd {
namespace {

ServerOptions parse(std::vector<std::string> args, const ServerEnvironment& env) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_server_options(argv, env).value();
}

// Every flag and variable the engine is loaded by reaches EngineOptions, each with a value unlike its default
// (a field left unwired keeps the default and fails here).
TEST(EngineOptions, EveryFlagReachesTheEngine) {
  ServerEnvironment env;
  env.cpu_kvcache_space = "3";
  env.cpu_omp_threads_bind = "1";
  env.allowed_cpus = {0, 1};
  const auto o = parse({"serve", "org/model", "--device", "cpu", "--max-model-len", "4096", "--block-size", "32",
                        "--max-num-batched-tokens", "512", "--kv-cache-dtype", "float16", "--gpu-memory-utilization",
                        "0.5", "--enforce-eager", "--kv-cache-memory-bytes", "123456789"},
                       env);
  const auto eo = engine_options(o);
  const engine::runtime::EngineOptions defaults;
  EXPECT_EQ(eo.device, engine::runtime::Device::Cpu);
  EXPECT_EQ(eo.max_model_len, 4096u);
  EXPECT_EQ(eo.block_size, 32u);
  EXPECT_EQ(eo.max_num_batched_tokens, 512u);
  EXPECT_EQ(eo.kv_cache_dtype, engine::runtime::KvCacheDtype::Float16);
  EXPECT_DOUBLE_EQ(eo.gpu_memory_utilization, 0.5);
  EXPECT_TRUE(eo.enforce_eager);
  EXPECT_EQ(eo.kv_cache_bytes, 123456789u);
  EXPECT_EQ(eo.cpu_kv_cache_bytes, std::size_t{3} << 30);
  EXPECT_EQ(eo.cpus, std::vector<int>{1});
  EXPECT_NE(eo.cpus, defaults.cpus);
}

// Without flags, the engine's own defaults stand but for the scheduler's step, which serverd always sets.
TEST(EngineOptions, DefaultsAreTheEnginesButTheStep) {
  const auto eo = engine_options(parse({"serve", "org/model"}, {}));
  const engine::runtime::EngineOptions defaults;
  EXPECT_EQ(eo.device, defaults.device);
  EXPECT_EQ(eo.block_size, defaults.block_size);
  EXPECT_EQ(eo.kv_cache_dtype, defaults.kv_cache_dtype);
  EXPECT_EQ(eo.cpu_kv_cache_bytes, defaults.cpu_kv_cache_bytes);
  EXPECT_EQ(eo.max_num_batched_tokens, 2048u);  // vLLM's default step
}

}  // namespace
}  // namespace serverd
