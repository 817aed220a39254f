// The numpy reference model on model-writer's models, and the engine's dequantization against the
// reference's: GGUF files give the safetensors logits (llama's Q/K permutation undone), quantized files stay
// close, the reference is causal and batch-independent, and every quantized type dequantizes alike.
#include "tests/support/reference_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/model_writer/model_writer.h"
#include "engine/quant/quant.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using engine::model::Architecture;
using engine::quant::WeightType;
using testing_support::ReferenceLogits;
using testing_support::TempDir;

// Token ids below every generated tokenizer's size (559 for Qwen, 561 for Llama).
const std::vector<std::int32_t> kSequence = {3, 300, 41, 512, 7, 99, 256, 180, 33, 420, 64, 1};
const std::vector<std::int32_t> kOther = {500, 2, 77};

engine::tools::WrittenModel write_tiny(Architecture arch, const fs::path& dir, std::vector<WeightType> gguf = {},
                                       WeightType dtype = WeightType::F32, std::uint32_t shards = 1) {
  engine::tools::ModelWriterOptions options;
  options.arch = arch;
  options.out_dir = dir;
  options.seed = 11;
  options.gguf_types.assign(gguf.begin(), gguf.end());
  options.dtype = dtype;
  options.shards = shards;
  return engine::tools::write_model(options);
}

double max_abs_difference(const ReferenceLogits& a, const ReferenceLogits& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.sequences.size(), b.sequences.size());
  double worst = 0;
  for (std::size_t s = 0; s < a.sequences.size(); ++s) {
    EXPECT_EQ(a.sequences[s].size(), b.sequences[s].size());
    for (std::size_t i = 0; i < std::min(a.sequences[s].size(), b.sequences[s].size()); ++i) {
      worst = std::max(worst, std::abs(a.sequences[s][i] - b.sequences[s][i]));
    }
  }
  return worst;
}

// RMS of the difference over RMS of `a`: how far a quantized model's logits are from the float ones.
double relative_rms_error(const ReferenceLogits& a, const ReferenceLogits& b) {
  double diff = 0, norm = 0;
  for (std::size_t s = 0; s < a.sequences.size(); ++s) {
    for (std::size_t i = 0; i < a.sequences[s].size(); ++i) {
      diff += (a.sequences[s][i] - b.sequences[s][i]) * (a.sequences[s][i] - b.sequences[s][i]);
      norm += a.sequences[s][i] * a.sequences[s][i];
    }
  }
  return std::sqrt(diff / norm);
}

std::string name_of(Architecture arch) {
  return std::string(engine::model::architecture_name(arch));
}

// How far the GGUF F32 file's float64 logits may be from the safetensors model's. Llama 3's scaling reaches
// the GGUF side only as rope_freqs.weight, f32 divisors (what llama.cpp reads), where config.json's
// parameters give float64 frequencies: 2^-24 apart at most, which moves these logits by about 1e-9 (measured
// 9e-10 here, 1.8e-9 over 20 positions). Gemma's norms are w + 1 rounded to f32 in GGUF, 1 + w in float64
// from safetensors: 2^-24 relative apart, about 1e-6 on logits of tens.
double f32_gguf_bound(Architecture arch) {
  if (engine::model::is_gemma(arch)) return 1e-5;  // measured 1.1e-6
  return arch == Architecture::Llama ? 1e-8 : 1e-9;
}

class ReferenceModel : public ::testing::TestWithParam<Architecture> {};

INSTANTIATE_TEST_SUITE_P(Archs, ReferenceModel,
                         ::testing::Values(Architecture::Qwen3, Architecture::Qwen2, Architecture::Llama,
                                           Architecture::Gemma3, Architecture::Gemma2, Architecture::SmolLM3,
                                           Architecture::Qwen3Moe, Architecture::Qwen2Moe, Architecture::Mixtral),
                         [](const auto& param_info) { return name_of(param_info.param); });

