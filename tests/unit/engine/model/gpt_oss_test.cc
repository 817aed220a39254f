// gpt-oss: its config.json as OpenAI publishes it, and its Hugging Face expert tensors rebuilt as the engine's
// matrices (gpt_oss_experts.h) against a decoding of OpenAI's MXFP4 layout written here from the OCP spec.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/gpt_oss_experts.h"
#include "engine/model/model_config.h"
#include "engine/quant/quant.h"

namespace engine::model {
namespace {

using ::testing::HasSubstr;

// gpt-oss-20b's config.json fields (24 layers cut to 4), with the first configs' experts_per_token.
std::string gpt_oss_config(std::string_view extra = "") {
  return std::string(R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
    "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 4, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "experts_per_token": 4,
    "rms_norm_eps": 1e-05, "rope_theta": 150000, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0,
    "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
    "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
    "full_attention"], "attention_bias": true, "swiglu_limit": 7.0, "tie_word_embeddings": false,
    "max_position_embeddings": 131072, "hidden_act": "silu", "router_aux_loss_coef": 0.9,
    "output_router_logits": false, "initial_context_length": 4096, "eos_token_id": 200002,
    "pad_token_id": 199999)") +
         std::string(extra) + "}";
}

TEST(GptOssConfig, ReadsOpenAisConfig) {
  const auto c = parse_hf_config(gpt_oss_config(), "config.json");
  EXPECT_EQ(c.architecture, Architecture::GptOss);
  ASSERT_TRUE(c.moe.has_value());
  EXPECT_EQ(c.moe->num_experts, 32u);
  EXPECT_EQ(c.moe->experts_per_token, 4u);
  EXPECT_EQ(c.moe->expert_intermediate_size, 2880u);
  EXPECT_TRUE(c.moe->norm_topk_prob);  // its softmax over the chosen experts' scores
  EXPECT_TRUE(c.moe->biases);
  EXPECT_EQ(c.moe->swiglu_limit, 7.0);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.output_bias);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_EQ(c.sliding_window, 128u);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, false, true, false}));
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, RopeType::Yarn);
  EXPECT_FALSE(c.rope_scaling->truncate);
  EXPECT_EQ(derived_max_model_len(c), 131072u);
  EXPECT_FALSE(c.mxfp4_experts);
  const auto mxfp4 =
      parse_hf_config(gpt_oss_config(R"(, "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
        "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"})"),
                      "config.json");
  EXPECT_TRUE(mxfp4.mxfp4_experts);
  EXPECT_FALSE(mxfp4.fp8.has_value());
}

TEST(GptOssConfig, RefusesMxfp4ElsewhereAndUnknownMxfp4Settings) {
  const std::string llama = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
    "quantization_config": {"quant_method": "mxfp4"}})";
  EXPECT_THROW(
      {
        try {
          parse_hf_config(llama, "config.json");
        } catch (const ConfigError& e) {
          EXPECT_THAT(e.what(), HasSubstr("only GptOssForCausalLM's experts use"));
          throw;
        }
      },
      ConfigError);
  EXPECT_THROW(parse_hf_config(gpt_oss_config(R"(, "quantization_config": {"quant_method": "mxfp4",
      "group_size": 64})"),
                               "config.json"),
               ConfigError);
  EXPECT_THROW(parse_hf_config(gpt_oss_config(R"(, "swiglu_limit": -1)"), "config.json"), ConfigError);
}

// o_proj's bias follows attention_bias where the class has one (Llama), never in Qwen2 (q, k and v only).
TEST(GptOssConfig, OutputBiasWhereTheClassHasOne) {
  const auto with = [](std::string_view arch) {
    return parse_hf_config(std::string(R"({"architectures": [")") + std::string(arch) +
                               R"("], "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 1, "num_attention_heads": 2, "attention_bias": true})",
                           "config.json");
  };
  EXPECT_TRUE(with("LlamaForCausalLM").output_bias);
  EXPECT_FALSE(with("Qwen2ForCausalLM").output_bias);
  EXPECT_FALSE(with("MistralForCausalLM").output_bias);
}

// E2M1 (OCP microscaling spec): sign, 2 exponent bits, 1 mantissa bit.
constexpr float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

TEST(GptOssExperts, Mxfp4RowsDecodeAsOpenAisLayoutSays) {
  constexpr std::size_t kRows = 6, kCols = 64, kPerRow = kCols / 32;
  std::mt19937 rng(7);
  std::vector<std::byte> blocks(kRows * kPerRow * 16), scales(kRows * kPerRow);
  for (auto& b : blocks) b = static_cast<std::byte>(rng() & 0xFF);
  for (auto& s : scales) s = static_cast<std::byte>(118 + rng() % 16);  // 2^-9 .. 2^6
  // OpenAI's layout: value i of a row is byte i / 2's low nibble for even i, high for odd, times 2^(scale - 127).
  const auto hf_value = [&](std::size_t row, std::size_t i) {
    const auto byte = std::to_integer<unsigned>(blocks[(row * kPerRow + i / 32) * 16 + (i % 32) / 2]);
    const unsigned code = i % 2 == 0 ? byte & 15u : byte >> 4;
    return kE2m1[code] * std::ldexp(1.0f, std::to_integer<int>(scales[row * kPerRow + i / 32]) - 127);
  };
  for (const std::size_t first : {0u, 1u}) {  // gate's rows (even) and up's (odd) of a fused gate_up
    const auto rows = mxfp4_rows_as_ggml(blocks, scales, kCols, first, 2, kRows / 2);
    ASSERT_EQ(rows.size(), kRows / 2 * *quant::row_bytes(quant::WeightType::MXFP4, kCols));
    std::vector<float> decoded(kRows / 2 * kCols);
    quant::dequantize_row(quant::WeightType::MXFP4, rows, decoded);
    for (std::size_t r = 0; r < kRows / 2; ++r) {
      for (std::size_t i = 0; i < kCols; ++i)
        ASSERT_EQ(decoded[r * kCols + i], hf_value(first + 2 * r, i)) << "row " << first + 2 * r << " value " << i;
    }
  }
  EXPECT_THROW(mxfp4_rows_as_ggml(blocks, scales, kCols, 1, 2, kRows), std::invalid_argument);
}

TEST(GptOssExperts, ColumnsBecomeRows) {
  // A 3 x 4 matrix of 2-byte elements in x · W orientation: element (i, o) holds 10 i + o.
  std::vector<std::uint16_t> matrix;
  for (std::uint16_t i = 0; i < 3; ++i) {
    for (std::uint16_t o = 0; o < 4; ++o) matrix.push_back(static_cast<std::uint16_t>(10 * i + o));
  }
  const auto odd = columns_as_rows(std::as_bytes(std::span(matrix)), 2, 3, 4, 1, 2, 2);
  std::vector<std::uint16_t> got(odd.size() / 2);
  std::memcpy(got.data(), odd.data(), odd.size());
  EXPECT_EQ(got, (std::vector<std::uint16_t>{1, 11, 21, 3, 13, 23}));
  EXPECT_THROW(columns_as_rows(std::as_bytes(std::span(matrix)), 2, 3, 4, 1, 2, 3), std::invalid_argument);
}

}  // namespace
}  // namespace engine::model
