#include "serverd/loader/checkpoint_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/flags.h"

namespace serverd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const CheckpointFacts kBf16Safetensors{false, "bfloat16", 4096};
const CheckpointFacts kQuantizedGguf{true, "ggml-quantized (Q4_K)", 4096};
const CheckpointFacts kFp8Safetensors{false, "bfloat16", 4096, "fp8"};

std::string refusal(const ServerOptions& o, const CheckpointFacts& facts) {
  try {
    check_checkpoint_flags(o, facts);
  } catch (const base::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointFlags, DefaultsSayNothing) {
  EXPECT_THAT(check_checkpoint_flags(ServerOptions{}, kBf16Safetensors), IsEmpty());
  EXPECT_THAT(check_checkpoint_flags(ServerOptions{}, kQuantizedGguf), IsEmpty());
}

TEST(CheckpointFlags, DtypeMustNameTheCheckpointsPrecision) {
  ServerOptions o;
  o.dtype = "bfloat16";
  EXPECT_THAT(check_checkpoint_flags(o, kBf16Safetensors),
              ElementsAre("--dtype bfloat16: the checkpoint's weights are bfloat16; the engine uses them as stored, "
                          "accumulating in f32"));
  o.dtype = "half";
  EXPECT_EQ(refusal(o, kBf16Safetensors),
            "--dtype half: the checkpoint's weights are bfloat16 and the engine converts none; use --dtype auto");
  o.dtype = "float";
  EXPECT_THAT(check_checkpoint_flags(o, {false, "float32", 16}), ElementsAre(HasSubstr("--dtype float:")));
  o.dtype = "float16";
  EXPECT_THAT(refusal(o, kQuantizedGguf), HasSubstr("weights are ggml-quantized (Q4_K)"));
}

TEST(CheckpointFlags, LoadFormatAndQuantizationMustMatchTheFiles) {
  ServerOptions o;
  o.load_format = "gguf";
  EXPECT_THAT(check_checkpoint_flags(o, kQuantizedGguf), ElementsAre(HasSubstr("the model is a GGUF file")));
  EXPECT_THAT(refusal(o, kBf16Safetensors),
              HasSubstr("--load-format gguf: the model is a safetensors directory; use --load-format auto"));
  o.load_format = "safetensors";
  EXPECT_THAT(refusal(o, kQuantizedGguf), HasSubstr("the model is a GGUF file"));
  o.load_format = "auto";
  o.quantization = "gguf";
  EXPECT_THAT(check_checkpoint_flags(o, kQuantizedGguf), ElementsAre(HasSubstr("--quantization gguf:")));
  EXPECT_THAT(refusal(o, kBf16Safetensors), HasSubstr("serve a GGUF file (org/repo:Q4_K_M)"));
  EXPECT_THAT(refusal(o, kFp8Safetensors),
              HasSubstr("--quantization gguf: the model is an FP8 checkpoint (quantization_config's quant_method fp8); "
                        "leave --quantization out"));
  o.quantization = "fp8";
  EXPECT_THAT(check_checkpoint_flags(o, kFp8Safetensors),
              ElementsAre(HasSubstr("--quantization fp8: the model is an FP8 checkpoint")));
  EXPECT_THAT(refusal(o, kQuantizedGguf), HasSubstr("--quantization fp8: the model is a GGUF file"));
  o.quantization = "compressed-tensors";
  EXPECT_THAT(refusal(o, kFp8Safetensors), HasSubstr("the model is an FP8 checkpoint"));
  // gpt-oss as OpenAI publishes it.
  CheckpointFacts mxfp4 = kBf16Safetensors;
  mxfp4.quant_method = "mxfp4";
  o.quantization = "mxfp4";
  EXPECT_THAT(check_checkpoint_flags(o, mxfp4),
              ElementsAre(HasSubstr("--quantization mxfp4: the model is a checkpoint with MXFP4 experts")));
  EXPECT_THAT(refusal(o, kFp8Safetensors), HasSubstr("--quantization mxfp4: the model is an FP8 checkpoint"));
  o.quantization = "None";
  EXPECT_THAT(check_checkpoint_flags(o, kBf16Safetensors), IsEmpty());
}

TEST(CheckpointFlags, ContextPastTheTrainedLengthNeedsTheEnvironment) {
  ServerOptions o;
  o.max_model_len = 8192;
  EXPECT_EQ(refusal(o, kBf16Safetensors),
            "--max-model-len 8192 is longer than the model's trained length of 4096 positions; lower it, or set "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to serve positions the model never saw (its outputs past them may be "
            "garbage)");
  o.allow_long_max_model_len = true;
  EXPECT_THAT(check_checkpoint_flags(o, kBf16Safetensors),
              ElementsAre(HasSubstr("allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")));
  o.allow_long_max_model_len = false;
  o.max_model_len = 4096;  // the trained length itself is fine
  EXPECT_THAT(check_checkpoint_flags(o, kBf16Safetensors), IsEmpty());
}

using engine::model::PoolingConfig;
using engine::model::PoolingType;

struct Runner {
  std::optional<PoolingConfig> pooling;
  std::vector<std::string> notes;
  std::string refusal;
};

Runner runner(const std::string& runner_flag, const std::string& convert, std::optional<PoolingConfig> checkpoint) {
  ServerOptions o;
  o.runner = runner_flag;
  o.convert = convert;
  Runner r;
  try {
    r.pooling = resolve_runner(o, checkpoint, r.notes);
  } catch (const base::UsageError& e) {
    r.refusal = e.what();
  }
  return r;
}

TEST(ResolveRunner, AutoPoolsWhereTheCheckpointDescribesPoolingAsVllmDoes) {
  const PoolingConfig mean{PoolingType::Mean, false};
  EXPECT_FALSE(runner("auto", "auto", std::nullopt).pooling);
  const auto pooled = runner("auto", "auto", mean);
  ASSERT_TRUE(pooled.pooling);
  EXPECT_EQ(pooled.pooling->type, PoolingType::Mean);
  EXPECT_FALSE(pooled.pooling->normalize);
  EXPECT_THAT(pooled.notes, ElementsAre(HasSubstr("--runner auto resolved to --runner pooling")));
  // --runner generate keeps a sentence-transformers checkpoint generating.
  EXPECT_FALSE(runner("generate", "auto", mean).pooling);
  EXPECT_FALSE(runner("generate", "none", mean).pooling);
}

TEST(ResolveRunner, PoolingWithoutTheModelsOwnPoolingIsTheLastTokenNormalised) {
  for (const auto& [runner_flag, convert] : {std::pair{"pooling", "auto"}, {"pooling", "embed"}, {"auto", "embed"}}) {
    const auto r = runner(runner_flag, convert, std::nullopt);
    ASSERT_TRUE(r.pooling) << runner_flag << " " << convert;
    EXPECT_EQ(r.pooling->type, PoolingType::Last);
    EXPECT_TRUE(r.pooling->normalize);
    EXPECT_THAT(r.notes, ElementsAre(HasSubstr("LAST pooling, normalized (vLLM's default")));
  }
}

TEST(ResolveRunner, ContradictionsAreRefusedByName) {
  EXPECT_THAT(runner("generate", "embed", std::nullopt).refusal,
              HasSubstr("--convert embed makes an embedding model, which --runner generate does not serve"));
  EXPECT_THAT(runner("pooling", "none", std::nullopt).refusal, HasSubstr("--runner pooling --convert none"));
  EXPECT_THAT(
      runner("auto", "none", PoolingConfig{}).refusal,
      HasSubstr("--runner auto (pooling, for the model's sentence-transformers or GGUF pooling) --convert none"));
}

}  // namespace
}  // namespace serverd
