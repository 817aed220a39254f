// The engine's KV cache sizing on the CPU: kv_cache_bytes when given, else cpu_kv_cache_bytes (serverd's
// VLLM_CPU_KVCACHE_SPACE), and a cache too small names the setting to raise; its element type from
// --kv-cache-dtype (bf16 by default on the CPU); its CPU threads pinned when given CPUs; the hidden states a
// pooling step returns are what its logits are computed from; weights it repacks do not stay resident twice;
// sliding-window layers cost the cache their window.
#include "engine/runtime/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_set.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model_writer/model_writer.h"
#include "engine/quant/quant.h"
#include "tests/support/step_file_bytes.h"
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

TEST_F(EngineCacheTest, TheKvCacheDtypeChoosesTheCachesTypeAndSixteenBitsHoldTwiceThePositions) {
  using engine::quant::WeightType;
  using engine::runtime::KvCacheDtype;
  auto options = cpu();
  options.max_model_len = 64;
  options.cpu_kv_cache_bytes = std::size_t{1} << 20;
  const auto blocks = [&](KvCacheDtype dtype, WeightType expected) {
    options.kv_cache_dtype = dtype;
    const auto engine = engine::runtime::Engine::load(dir_.path(), options);
    EXPECT_EQ(engine->cache_shape().kv_type, expected);
    return engine->kv_cache().num_blocks();
  };
  const std::size_t f32 = blocks(KvCacheDtype::Float32, WeightType::F32);
  EXPECT_EQ(blocks(KvCacheDtype::Auto, WeightType::F16), 2 * f32);  // on the CPU (docs/cpu-kernels.md)
  EXPECT_EQ(blocks(KvCacheDtype::BFloat16, WeightType::BF16), 2 * f32);
  EXPECT_EQ(blocks(KvCacheDtype::Float16, WeightType::F16), 2 * f32);
}

// A Mistral model whose every layer slides over 8 positions: its KV cache holds only the blocks a window and a
// step reach, so a cache of a few blocks holds sequences of any length; one too small for even a window makes
// the window moot and the layers full-attention ones again.
TEST(SlidingWindowCache, AWindowLetsAFewBlocksHoldAnyLength) {
  testing_support::TempDir dir;
  engine::tools::ModelWriterOptions writer;
  writer.arch = engine::model::Architecture::Mistral;
  writer.out_dir = dir.path();
  engine::tools::write_model(writer);
  {
    std::ifstream in(dir / "config.json");
    std::stringstream text;
    text << in.rdbuf();
    std::string config = text.str();
    config.insert(config.rfind('}'), ", \"sliding_window\": 8");
    std::ofstream(dir / "config.json") << config;
  }
  engine::runtime::EngineOptions options;
  options.device = engine::runtime::Device::Cpu;
  options.threads = 1;
  options.block_size = 4;
  options.max_num_batched_tokens = 4;
  const std::size_t block_bytes = engine::runtime::Engine::load(dir.path(), options)->cache_shape().bytes_per_block();
  const auto load = [&](std::size_t blocks) {
    options.kv_cache_bytes = blocks * block_bytes;
    return engine::runtime::Engine::load(dir.path(), options);
  };
  // The null block and five: a step of 4 tokens and the window before it span at most four blocks.
  const auto roomy = load(6);
  EXPECT_EQ(roomy->max_model_len(), engine::model::derived_max_model_len(roomy->config()));
  ASSERT_EQ(roomy->cache_shape().groups.size(), 1u);
  EXPECT_EQ(roomy->cache_shape().groups[0].sliding_window, 8u);
  EXPECT_EQ(roomy->kv_cache().num_usable(), 5u);
  // A whole prompt in one step (max_num_batched_tokens 0) keeps every block until the step ends: 20 positions.
  options.max_num_batched_tokens = 0;
  EXPECT_EQ(load(6)->max_model_len(), 20u);
  // Two blocks besides the null one hold 8 positions, which the window covers: full attention, three blocks.
  options.max_num_batched_tokens = 4;
  const auto tight = load(3);
  EXPECT_EQ(tight->max_model_len(), 8u);
  EXPECT_EQ(tight->cache_shape().groups[0].sliding_window, 0u);
  EXPECT_EQ(tight->kv_cache().num_usable(), 3u);
}