// The GGUF F32 file is the safetensors model in llama.cpp's layout: the reference reads both to the same
// logits, which also shows that llama's Q/K permutation is the one the reference undoes. Quantized files
// stay close; the bounds are loose because random weights spread quantization error evenly.
TEST_P(ReferenceModel, GgufGivesTheSafetensorsLogits) {
  const TempDir dir;
  write_tiny(GetParam(), dir.path(), {WeightType::F32, WeightType::Q8_0, WeightType::Q4_K});
  const std::vector<std::vector<std::int32_t>> sequences = {kSequence, kOther};
  const auto hf = testing_support::reference_logits(dir.path(), sequences);
  const auto f32 = testing_support::reference_logits(dir / "model-F32.gguf", sequences);
  const auto q8 = testing_support::reference_logits(dir / "model-Q8_0.gguf", sequences);
  const auto q4k = testing_support::reference_logits(dir / "model-Q4_K.gguf", sequences);
  ASSERT_EQ(hf.sequences.size(), 2u);
  EXPECT_EQ(hf.sequences[0].size(), kSequence.size() * hf.vocab_size);
  EXPECT_EQ(hf.vocab_size % 64, 0u);
  EXPECT_LT(max_abs_difference(hf, f32), f32_gguf_bound(GetParam()));
  EXPECT_LT(relative_rms_error(hf, q8), 0.05);
  EXPECT_LT(relative_rms_error(hf, q4k), 0.4);
  EXPECT_GT(relative_rms_error(hf, q8), 0.0);  // the quantized file is really quantized
}

// Random weights still give logits that spread over several units, so argmax and sampling tests mean
// something.
TEST_P(ReferenceModel, LogitsSpreadOverSeveralUnits) {
  const TempDir dir;
  write_tiny(GetParam(), dir.path());
  const auto logits = testing_support::reference_logits(dir.path(), {kSequence});
  for (std::size_t p = 0; p < kSequence.size(); ++p) {
    const auto row = logits.row(0, p);
    double mean = 0, squares = 0;
    for (const double v : row) mean += v;
    mean /= static_cast<double>(row.size());
    for (const double v : row) squares += (v - mean) * (v - mean);
    EXPECT_GT(std::sqrt(squares / static_cast<double>(row.size())), 2.0) << "position " << p;
    EXPECT_LT(std::sqrt(squares / static_cast<double>(row.size())), 20.0) << "position " << p;
  }
}

// A prefix's logits are the first rows of the longer sequence's, and a sequence's logits do not depend on
// the other sequences of the batch.
TEST_P(ReferenceModel, IsCausalAndBatchIndependent) {
  const TempDir dir;
  write_tiny(GetParam(), dir.path());
  const std::vector<std::int32_t> prefix(kSequence.begin(), kSequence.begin() + 5);
  auto variant = kSequence;
  variant[0] = 4;
  const auto batch = testing_support::reference_logits(dir.path(), {prefix, kSequence, variant});
  const auto alone = testing_support::reference_logits(dir.path(), {kSequence});
  for (std::size_t p = 0; p < prefix.size(); ++p) {
    const auto short_row = batch.row(0, p);
    const auto long_row = batch.row(1, p);
    for (std::size_t v = 0; v < short_row.size(); ++v) ASSERT_NEAR(short_row[v], long_row[v], 1e-10) << p;
  }
  EXPECT_EQ(batch.sequences[1], alone.sequences[0]);
  // An earlier token changes every later position (the model attends to its context).
  for (std::size_t p = 1; p < kSequence.size(); ++p) {
    double difference = 0;
    for (std::size_t v = 0; v < batch.vocab_size; ++v) {
      difference = std::max(difference, std::abs(batch.row(1, p)[v] - batch.row(2, p)[v]));
    }
    EXPECT_GT(difference, 1e-3) << "position " << p;
  }
}

// bf16 shards give the single file's logits exactly, and a GGUF BF16 file holds the same values.
TEST_P(ReferenceModel, ShardedBf16EqualsSingleFile) {
  const TempDir dir;
  write_tiny(GetParam(), dir / "single", {WeightType::BF16}, WeightType::BF16, 1);
  write_tiny(GetParam(), dir / "sharded", {}, WeightType::BF16, 3);
  ASSERT_TRUE(fs::exists(dir / "sharded" / "model.safetensors.index.json"));
  const auto single = testing_support::reference_logits(dir / "single", {kSequence});
  const auto sharded = testing_support::reference_logits(dir / "sharded", {kSequence});
  const auto gguf = testing_support::reference_logits(dir / "single" / "model-BF16.gguf", {kSequence});
  EXPECT_EQ(single.sequences, sharded.sequences);
  // Llama: rope_freqs.weight's f32 divisors against config.json's float64 frequencies, as above.
  EXPECT_LT(max_abs_difference(single, gguf), f32_gguf_bound(GetParam()));
}

