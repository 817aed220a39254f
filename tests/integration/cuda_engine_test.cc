// The engine on the CUDA backend, end to end on tiny models: logits beside the CPU engine, decode steps
// replayed from CUDA graphs identical to the same steps launched kernel by kernel, and the memory flags.
// Skipped, saying why, where no GPU exists.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_writer/model_writer.h"
#include "engine/runtime/engine.h"
#include "engine/sampling/sampler.h"
#include "tests/support/require_gpu.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using engine::model::Architecture;
using engine::quant::WeightType;
using engine::runtime::Device;
using engine::runtime::Engine;
using engine::runtime::EngineOptions;
using engine::runtime::SequenceCache;
using engine::runtime::StepInput;

fs::path write_tiny(const fs::path& dir, Architecture arch, WeightType dtype) {
  engine::tools::ModelWriterOptions options;
  options.arch = arch;
  options.out_dir = dir;
  options.seed = 11;
  options.dtype = dtype;
  engine::tools::write_model(options);
  return dir;
}

std::unique_ptr<Engine> load(const fs::path& model, Device device, bool enforce_eager = false,
                             bool overlap_kernels = true,
                             engine::runtime::KvCacheDtype kv_cache_dtype = engine::runtime::KvCacheDtype::Auto) {
  EngineOptions options;
  options.device = device;
  options.kv_cache_dtype = kv_cache_dtype;
  options.threads = 2;
  options.max_model_len = 512;
  options.enforce_eager = enforce_eager;
  options.overlap_kernels = overlap_kernels;
  return Engine::load(model, options);
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

// Prefills `batch` sequences (different lengths), then runs `steps` decode steps feeding back the argmax;
// returns every decode step's logits in order.
std::vector<std::vector<float>> decode_run(Engine& engine, std::size_t batch, std::size_t steps) {
  std::vector<SequenceCache> caches(batch);
  std::vector<std::vector<std::int32_t>> tokens(batch);
  std::vector<StepInput> inputs;
  for (std::size_t s = 0; s < batch; ++s) {
    for (std::size_t i = 0; i < 5 + 7 * s; ++i) tokens[s].push_back(static_cast<std::int32_t>((31 * s + 17 * i) % 500));
    EXPECT_TRUE(engine.reserve(caches[s], tokens[s].size() + steps));
    inputs.push_back({&caches[s], tokens[s]});
  }
  std::vector<float> logits;
  engine.step(inputs, logits);
  const std::size_t vocab = engine.config().vocab_size;
  std::vector<std::vector<float>> out;
  std::vector<std::int32_t> next(batch);
  for (std::size_t step = 0; step < steps; ++step) {
    for (std::size_t s = 0; s < batch; ++s) {
      const auto row = logits.begin() + static_cast<std::ptrdiff_t>(s * vocab);
      next[s] = static_cast<std::int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row);
      inputs[s] = {&caches[s], std::span<const std::int32_t>(&next[s], 1)};
    }
    engine.step(inputs, logits);
    out.push_back(logits);
  }
  for (auto& c : caches) engine.release(c);
  return out;
}

TEST(CudaEngine, LogitsMatchTheCpuEngine) {
  REQUIRE_GPU();
  testing_support::TempDir dir;
  for (const auto arch : {Architecture::Qwen3, Architecture::Qwen2, Architecture::Llama}) {
    for (const auto dtype : {WeightType::F32, WeightType::BF16}) {
      const auto model = write_tiny(dir.path() / (std::to_string(static_cast<int>(arch)) + "-" +
                                                  std::string(engine::quant::weight_type_name(dtype))),
                                    arch, dtype);
      // An f32 model keeps f32 keys and values on the GPU ("auto"); the CPU's "auto" is f16, whose rounding
      // alone (about 3e-4 here) would pass the f32 bound, so its cache is f32 for that comparison.
      const auto cpu_cache =
          dtype == WeightType::F32 ? engine::runtime::KvCacheDtype::Float32 : engine::runtime::KvCacheDtype::Auto;
      auto cpu = load(model, Device::Cpu, false, true, cpu_cache);
      auto gpu = load(model, Device::Cuda);
      EXPECT_TRUE(gpu->device_name().starts_with("cuda")) << gpu->device_name();
      const auto want = decode_run(*cpu, 3, 4);
      const auto got = decode_run(*gpu, 3, 4);
      const double tolerance = dtype == WeightType::F32 ? 1e-4 : 2e-2;
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_LT(relative_error(got[i], want[i]), tolerance)
            << engine::quant::weight_type_name(dtype) << " model, arch " << static_cast<int>(arch) << ", step " << i;
      }
    }
  }
}

// Batch sizes 1 and 3 go through the weight kernels, 12 through cuBLAS; each shape runs eagerly once, is
// captured the second time and replayed after. A replay that skipped or reordered a kernel changes bits.
TEST(CudaEngine, GraphReplayedDecodeStepsEqualEagerSteps) {
  REQUIRE_GPU();
  testing_support::TempDir dir;
  const auto model = write_tiny(dir.path() / "m", Architecture::Qwen3, WeightType::BF16);
  auto graphs = load(model, Device::Cuda);
  auto eager = load(model, Device::Cuda, true);
  for (const std::size_t batch : {1, 3, 12}) {
    const auto want = decode_run(*eager, batch, 6);
    const auto got = decode_run(*graphs, batch, 6);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << "batch " << batch << ", decode step " << i;
    }
  }
}