// EngineOptions::cpus pins the CPU backend's threads one per CPU; a thread count that disagrees is refused.
TEST_F(EngineCacheTest, PinnedCpuThreadsAreOnePerCpu) {
  auto options = cpu();
  options.max_model_len = 64;
  options.cpu_kv_cache_bytes = std::size_t{1} << 20;
  options.cpus = {engine::cpu::allowed_cpus().back()};
  options.threads = 2;
  try {
    engine::runtime::Engine::load(dir_.path(), options);
    FAIL() << "2 threads over 1 CPU were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("2 CPU threads cannot be pinned to 1 CPUs: give threads 0 or one per CPU"));
  }
  options.threads = 0;
  // On a thread of its own: the load may pin its caller.
  std::thread([&] { EXPECT_NO_THROW(engine::runtime::Engine::load(dir_.path(), options)); }).join();
  options.cpus = {100000};
  EXPECT_THROW(engine::runtime::Engine::load(dir_.path(), options), std::invalid_argument);
}

TEST(KvCacheDtype, ParsesVllmsSpellingsAndFloat32) {
  using engine::runtime::KvCacheDtype;
  using engine::runtime::parse_kv_cache_dtype;
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KvCacheDtype::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), KvCacheDtype::BFloat16);
  EXPECT_EQ(parse_kv_cache_dtype("float16"), KvCacheDtype::Float16);
  EXPECT_EQ(parse_kv_cache_dtype("float32"), KvCacheDtype::Float32);
  EXPECT_FALSE(parse_kv_cache_dtype("fp8"));
  EXPECT_FALSE(parse_kv_cache_dtype("bf16"));
}

// A step's hidden states times the output matrix are its logits: step_hidden stops right before it.
TEST_F(EngineCacheTest, HiddenStatesAreWhatTheLogitsAreComputedFrom) {
  auto options = cpu();
  options.max_model_len = 64;
  const auto engine = engine::runtime::Engine::load(dir_.path(), options);
  const std::vector<std::int32_t> tokens = {3, 1, 4, 1, 5};
  engine::runtime::SequenceCache for_hidden, for_logits;
  ASSERT_TRUE(engine->reserve(for_hidden, tokens.size()));
  ASSERT_TRUE(engine->reserve(for_logits, tokens.size()));
  std::vector<float> hidden, logits;
  const engine::runtime::StepInput hidden_input{&for_hidden, tokens, true};
  engine->step_hidden(std::span(&hidden_input, 1), hidden);
  const engine::runtime::StepInput logits_input{&for_logits, tokens, true};
  engine->step(std::span(&logits_input, 1), logits);
  EXPECT_EQ(for_hidden.cached, tokens.size());

  const std::size_t width = engine->config().hidden_size, vocab = engine->config().vocab_size;
  ASSERT_EQ(hidden.size(), tokens.size() * width);
  ASSERT_EQ(logits.size(), tokens.size() * vocab);
  const auto& head = engine->checkpoint().weights().lm_head;
  const std::size_t row_bytes = *engine::quant::row_bytes(head.type, head.cols);
  std::vector<float> row(width);
  double worst = 0;
  for (std::size_t v = 0; v < vocab; ++v) {
    engine::quant::dequantize_row(head.type, head.bytes.subspan(v * row_bytes, row_bytes), row);
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      double dot = 0;
      for (std::size_t i = 0; i < width; ++i) dot += double{hidden[t * width + i]} * row[i];
      worst = std::max(worst, std::abs(dot - logits[t * vocab + v]));
    }
  }
  EXPECT_LT(worst, 1e-3);
}

// What /proc/self/smaps says of the process's mappings of `file`: their resident bytes, and every VmFlag any
// of them carries ("nh" for MADV_NOHUGEPAGE).
struct FileMappings {
  std::size_t resident_bytes = 0;
  std::set<std::string> flags;
};

FileMappings mappings_of(const std::filesystem::path& file) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string name = std::filesystem::canonical(file).string();
  FileMappings out;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {  // a mapping's header line
      inside = line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0;
    } else if (!inside) {
      continue;
    } else if (first == "Rss:") {
      std::size_t kib = 0;
      fields >> kib;
      out.resident_bytes += kib * 1024;
    } else if (first == "VmFlags:") {
      for (std::string flag; fields >> flag;) out.flags.insert(flag);
    }
  }
  return out;
}