// Each greedy token is the argmax of the logits at the position before it.
TEST_P(ReferenceModel, GreedyFollowsTheArgmax) {
  const TempDir dir;
  write_tiny(GetParam(), dir.path());
  const std::vector<std::int32_t> prompt(kSequence.begin(), kSequence.begin() + 4);
  const auto generated = testing_support::reference_greedy(dir.path(), prompt, 6);
  ASSERT_EQ(generated.size(), 6u);
  auto full = prompt;
  full.insert(full.end(), generated.begin(), generated.end());
  const auto logits = testing_support::reference_logits(dir.path(), {full});
  for (std::size_t k = 0; k < generated.size(); ++k) {
    const auto row = logits.row(0, prompt.size() - 1 + k);
    const auto argmax = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(argmax, generated[k]) << "step " << k;
  }
}

// ---- dequantization -----------------------------------------------------------------------------------

// Rows that exercise the block formats: normal and uniform values, tiny and huge scales, one outlier per
// block, all-positive blocks (the K-quants' mins), constant and zero blocks.
std::vector<float> test_values(std::size_t block, std::size_t blocks_per_case) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> out;
  const std::size_t n = block * blocks_per_case;
  const auto add = [&](auto make) {
    for (std::size_t i = 0; i < n; ++i) out.push_back(make(i));
  };
  add([&](std::size_t) { return normal(rng); });
  add([&](std::size_t) { return uniform(rng); });
  add([&](std::size_t) { return 1e-3f * normal(rng); });
  add([&](std::size_t) { return 3e3f * normal(rng); });
  add([&](std::size_t i) { return i % block == 5 ? 40.0f : normal(rng); });
  add([&](std::size_t) { return 5.0f + std::abs(normal(rng)); });
  add([&](std::size_t) { return -2.0f - std::abs(uniform(rng)); });
  add([&](std::size_t) { return 0.75f; });
  add([&](std::size_t) { return 0.0f; });
  return out;
}

class Dequantization : public ::testing::TestWithParam<WeightType> {};

INSTANTIATE_TEST_SUITE_P(Types, Dequantization,
                         ::testing::Values(WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                                           WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                           WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_NL, WeightType::IQ4_XS,
                                           WeightType::F16, WeightType::BF16, WeightType::IQ2_XXS, WeightType::IQ2_XS,
                                           WeightType::IQ2_S, WeightType::IQ3_XXS, WeightType::IQ3_S, WeightType::IQ1_S,
                                           WeightType::IQ1_M, WeightType::MXFP4),
                         [](const auto& param_info) {
                           return std::string(engine::quant::weight_type_name(param_info.param));
                         });