// Kernels that start while the one before them finishes (on GPUs that allow it) must still read only what
// that one finished: logits bit-identical to strict stream order, eagerly and through graphs, for batches
// through the weight kernels and through cuBLAS, on a model whose q, k, v carry biases (Qwen2) and one with
// q/k norms (Qwen3).
TEST(CudaEngine, OverlappedKernelsGiveTheLogitsOfStrictStreamOrder) {
  REQUIRE_GPU();
  testing_support::TempDir dir;
  for (const auto arch : {Architecture::Qwen3, Architecture::Qwen2}) {
    const auto model = write_tiny(dir.path() / std::to_string(static_cast<int>(arch)), arch, WeightType::BF16);
    auto strict = load(model, Device::Cuda, true, false);
    for (const bool enforce_eager : {true, false}) {
      auto overlapped = load(model, Device::Cuda, enforce_eager, true);
      for (const std::size_t batch : {1, 3, 12}) {
        const auto want = decode_run(*strict, batch, 4);
        const auto got = decode_run(*overlapped, batch, 4);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i], want[i]) << "arch " << static_cast<int>(arch) << (enforce_eager ? ", eager" : ", graphs")
                                     << ", batch " << batch << ", decode step " << i;
        }
      }
    }
  }
}

// Greedy tokens chosen by the engine's step_and_sample: on the GPU its own sampler picks them where the
// logits are, on the CPU the host's. In f32 both generate the same 64 tokens.
std::vector<std::vector<std::int32_t>> greedy_run(Engine& engine, std::size_t batch, std::size_t steps) {
  engine::sampling::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<SequenceCache> caches(batch);
  std::vector<std::vector<std::int32_t>> tokens(batch);
  std::vector<std::unique_ptr<engine::sampling::SequenceSampler>> samplers;
  std::vector<engine::sampling::SequenceSampler*> sampler_ptrs;
  for (std::size_t s = 0; s < batch; ++s) {
    for (std::size_t i = 0; i < 3 + 5 * s; ++i) tokens[s].push_back(static_cast<std::int32_t>((7 * s + 13 * i) % 400));
    EXPECT_TRUE(engine.reserve(caches[s], tokens[s].size() + steps));
    samplers.push_back(std::make_unique<engine::sampling::SequenceSampler>(greedy, tokens[s]));
    sampler_ptrs.push_back(samplers.back().get());
  }
  std::vector<std::vector<std::int32_t>> generated(batch);
  std::vector<engine::sampling::SampledToken> sampled;
  for (std::size_t step = 0; step < steps; ++step) {
    std::vector<StepInput> inputs;
    for (std::size_t s = 0; s < batch; ++s) {
      const std::size_t from = caches[s].cached;
      inputs.push_back({&caches[s], std::span<const std::int32_t>(tokens[s].data() + from, tokens[s].size() - from)});
    }
    engine.step_and_sample(inputs, sampler_ptrs, sampled);
    for (std::size_t s = 0; s < batch; ++s) {
      tokens[s].push_back(sampled[s].token);
      generated[s].push_back(sampled[s].token);
    }
  }
  for (auto& c : caches) engine.release(c);
  return generated;
}

TEST(CudaEngine, GreedyGenerationsIdenticalToTheCpuFor64StepsInF32) {
  REQUIRE_GPU();
  testing_support::TempDir dir;
  for (const auto arch : {Architecture::Qwen3, Architecture::Qwen2, Architecture::Llama}) {
    const auto model = write_tiny(dir.path() / std::to_string(static_cast<int>(arch)), arch, WeightType::F32);
    auto cpu = load(model, Device::Cpu);
    auto gpu = load(model, Device::Cuda);
    EXPECT_EQ(greedy_run(*gpu, 4, 64), greedy_run(*cpu, 4, 64)) << "arch " << static_cast<int>(arch);
  }
}

// The settings the engine refuses before touching a device, and, where this machine has no GPU, what
// --device cuda says about it (runs wherever the GPU tests skip, so CI checks the message).
TEST(CudaEngine, RefusalsSayWhatToDo) {
  testing_support::TempDir dir;
  const auto model = write_tiny(dir.path() / "m", Architecture::Qwen3, WeightType::F32);
  EngineOptions options;
  options.device = Device::Cpu;
  options.gpu_memory_utilization = 0;
  EXPECT_THROW(Engine::load(model, options), std::invalid_argument);
  if (!testing_support::no_gpu_reason().empty()) {
    options.device = Device::Cuda;
    options.gpu_memory_utilization = 0.9;
    try {
      Engine::load(model, options);
      FAIL() << "--device cuda loaded without a GPU";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("GPU 0 cannot be used"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaEngine, AutoPicksTheGpuAndTheCacheFollowsTheMemoryShare) {
  REQUIRE_GPU();
  testing_support::TempDir dir;
  const auto model = write_tiny(dir.path() / "m", Architecture::Qwen3, WeightType::BF16);
  EngineOptions options;
  options.max_model_len = 512;
  auto engine = Engine::load(model, options);
  EXPECT_TRUE(engine->device_name().starts_with("cuda")) << engine->device_name();

  options.device = Device::Cuda;
  options.gpu_memory_utilization = 0.001;  // less than the driver and reserve already take
  try {
    Engine::load(model, options);
    FAIL() << "a KV cache fit in 0.1% of the GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-memory-utilization"), std::string::npos) << e.what();
  }
}

}  // namespace