// Where the CPU's SIMD level repacks Q4_K (avx512vnni), the backend copies the weights at load and drops the
// mapped pages it read: after a step, the file's pages in memory are a small part of it (its header, the norms,
// the embedding rows looked up), not the weights a second time.
TEST(RepackedWeights, TheMappedWeightsDoNotStayResident) {
  {
    engine::cpu::ThreadPool pool(1);
    const std::vector<std::byte> blocks(16 * *engine::quant::row_bytes(engine::quant::WeightType::Q4_K, 256));
    if (engine::cpu::repack_weights(pool, {engine::quant::WeightType::Q4_K, blocks.data(), 16, 256}) == nullptr) {
      GTEST_SKIP() << "the SIMD level " << engine::cpu::simd_level() << " reads Q4_K as stored";
    }
  }
  testing_support::TempDir dir;
  engine::tools::ModelWriterOptions writer;
  writer.out_dir = dir.path();
  writer.gguf_types = {engine::quant::WeightType::Q4_K};
  writer.safetensors = false;
  engine::tools::write_model(writer);
  const auto file = dir.path() / "model-Q4_K.gguf";
  engine::runtime::EngineOptions options;
  options.device = engine::runtime::Device::Cpu;
  options.threads = 1;
  options.max_model_len = 64;
  const auto engine = engine::runtime::Engine::load(file, options);
  const std::vector<std::int32_t> tokens = {3, 1, 4, 1, 5};
  engine::runtime::SequenceCache cache;
  ASSERT_TRUE(engine->reserve(cache, tokens.size()));
  std::vector<float> logits;
  const engine::runtime::StepInput input{&cache, tokens, true};
  engine->step(std::span(&input, 1), logits);
  ASSERT_EQ(logits.size(), tokens.size() * engine->config().vocab_size);
  const FileMappings mapped = mappings_of(file);
  const std::size_t file_bytes = std::filesystem::file_size(file), resident = mapped.resident_bytes;
  EXPECT_LT(resident, file_bytes / 4) << resident << " of the file's " << file_bytes << " bytes resident";
  // And the dropped pages are advised against huge pages, so that a row looked up later maps small pages, not
  // 2 MiB of the page cache's folio around it (where the kernel has transparent huge pages to advise on).
  EXPECT_EQ(mapped.flags.contains("nh"), std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"));
}

// A mixture's decode step reads the experts its token is routed to, where they lie in the file, and no other:
// Qwen3-MoE's tiny model (8 experts, 2 per token) in Q8_0, one decode step after a prompt. The bytes of the file
// it touches stay within 1.3x of the weights a token uses (Checkpoint::weight_bytes: 2 of the 8 experts); reading
// every expert would be more than twice that.
TEST(MixtureOfExperts, ADecodeStepReadsOnlyTheExpertsItsTokenIsRoutedTo) {
  testing_support::TempDir dir;
  engine::tools::ModelWriterOptions writer;
  writer.arch = engine::model::Architecture::Qwen3Moe;
  writer.out_dir = dir.path();
  writer.gguf_types = {engine::quant::WeightType::Q8_0};
  writer.safetensors = false;
  engine::tools::write_model(writer);
  engine::runtime::EngineOptions options;
  options.device = engine::runtime::Device::Cpu;
  options.threads = 1;
  options.max_model_len = 64;
  const auto engine = engine::runtime::Engine::load(dir.path() / "model-Q8_0.gguf", options);
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
  engine::runtime::SequenceCache cache;
  ASSERT_TRUE(engine->reserve(cache, prompt.size() + 1));
  std::vector<float> logits;
  engine::runtime::StepInput input{&cache, prompt, false};
  engine->step(std::span(&input, 1), logits);
  const std::vector<std::int32_t> next = {9};
  input = {&cache, next, false};
  const auto read = testing_support::measure_step_file_bytes([&] { engine->step(std::span(&input, 1), logits); });
  const auto& moe = *engine->config().moe;
  const std::uint64_t active = engine->checkpoint().weight_bytes();
  std::uint64_t experts = 0;  // every expert's bytes, over all layers
  for (const auto& layer : engine->checkpoint().weights().layers) {
    for (const auto& e : layer.moe->experts) experts += e.gate.bytes.size() + e.up.bytes.size() + e.down.bytes.size();
  }
  EXPECT_GT(read.read, experts * moe.experts_per_token / moe.num_experts / 2) << "the routed experts were not read";
  EXPECT_LE(read.read, active * 13 / 10) << read.read << " bytes read; a token uses " << active << ", of which "
                                         << experts * moe.experts_per_token / moe.num_experts << " are experts";
  EXPECT_GT(active + experts * (moe.num_experts - moe.experts_per_token) / moe.num_experts, active * 13 / 10)
      << "reading every expert would pass too: the bound does not tell them apart";
}

}  // namespace