// The engine's dequantize_row and the reference's numpy decoding of the same blocks (made by the engine's
// quantize_row from random rows) agree to float32 rounding: each value within a few ulps of its block's
// largest magnitude (ggml computes d * scale * q - min in float32, the reference in float64).
TEST_P(Dequantization, EngineAgreesWithTheReference) {
  const WeightType type = GetParam();
  const std::size_t block = std::max<std::size_t>(engine::quant::block_elements(type), 32);
  const auto values = test_values(block, 4);
  std::vector<std::byte> blocks(*engine::quant::row_bytes(type, values.size()));
  engine::quant::quantize_row(type, values, blocks);
  std::vector<float> engine_values(values.size());
  engine::quant::dequantize_row(type, blocks, engine_values);
  const auto reference = testing_support::reference_dequant(engine::quant::weight_type_name(type), blocks);
  ASSERT_EQ(reference.size(), values.size());
  double worst = 0;
  for (std::size_t start = 0; start < values.size(); start += block) {
    double scale = 0;
    for (std::size_t i = start; i < start + block; ++i) scale = std::max(scale, std::abs(reference[i]));
    for (std::size_t i = start; i < start + block; ++i) {
      const double error = std::abs(static_cast<double>(engine_values[i]) - reference[i]);
      if (scale == 0) {
        ASSERT_EQ(error, 0.0) << "value " << i;
      } else {
        worst = std::max(worst, error / scale);
      }
    }
  }
  EXPECT_LT(worst, 3e-7) << engine::quant::weight_type_name(type);
  // And the values are a quantization of the input, not garbage that both sides decode alike.
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < block * 4; ++i) {
    err += (reference[i] - values[i]) * (reference[i] - values[i]);
    norm += static_cast<double>(values[i]) * values[i];
  }
  // (Q2_K's four levels per weight leave about 0.3 of a normal row's magnitude, IQ3_XXS's 256 points per 4
  // weights about 0.21, IQ2_XXS's 256 points per 8 about 0.35, IQ1_S's three values per weight about 0.49, IQ1_M's
  // without importance weights about 0.59.)
  const double bound = type == WeightType::IQ1_M                                                             ? 0.65
                       : type == WeightType::IQ1_S                                                           ? 0.55
                       : type == WeightType::Q2_K || type == WeightType::IQ2_XS || type == WeightType::IQ2_S ? 0.35
                       : type == WeightType::IQ2_XXS                                                         ? 0.4
                       : type == WeightType::IQ3_XXS || type == WeightType::IQ3_S                            ? 0.25
                                                                                                             : 0.2;
  EXPECT_LT(std::sqrt(err / norm), bound);
}

// The engine's quantize_row and the script's rendering of ggml's reference quantizers give the same bytes:
// files the engine writes read back as llama.cpp's quantizer would have written them.
class Quantization : public ::testing::TestWithParam<WeightType> {};

INSTANTIATE_TEST_SUITE_P(Types, Quantization,
                         ::testing::Values(WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                                           WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K, WeightType::IQ4_NL,
                                           WeightType::IQ4_XS, WeightType::IQ3_XXS, WeightType::IQ3_S,
                                           WeightType::IQ2_XXS, WeightType::IQ2_XS, WeightType::IQ2_S,
                                           WeightType::IQ1_S, WeightType::IQ1_M, WeightType::MXFP4),
                         [](const auto& param_info) {
                           return std::string(engine::quant::weight_type_name(param_info.param));
                         });

TEST_P(Quantization, EngineMatchesGgmlsReferenceQuantizerByteForByte) {
  const WeightType type = GetParam();
  auto values = test_values(32, 16);  // 16 blocks of 32 per case: 2 super-blocks of 256
  // Exact halves of a step, where the rounding rule decides: blocks whose values sit on k / 2 steps.
  for (std::size_t i = 0; i < 256; ++i) values.push_back(static_cast<float>(i % 32) * 0.5f - 8.0f);
  // A super-block with one block of 32 zeros among normal ones (IQ3_S's quantizer skips such a block).
  for (std::size_t i = 0; i < 256; ++i) values.push_back(i / 32 == 2 ? 0.0f : values[i]);
  std::vector<std::byte> blocks(*engine::quant::row_bytes(type, values.size()));
  engine::quant::quantize_row(type, values, blocks);
  const auto reference = testing_support::reference_quantize(engine::quant::weight_type_name(type), values);
  ASSERT_EQ(reference.size(), blocks.size());
  const std::size_t block_bytes = engine::quant::block_bytes(type);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] != reference[i] && differing++ < 5) {
      ADD_FAILURE() << engine::quant::weight_type_name(type) << " block " << i / block_bytes << " byte "
                    << i % block_bytes << ": engine " << std::to_integer<int>(blocks[i]) << ", reference "
                    << std::to_integer<int>(reference[i]);
    }
  }
  EXPECT_EQ(differing, 0u) << "of " << blocks.size() << " bytes";
}

TEST(ReferenceModelScript, ReportsBadInput) {
  const std::vector<std::byte> odd(33);
  EXPECT_THAT([&] { testing_support::reference_dequant("Q8_0", odd); },
              ::testing::ThrowsMessage<std::runtime_error>(::testing::HasSubstr("not whole Q8_0 blocks")));
  const TempDir dir;
  EXPECT_THAT(
      [&] {
        testing_support::reference_logits(dir / "missing", {{1, 2}});
      },
      ::testing::Throws<std::runtime_error>());
}

}  // namespace
