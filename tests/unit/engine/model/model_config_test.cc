#include "engine/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/format/gguf_writer.h"

namespace engine::model {
namespace {

using ::testing::HasSubstr;

// Qwen3-0.6B's shape: head_dim 128 although hidden_size / heads is 64.
constexpr const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 1024,
  "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
  "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "rope_scaling": null, "tie_word_embeddings": true, "attention_bias": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "torch_dtype": "bfloat16"})";

std::string error_of(std::string_view json) {
  try {
    parse_hf_config(json, "config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ReadsQwen3) {
  const auto c = parse_hf_config(kQwen3, "config.json");
  EXPECT_EQ(c.architecture, Architecture::Qwen3);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.num_kv_heads, 8u);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{151645}));
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
}

TEST(ModelConfig, Qwen2HasBiasAndDefaults) {
  const auto c = parse_hf_config(R"({"architectures":["Qwen2ForCausalLM"],"vocab_size":100,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"eos_token_id":[1,2]})",
                                 "c");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_kv_heads, 4u);  // defaults to the head count
  EXPECT_EQ(c.head_dim, 16u);     // hidden_size / heads
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{1, 2}));
}

TEST(ModelConfig, Llama3RopeScaling) {
  const auto c = parse_hf_config(R"({"architectures":["LlamaForCausalLM"],"vocab_size":128256,"hidden_size":2048,
    "intermediate_size":8192,"num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,
    "rope_theta":500000.0,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
    "original_max_position_embeddings":8192,"rope_type":"llama3"}})",
                                 "c");
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192u);
  EXPECT_EQ(c.head_dim, 64u);
}

// transformers 5 saves RoPE settings as one rope_parameters object instead of rope_theta + rope_scaling.
TEST(ModelConfig, Transformers5RopeParameters) {
  const auto llama = parse_hf_config(R"({"architectures":["LlamaForCausalLM"],"vocab_size":128256,"hidden_size":2048,
    "intermediate_size":8192,"num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,
    "rope_parameters":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
    "original_max_position_embeddings":8192,"rope_theta":500000.0,"rope_type":"llama3"}})",
                                     "c");
  EXPECT_EQ(llama.rope_theta, 5e5);
  ASSERT_TRUE(llama.rope_scaling);
  EXPECT_EQ(llama.rope_scaling->factor, 32.0);
  EXPECT_EQ(llama.rope_scaling->original_max_position_embeddings, 8192u);

  const auto qwen = parse_hf_config(R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":64,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":1,"num_attention_heads":4,
    "rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}})",
                                    "c");
  EXPECT_EQ(qwen.rope_theta, 1e6);
  EXPECT_FALSE(qwen.rope_scaling);
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64,"intermediate_size":1,
    "num_hidden_layers":1,"num_attention_heads":4,"rope_parameters":{"rope_type":"yarn","rope_theta":1e4}})"),
              HasSubstr("rope_parameters of type 'yarn' has no 'factor'"));
}

TEST(ModelConfig, RefusesWhatTheEngineCannotRunByName) {
  const auto e = error_of(R"({"architectures":["PhiForCausalLM"],"vocab_size":1})");
  EXPECT_THAT(e, HasSubstr("the architecture PhiForCausalLM is not supported"));
  EXPECT_THAT(e, HasSubstr("Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM, "
                           "Gemma3ForCausalLM, Gemma3ForConditionalGeneration"));
  EXPECT_THAT(error_of(R"({"vocab_size":1})"), HasSubstr("'architectures' names no model class"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64})"),
              HasSubstr("'intermediate_size' is missing"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":"64"})"),
              HasSubstr("'hidden_size' must be a positive integer"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64,"intermediate_size":1,
    "num_hidden_layers":1,"num_attention_heads":6,"num_key_value_heads":4})"),
              HasSubstr("num_attention_heads (6) is not a multiple of num_key_value_heads (4)"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64,"intermediate_size":1,
    "num_hidden_layers":1,"num_attention_heads":4,"rope_scaling":{"rope_type":"ntk","factor":4}})"),
              HasSubstr("rope_scaling of type 'ntk' is not supported (supported: linear, dynamic, yarn, llama3, "
                        "longrope)"));
  EXPECT_THAT(error_of("{"), HasSubstr("not valid JSON"));
}

// A small Llama config.json with `extra` fields added.
std::string llama_with(std::string_view extra) {
  return R"({"architectures":["LlamaForCausalLM"],"vocab_size":64,"hidden_size":64,"intermediate_size":128,
    "num_hidden_layers":1,"num_attention_heads":4,"max_position_embeddings":2048,)" +
         std::string(extra) + "}";
}

TEST(ModelConfig, ReadsEveryRopeScalingType) {
  const auto linear = parse_hf_config(llama_with(R"("rope_scaling":{"type":"linear","factor":2.0})"), "c");
  ASSERT_TRUE(linear.rope_scaling);
  EXPECT_EQ(linear.rope_scaling->type, RopeType::Linear);
  EXPECT_EQ(linear.rope_scaling->factor, 2.0);
  EXPECT_EQ(derived_max_model_len(linear), 4096u);

  const auto dynamic = parse_hf_config(llama_with(R"("rope_scaling":{"rope_type":"dynamic","factor":3.0})"), "c");
  EXPECT_EQ(dynamic.rope_scaling->type, RopeType::Dynamic);
  EXPECT_EQ(derived_max_model_len(dynamic), 6144u);

  // Qwen2.5's long-context form: yarn over the 32k it was trained at.
  const auto yarn = parse_hf_config(
      llama_with(R"("rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32768})"), "c");
  EXPECT_EQ(yarn.rope_scaling->type, RopeType::Yarn);
  EXPECT_EQ(yarn.rope_scaling->original_max_position_embeddings, 32768u);
  EXPECT_EQ(yarn.rope_scaling->beta_fast, 32.0);
  EXPECT_EQ(yarn.rope_scaling->beta_slow, 1.0);
  EXPECT_FALSE(yarn.rope_scaling->attention_factor);
  EXPECT_EQ(derived_max_model_len(yarn), 131072u);

  const auto deepseek = parse_hf_config(llama_with(R"("rope_scaling":{"type":"yarn","factor":40,"beta_fast":32,
    "beta_slow":1,"mscale":1.0,"mscale_all_dim":1.0,"original_max_position_embeddings":4096,"attention_factor":0.5})"),
                                        "c");
  EXPECT_EQ(deepseek.rope_scaling->mscale_all_dim, 1.0);
  EXPECT_EQ(deepseek.rope_scaling->attention_factor, 0.5);

  const auto llama3 = parse_hf_config(llama_with(R"("rope_scaling":{"rope_type":"llama3","factor":8.0})"), "c");
  EXPECT_EQ(llama3.rope_scaling->type, RopeType::Llama3);
  EXPECT_EQ(derived_max_model_len(llama3), 2048u);  // Llama 3.1 states its full length itself
}

TEST(ModelConfig, RefusesRopeScalingFieldsItWouldIgnore) {
  EXPECT_THAT(error_of(llama_with(R"("rope_scaling":{"type":"linear","factor":2.0,"beta_fast":4})")),
              HasSubstr("rope_scaling of type 'linear' sets 'beta_fast', which the engine does not implement"));
  EXPECT_THAT(error_of(llama_with(R"("rope_scaling":{"type":"yarn","factor":2.0,"extrapolation_factor":0.5})")),
              HasSubstr("sets 'extrapolation_factor'"));
  EXPECT_THAT(error_of(llama_with(R"("rope_scaling":{"type":"linear","factor":0})")),
              HasSubstr("'factor' must be positive"));
}

// Fields that change the arithmetic are refused with their values, never ignored.
TEST(ModelConfig, RefusesFieldsThatChangeTheArithmeticByName) {
  EXPECT_THAT(error_of(llama_with(R"("hidden_act":"gelu")")),
              HasSubstr("'hidden_act' is 'gelu', which the engine does not compute (it computes silu, "
                        "gelu_pytorch_tanh)"));
  EXPECT_THAT(error_of(llama_with(R"("final_logit_softcapping":30.0)")),
              HasSubstr("'final_logit_softcapping' is 30.000000: LlamaForCausalLM does not soft-cap "
                        "(Gemma2ForCausalLM and Gemma3ForCausalLM do)"));
  EXPECT_THAT(error_of(llama_with(R"("attn_logit_softcapping":50.0)")), HasSubstr("'attn_logit_softcapping' is 50"));
  EXPECT_THAT(error_of(llama_with(R"("mlp_bias":true)")), HasSubstr("'mlp_bias' is true"));
  EXPECT_THAT(error_of(llama_with(R"("partial_rotary_factor":0.5)")),
              HasSubstr("'partial_rotary_factor' is 0.500000: LlamaForCausalLM rotates whole heads "
                        "(Phi3ForCausalLM rotates part of each)"));
  EXPECT_THAT(error_of(llama_with(R"("rope_parameters":{"rope_type":"default","partial_rotary_factor":0.75})")),
              HasSubstr("'partial_rotary_factor' is 0.750000"));
  for (const char* method : {"awq", "gptq", "bitsandbytes", "nvfp4"}) {
    const auto e = error_of(llama_with(R"("quantization_config":{"quant_method":")" + std::string(method) + R"("})"));
    EXPECT_THAT(e, HasSubstr("quantization_config with quant_method '" + std::string(method) + "' is not supported"));
    EXPECT_THAT(e, HasSubstr("FP8 safetensors (quant_method fp8, or compressed-tensors float-quantized)"));
    EXPECT_THAT(
        e,
        HasSubstr(
            "GGUF files (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, Q3_K, IQ4_NL, IQ4_XS, Q2_K, "
            "IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4, F8_E4M3)"));
  }
  EXPECT_NO_THROW(
      parse_hf_config(llama_with(R"("hidden_act":"silu","mlp_bias":false,"partial_rotary_factor":1.0)"), "c"));
}

// FP8 checkpoints: quant_method fp8 (blocks of weight_block_size, or per tensor without it) and compressed-tensors
// float-quantized (per tensor, channel or block), read into the scheme the checkpoint's scales follow.
TEST(ModelConfig, ReadsFp8QuantizationConfigs) {
  const auto block = parse_hf_config(llama_with(R"("quantization_config":{"quant_method":"fp8","fmt":"e4m3",
      "activation_scheme":"dynamic","weight_block_size":[128,128]})"),
                                     "c");
  ASSERT_TRUE(block.fp8.has_value());
  EXPECT_EQ(block.fp8->granularity, Fp8Scheme::Granularity::Block);
  EXPECT_EQ(block.fp8->scale_name, "weight_scale_inv");
  EXPECT_EQ(block.fp8->block_rows, 128u);
  EXPECT_EQ(block.fp8->block_cols, 128u);
  const auto tensor = parse_hf_config(
      llama_with(R"("quantization_config":{"quant_method":"fp8","activation_scheme":"static","ignored_layers":[]})"),
      "c");
  ASSERT_TRUE(tensor.fp8.has_value());
  EXPECT_EQ(tensor.fp8->granularity, Fp8Scheme::Granularity::Tensor);
  EXPECT_EQ(tensor.fp8->scale_name, "weight_scale");
  const auto ct = [](std::string_view weights) {
    return llama_with(R"("quantization_config":{"quant_method":"compressed-tensors","format":"float-quantized",
      "quantization_status":"compressed","ignore":["lm_head"],"kv_cache_scheme":null,"config_groups":{"group_0":{
      "targets":["Linear"],"weights":)" +
                      std::string(weights) + R"(,"input_activations":{"num_bits":8,"type":"float","strategy":"token",
      "dynamic":true,"symmetric":true},"output_activations":null}}})");
  };
  const auto channel = parse_hf_config(
      ct(R"({"num_bits":8,"type":"float","symmetric":true,"strategy":"channel","dynamic":false,"group_size":null})"),
      "c");
  ASSERT_TRUE(channel.fp8.has_value());
  EXPECT_EQ(channel.fp8->granularity, Fp8Scheme::Granularity::Channel);
  EXPECT_EQ(channel.fp8->scale_name, "weight_scale");
  const auto ct_block = parse_hf_config(
      ct(R"({"num_bits":8,"type":"float","symmetric":true,"strategy":"block","block_structure":[128,64]})"), "c");
  ASSERT_TRUE(ct_block.fp8.has_value());
  EXPECT_EQ(ct_block.fp8->granularity, Fp8Scheme::Granularity::Block);
  EXPECT_EQ(ct_block.fp8->block_cols, 64u);
  EXPECT_FALSE(parse_hf_config(llama_with(R"("hidden_act":"silu")"), "c").fp8.has_value());

  // What the engine would compute differently is refused by name.
  EXPECT_THAT(error_of(llama_with(R"("quantization_config":{"quant_method":"fp8","fmt":"e5m2"})")),
              HasSubstr("quantization_config has fmt 'e5m2'"));
  EXPECT_THAT(error_of(llama_with(R"("quantization_config":{"quant_method":"fp8","weight_block_size":[128]})")),
              HasSubstr("needs 'weight_block_size' as [rows, columns] of positive sizes"));
  EXPECT_THAT(error_of(llama_with(R"("quantization_config":{"quant_method":"fp8","kv_scales":true})")),
              HasSubstr("quantization_config sets 'kv_scales', which the engine does not implement"));
  EXPECT_THAT(error_of(ct(R"({"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":128})")),
              HasSubstr("quantizes weights to 4-bit ints; the engine computes with 8-bit float (FP8) weights"));
  EXPECT_THAT(error_of(ct(R"({"num_bits":8,"type":"float","symmetric":true,"strategy":"group","group_size":128})")),
              HasSubstr("has strategy 'group'"));
  EXPECT_THAT(error_of(ct(R"({"num_bits":8,"type":"float","symmetric":false,"strategy":"channel"})")),
              HasSubstr("is asymmetric"));
  EXPECT_THAT(error_of(llama_with(R"("quantization_config":{"quant_method":"compressed-tensors",
      "format":"pack-quantized","config_groups":{}})")),
              HasSubstr("has format 'pack-quantized'"));
  EXPECT_THAT(error_of(llama_with(R"("quantization_config":{"quant_method":"compressed-tensors",
      "format":"float-quantized","kv_cache_scheme":{"num_bits":8},"config_groups":{}})")),
              HasSubstr("sets 'kv_cache_scheme'"));
}

TEST(ModelConfig, MistralIsLlamasGraphWithItsSlidingWindow) {
  const auto mistral = parse_hf_config(R"({"architectures":["MistralForCausalLM"],"vocab_size":32000,
    "hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,
    "num_key_value_heads":8,"max_position_embeddings":32768,"rope_theta":10000.0,"sliding_window":4096,
    "hidden_act":"silu","tie_word_embeddings":false})",
                                       "c");
  EXPECT_EQ(mistral.architecture, Architecture::Mistral);
  EXPECT_EQ(architecture_name(mistral.architecture), "MistralForCausalLM");
  EXPECT_EQ(mistral.rope_pairing, RopePairing::HalfSplit);
  EXPECT_FALSE(mistral.qk_norm);
  EXPECT_FALSE(mistral.attention_bias);
  EXPECT_EQ(mistral.sliding_window, 4096u);
  // Mistral-Nemo: an explicit head_dim, no window.
  const auto nemo = parse_hf_config(R"({"architectures":["MistralForCausalLM"],"vocab_size":131072,
    "hidden_size":5120,"intermediate_size":14336,"num_hidden_layers":40,"num_attention_heads":32,
    "num_key_value_heads":8,"head_dim":128,"sliding_window":null})",
                                    "c");
  EXPECT_EQ(nemo.head_dim, 128u);
  EXPECT_FALSE(nemo.sliding_window);
  // Qwen2 and Qwen3 write a window they turn off.
  auto qwen = std::string(kQwen3);
  qwen.insert(qwen.size() - 1, R"(, "sliding_window": 32768, "use_sliding_window": false)");
  EXPECT_FALSE(parse_hf_config(qwen, "c").sliding_window);
}

// Gemma 3 1B's config.json as Google ships it (transformers 4.50): the window's layers by pattern.
constexpr const char* kGemma3_1b = R"({"architectures":["Gemma3ForCausalLM"],"attention_bias":false,
  "attn_logit_softcapping":null,"bos_token_id":2,"eos_token_id":[1,106],"final_logit_softcapping":null,
  "head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":1152,"intermediate_size":6912,
  "max_position_embeddings":32768,"model_type":"gemma3_text","num_attention_heads":4,"num_hidden_layers":26,
  "num_key_value_heads":1,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_local_base_freq":10000,
  "rope_scaling":null,"rope_theta":1000000,"sliding_window":512,"sliding_window_pattern":6,"vocab_size":262144})";

TEST(ModelConfig, ReadsGemma3WithItsSlidingWindowLayersAndLocalRope) {
  const auto c = parse_hf_config(kGemma3_1b, "c");
  EXPECT_EQ(c.architecture, Architecture::Gemma3);
  EXPECT_EQ(architecture_name(c.architecture), "Gemma3ForCausalLM");
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.norm_weight_plus_one);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma3TextConfig's default
  EXPECT_DOUBLE_EQ(*c.embedding_scale, std::sqrt(1152.0));
  EXPECT_DOUBLE_EQ(*c.query_pre_attn_scalar, 256.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(*c.sliding_rope_theta, 10000.0);
  EXPECT_EQ(c.sliding_window, 512u);
  ASSERT_EQ(c.sliding_layers.size(), 26u);
  for (std::size_t i = 0; i < 26; ++i) EXPECT_EQ(is_sliding_layer(c, i), i % 6 != 5) << "layer " << i;
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{1, 106}));
  EXPECT_FALSE(c.rope_scaling);
  // transformers 5's layer_types decides over the pattern.
  std::string listed(kGemma3_1b);
  std::string types = R"("layer_types":[)";
  for (int i = 0; i < 26; ++i)
    types += std::string(i ? "," : "") + (i == 0 ? "\"full_attention\"" : "\"sliding_attention\"");
  listed.insert(1, types + "],");
  const auto by_type = parse_hf_config(listed, "c");
  EXPECT_FALSE(is_sliding_layer(by_type, 0));
  EXPECT_TRUE(is_sliding_layer(by_type, 5));
}

// transformers multiplies Gemma's embedding by sqrt(hidden_size) in the weights' dtype.
TEST(ModelConfig, GemmasEmbeddingScaleIsRoundedToTheEmbeddingsDtype) {
  EXPECT_EQ(embedding_scale_in(quant::WeightType::BF16, 1152), 34.0);
  EXPECT_EQ(embedding_scale_in(quant::WeightType::F16, 1152), 33.9375);
  EXPECT_EQ(embedding_scale_in(quant::WeightType::F32, 1152), static_cast<double>(std::sqrt(1152.0f)));
  EXPECT_EQ(embedding_scale_in(quant::WeightType::BF16, 2560), 50.5);  // sqrt(2560) = 50.596
}

// Gemma3ForConditionalGeneration: the text model's config is text_config, which leaves most fields at
// Gemma3TextConfig's defaults (gemma-3-4b-it's); the RoPE scaling is the global layers'.
TEST(ModelConfig, ReadsTheTextConfigOfGemma3ForConditionalGeneration) {
  const auto c = parse_hf_config(R"({"architectures":["Gemma3ForConditionalGeneration"],"eos_token_id":[1,106],
    "text_config":{"hidden_size":2560,"intermediate_size":10240,"model_type":"gemma3_text","num_hidden_layers":34,
    "rope_scaling":{"factor":8.0,"rope_type":"linear"},"sliding_window":1024},
    "vision_config":{"hidden_size":1152,"model_type":"siglip_vision_model"}})",
                                 "c");
  EXPECT_EQ(c.architecture, Architecture::Gemma3);
  EXPECT_EQ(c.num_heads, 8u);
  EXPECT_EQ(c.num_kv_heads, 4u);
  EXPECT_EQ(c.head_dim, 256u);
  EXPECT_EQ(c.vocab_size, 262208u);
  EXPECT_EQ(c.max_position_embeddings, 131072u);
  EXPECT_EQ(c.sliding_window, 1024u);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->type, RopeType::Linear);
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_EQ(derived_max_model_len(c), 131072u);  // already the scaled length, as vLLM takes it
  EXPECT_FALSE(c.final_logit_softcapping);       // Gemma3TextConfig's default: none
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{1, 106}));
  EXPECT_THAT(error_of(R"({"architectures":["Gemma3ForConditionalGeneration"]})"),
              HasSubstr("config.json: 'text_config' must be the text model's configuration"));
}

// transformers 5 nests Gemma 3's RoPE per layer type.
TEST(ModelConfig, ReadsGemma3RopeParametersPerLayerType) {
  std::string config(kGemma3_1b);
  for (const char* key : {R"("rope_local_base_freq":10000,)", R"("rope_scaling":null,"rope_theta":1000000,)"}) {
    config.erase(config.find(key), std::string_view(key).size());
  }
  config.insert(1, R"("rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":500000},
    "sliding_attention":{"rope_type":"default","rope_theta":20000}},)");
  const auto c = parse_hf_config(config, "c");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(*c.sliding_rope_theta, 20000.0);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
  std::string scaled_local(kGemma3_1b);
  scaled_local.insert(1, R"("rope_parameters":{"full_attention":{"rope_type":"default"},
    "sliding_attention":{"rope_type":"linear","factor":2.0}},)");
  EXPECT_THAT(error_of(scaled_local), HasSubstr("rope_parameters.sliding_attention scales its RoPE"));
  std::string exact_gelu(kGemma3_1b);
  exact_gelu.replace(exact_gelu.find("gelu_pytorch_tanh"), 17, "gelu");
  EXPECT_THAT(error_of(exact_gelu), HasSubstr("'hidden_activation' is 'gelu', which the engine does not compute"));
}

// Gemma 2 2B's config.json: soft-capped scores and logits, every other layer local, one RoPE; Gemma2Config's
// caps where the file leaves them out, none where it writes null.
TEST(ModelConfig, ReadsGemma2WithItsSoftCapsAndAlternatingWindow) {
  constexpr const char* kGemma2_2b = R"({"architectures":["Gemma2ForCausalLM"],"attention_bias":false,
    "attn_logit_softcapping":50.0,"final_logit_softcapping":30.0,"head_dim":256,"hidden_act":"gelu_pytorch_tanh",
    "hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,"intermediate_size":9216,
    "max_position_embeddings":8192,"num_attention_heads":8,"num_hidden_layers":26,"num_key_value_heads":4,
    "query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_theta":10000.0,"sliding_window":4096,
    "vocab_size":256000})";
  const auto c = parse_hf_config(kGemma2_2b, "c");
  EXPECT_EQ(c.architecture, Architecture::Gemma2);
  // Gemma 3's defaults are not Gemma 2's: a file without num_key_value_heads has one per head.
  std::string no_kv_heads(kGemma2_2b);
  no_kv_heads.erase(no_kv_heads.find(R"("num_key_value_heads":4,)"), 24);
  EXPECT_EQ(parse_hf_config(no_kv_heads, "c").num_kv_heads, 8u);
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.norm_weight_plus_one);
  EXPECT_DOUBLE_EQ(*c.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(*c.final_logit_softcapping, 30.0);
  EXPECT_FALSE(c.sliding_rope_theta);
  EXPECT_TRUE(is_sliding_layer(c, 0));
  EXPECT_FALSE(is_sliding_layer(c, 1));
  EXPECT_TRUE(is_sliding_layer(c, 24));
  std::string uncapped(kGemma2_2b);
  uncapped.replace(uncapped.find("50.0"), 4, "null");
  uncapped.erase(uncapped.find(R"("final_logit_softcapping":30.0,)"), 31);
  const auto defaults = parse_hf_config(uncapped, "c");
  EXPECT_FALSE(defaults.attn_logit_softcapping);
  EXPECT_DOUBLE_EQ(*defaults.final_logit_softcapping, 30.0);  // Gemma2Config's default
}

format::GgufLayout gguf_of(const format::GgufWriter& w) {
  const auto bytes = w.serialize();
  return format::parse_gguf(bytes, "m.gguf");  // the layout copies what it keeps
}

// A GGUF's shape keys (64 wide, `layers` layers, 4 heads) for `arch`, the rest left to each test.
format::GgufWriter small_gguf(const std::string& arch = "llama", std::uint32_t layers = 2) {
  format::GgufWriter w;
  using format::GgufValue;
  w.add_metadata("general.architecture", GgufValue::string(arch));
  w.add_metadata(arch + ".embedding_length", GgufValue::scalar<std::uint32_t>(64));
  w.add_metadata(arch + ".feed_forward_length", GgufValue::scalar<std::uint32_t>(128));
  w.add_metadata(arch + ".block_count", GgufValue::scalar<std::uint32_t>(layers));
  w.add_metadata(arch + ".attention.head_count", GgufValue::scalar<std::uint32_t>(4));
  return w;
}

// SmolLM3: Llama's graph with no_rope_layers marking the layers that rotate (1) and those that do not (0);
// SmolLM3Config's every fourth layer without where the file leaves the list out.
TEST(ModelConfig, ReadsSmolLM3sLayersWithoutRope) {
  const std::string base = R"({"architectures":["SmolLM3ForCausalLM"],"vocab_size":128256,"hidden_size":2048,
    "intermediate_size":11008,"num_hidden_layers":4,"num_attention_heads":16,"num_key_value_heads":4,
    "rope_theta":5000000.0,"hidden_act":"silu","tie_word_embeddings":true)";
  const auto listed = parse_hf_config(base + R"(,"no_rope_layers":[0,1,1,0]})", "c");
  EXPECT_EQ(listed.architecture, Architecture::SmolLM3);
  EXPECT_EQ(listed.rope_layers, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(parse_hf_config(base + "}", "c").rope_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(parse_hf_config(base + R"(,"no_rope_layer_interval":2})", "c").rope_layers,
            (std::vector<bool>{true, false, true, false}));
  EXPECT_THAT(error_of(base + R"(,"no_rope_layers":[1,1]})"),
              HasSubstr("'no_rope_layers' must hold one 0 or 1 per layer (4)"));
  EXPECT_THAT(error_of(base + R"(,"no_rope_layers":[1,2,1,1]})"),
              HasSubstr("'no_rope_layers' holds something that is not 0 or 1"));
  // llama.cpp's smollm3 files: permuted as a Llama's, every fourth layer without RoPE (no key says so).
  format::GgufWriter w = small_gguf("smollm3", 8);
  w.add_metadata("smollm3.vocab_size", format::GgufValue::scalar<std::uint32_t>(10));
  const auto g = config_from_gguf(gguf_of(w), "m.gguf");
  EXPECT_EQ(g.rope_pairing, RopePairing::Interleaved);
  EXPECT_EQ(g.rope_layers, (std::vector<bool>{true, true, true, false, true, true, true, false}));
}

TEST(ModelConfig, ReadsGgufLlamaWithInterleavedRope) {
  format::GgufWriter w = small_gguf();
  using format::GgufValue;
  w.add_metadata("llama.attention.head_count_kv", GgufValue::scalar<std::uint32_t>(2));
  w.add_metadata("llama.rope.freq_base", GgufValue::scalar<float>(500000.0f));
  w.add_metadata("llama.attention.layer_norm_rms_epsilon", GgufValue::scalar<float>(1e-5f));
  w.add_metadata("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b", "c"}));
  w.add_metadata("tokenizer.ggml.eos_token_id", GgufValue::scalar<std::uint32_t>(2));
  const auto c = config_from_gguf(gguf_of(w), "m.gguf");
  EXPECT_EQ(c.architecture, Architecture::Llama);
  EXPECT_EQ(c.rope_pairing, RopePairing::Interleaved);
  EXPECT_EQ(c.vocab_size, 3u);
  EXPECT_EQ(c.num_kv_heads, 2u);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight tensor
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{2}));
  EXPECT_FLOAT_EQ(static_cast<float>(c.rope_theta), 500000.0f);
}

TEST(ModelConfig, GgufRefusals) {
  format::GgufWriter w;
  w.add_metadata("general.architecture", format::GgufValue::string("phi2"));
  try {
    config_from_gguf(gguf_of(w), "m.gguf");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("general.architecture 'phi2' is not supported; this engine runs qwen3, qwen2, "
                                    "llama, gemma3, gemma2, smollm3, phi3"));
  }
  format::GgufWriter q;
  q.add_metadata("general.architecture", format::GgufValue::string("qwen3"));
  EXPECT_THROW(config_from_gguf(gguf_of(q), "m.gguf"), ConfigError);  // qwen3.embedding_length is missing
}

// Linear and yarn come as llama.cpp's converter writes them; Llama 3's from rope_freqs.weight (Checkpoint); a
// type the engine does not implement ("longrope", or "llama3", which llama.cpp itself refuses) is refused by
// name, not ignored.
TEST(ModelConfig, GgufRopeScaling) {
  using format::GgufValue;
  const auto with = [](std::vector<std::pair<std::string, GgufValue>> keys) {
    format::GgufWriter w = small_gguf();
    w.add_metadata("llama.vocab_size", GgufValue::scalar<std::uint32_t>(3));
    for (auto& [key, value] : keys) w.add_metadata(key, std::move(value));
    return gguf_of(w);
  };
  EXPECT_FALSE(config_from_gguf(with({{"llama.rope.scaling.type", GgufValue::string("none")}}), "m.gguf").rope_scaling);
  const auto linear = config_from_gguf(with({{"llama.rope.scaling.type", GgufValue::string("linear")},
                                             {"llama.rope.scaling.factor", GgufValue::scalar<float>(2.0f)}}),
                                       "m.gguf");
  ASSERT_TRUE(linear.rope_scaling);
  EXPECT_EQ(linear.rope_scaling->type, RopeType::Linear);
  EXPECT_EQ(linear.rope_scaling->factor, 2.0);
  const auto old_linear =
      config_from_gguf(with({{"llama.rope.scale_linear", GgufValue::scalar<float>(4.0f)}}), "m.gguf");
  EXPECT_EQ(old_linear.rope_scaling->factor, 4.0);
  const auto yarn =
      config_from_gguf(with({{"llama.rope.scaling.type", GgufValue::string("yarn")},
                             {"llama.rope.scaling.factor", GgufValue::scalar<float>(4.0f)},
                             {"llama.rope.scaling.original_context_length", GgufValue::scalar<std::uint32_t>(32768)},
                             {"llama.rope.scaling.yarn_beta_fast", GgufValue::scalar<float>(16.0f)},
                             {"llama.rope.scaling.yarn_attn_factor", GgufValue::scalar<float>(1.0f)}}),
                       "m.gguf");
  EXPECT_EQ(yarn.rope_scaling->type, RopeType::Yarn);
  EXPECT_EQ(yarn.rope_scaling->original_max_position_embeddings, 32768u);
  EXPECT_EQ(yarn.rope_scaling->beta_fast, 16.0);
  EXPECT_EQ(yarn.rope_scaling->attention_factor, 1.0);

  const auto refusal = [&](std::vector<std::pair<std::string, GgufValue>> keys) {
    try {
      config_from_gguf(with(std::move(keys)), "m.gguf");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const char* type : {"su", "llama3"}) {
    EXPECT_THAT(refusal({{"llama.rope.scaling.type", GgufValue::string(type)}}),
                HasSubstr("llama.rope.scaling.type '" + std::string(type) + "' is not supported"));
  }
  EXPECT_THAT(refusal({{"llama.rope.scaling.type", GgufValue::string("linear")}}),
              HasSubstr("llama.rope.scaling.factor is missing"));
  EXPECT_THAT(refusal({{"llama.rope.scaling.type", GgufValue::string("yarn")},
                       {"llama.rope.scaling.factor", GgufValue::scalar<float>(4.0f)},
                       {"llama.rope.scaling.yarn_ext_factor", GgufValue::scalar<float>(0.5f)}}),
              HasSubstr("llama.rope.scaling.yarn_ext_factor is 0.500000"));
  EXPECT_THAT(refusal({{"llama.rope.dimension_count", GgufValue::scalar<std::uint32_t>(8)}}),
              HasSubstr("llama.rope.dimension_count is 8 of a head of 16: llama rotates whole heads"));
  const auto window =
      config_from_gguf(with({{"llama.attention.sliding_window", GgufValue::scalar<std::uint32_t>(4096)}}), "m.gguf");
  EXPECT_EQ(window.sliding_window, 4096u);
}

// llama.cpp's gemma3 files: the window from attention.sliding_window, every sixth layer global, the local
// RoPE base 10000, q scaled by head_dim^-0.5 (hidden / heads for the 62-layer 27B).
TEST(ModelConfig, ReadsGgufGemmaAsLlamaCppsLoadersDo) {
  using format::GgufValue;
  const auto gemma = [](const std::string& arch, std::uint32_t layers,
                        std::vector<std::pair<std::string, GgufValue>> extra) {
    format::GgufWriter w;
    w.add_metadata("general.architecture", GgufValue::string(arch));
    w.add_metadata(arch + ".embedding_length", GgufValue::scalar<std::uint32_t>(5376));
    w.add_metadata(arch + ".feed_forward_length", GgufValue::scalar<std::uint32_t>(21504));
    w.add_metadata(arch + ".block_count", GgufValue::scalar<std::uint32_t>(layers));
    w.add_metadata(arch + ".attention.head_count", GgufValue::scalar<std::uint32_t>(32));
    w.add_metadata(arch + ".attention.head_count_kv", GgufValue::scalar<std::uint32_t>(16));
    w.add_metadata(arch + ".attention.key_length", GgufValue::scalar<std::uint32_t>(128));
    w.add_metadata(arch + ".vocab_size", GgufValue::scalar<std::uint32_t>(262208));
    for (auto& [key, value] : extra) w.add_metadata(key, std::move(value));
    return config_from_gguf(gguf_of(w), "m.gguf");
  };
  const auto window = [](const std::string& arch) {
    return std::pair{arch + ".attention.sliding_window", GgufValue::scalar<std::uint32_t>(1024)};
  };
  const auto c = gemma("gemma3", 62, {window("gemma3")});
  EXPECT_EQ(c.architecture, Architecture::Gemma3);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.norm_weight_plus_one);  // stored as w + 1
  EXPECT_DOUBLE_EQ(*c.query_pre_attn_scalar, 168.0);
  EXPECT_DOUBLE_EQ(*c.embedding_scale, std::sqrt(5376.0));
  EXPECT_DOUBLE_EQ(*c.sliding_rope_theta, 10000.0);
  EXPECT_EQ(c.sliding_window, 1024u);
  EXPECT_TRUE(is_sliding_layer(c, 4));
  EXPECT_FALSE(is_sliding_layer(c, 5));
  EXPECT_DOUBLE_EQ(*gemma("gemma3", 48, {window("gemma3")}).query_pre_attn_scalar, 128.0);
  // Without a window llama.cpp runs Gemma 3 on global layers alone; Gemma 2's loader needs one.
  const auto global = gemma("gemma3", 48, {});
  EXPECT_FALSE(global.sliding_window);
  EXPECT_FALSE(global.sliding_rope_theta);
  EXPECT_FALSE(is_sliding_layer(global, 0));
  try {
    gemma("gemma2", 48, {});
    FAIL() << "read without a window";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gemma2.attention.sliding_window is missing"));
  }
  // Gemma 2: the caps as keys, every other layer local, one RoPE; its 27B (46 layers) scales by hidden / heads.
  const auto g2 = gemma("gemma2", 46,
                        {window("gemma2"),
                         {"gemma2.attn_logit_softcapping", GgufValue::scalar<float>(50.0f)},
                         {"gemma2.final_logit_softcapping", GgufValue::scalar<float>(30.0f)}});
  EXPECT_EQ(g2.architecture, Architecture::Gemma2);
  EXPECT_FALSE(g2.qk_norm);
  EXPECT_FALSE(g2.sliding_rope_theta);
  EXPECT_DOUBLE_EQ(*g2.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(*g2.final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(*g2.query_pre_attn_scalar, 168.0);
  EXPECT_TRUE(is_sliding_layer(g2, 0));
  EXPECT_FALSE(is_sliding_layer(g2, 1));
}

}  // namespace
// Phi-3 as its files write it: LongRoPE ("su" in the first ones) with its factors and the original context
// beside rope_scaling, whose ratio to max_position_embeddings sets the attention factor; Phi-4-mini's partial
// rotary factor of 0.75. Factor lists of the wrong length are refused with both numbers.
TEST(ModelConfig, ReadsPhi3sLongRopeAndPartialRotary) {
  const auto phi3 = [](std::string_view rope, std::string_view extra = "") {
    return R"({"architectures":["Phi3ForCausalLM"],"vocab_size":64,"hidden_size":256,"intermediate_size":512,
      "num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":131072,
      "original_max_position_embeddings":4096,)" +
           std::string(extra) + R"("rope_scaling":)" + std::string(rope) + "}";
  };
  const std::string factors24 = "[" + [] {
    std::string list;
    for (int i = 0; i < 24; ++i) list += (i ? "," : "") + std::to_string(1 + i);
    return list;
  }() + "]";
  const auto c =
      parse_hf_config(phi3(R"({"type":"longrope","short_factor":)" + factors24 + R"(,"long_factor":)" + factors24 + "}",
                           R"("partial_rotary_factor":0.75,)"),
                      "c");
  EXPECT_EQ(c.architecture, Architecture::Phi3);
  EXPECT_EQ(c.rotary_dim, 48u);
  EXPECT_EQ(rotary_dims(c), 48u);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->type, RopeType::LongRope);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096u);
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_NEAR(*c.rope_scaling->attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  EXPECT_EQ(c.rope_scaling->long_factor.at(23), 24.0);
  EXPECT_EQ(derived_max_model_len(c), 131072u);  // vLLM's: max_position_embeddings, not times the factor

  // The first Phi-3 files' "su", an explicit attention factor, the whole head.
  const std::string factors32 = factors24.substr(0, factors24.size() - 1) + ",25,26,27,28,29,30,31,32]";
  const auto su = parse_hf_config(phi3(R"({"type":"su","short_factor":)" + factors32 + R"(,"long_factor":)" +
                                       factors32 + R"(,"attention_factor":1.5})"),
                                  "c");
  EXPECT_EQ(su.rope_scaling->type, RopeType::LongRope);
  EXPECT_EQ(su.rope_scaling->attention_factor, 1.5);
  EXPECT_EQ(rotary_dims(su), 64u);

  EXPECT_THAT(
      error_of(phi3(R"({"type":"longrope","short_factor":)" + factors24 + R"(,"long_factor":)" + factors24 + "}")),
      HasSubstr("LongRoPE's short_factor holds 24 factors; RoPE over 64 dimensions needs 32"));
  EXPECT_THAT(error_of(phi3(R"({"type":"longrope","long_factor":[1]})")),
              HasSubstr("needs short_factor and long_factor"));
  EXPECT_THAT(error_of(phi3(R"({"type":"longrope","short_factor":)" + factors32 + R"(,"long_factor":)" + factors32 +
                            R"(,"short_mscale":1.1})")),
              HasSubstr("sets 'short_mscale', which the engine does not implement for that type"));
  EXPECT_THAT(error_of(phi3("null", R"("partial_rotary_factor":1.5,)")),
              HasSubstr("'partial_rotary_factor' is 1.500000; it must be in (0, 1]"));
}

// llama.cpp's phi3 files: RoPE over rope.dimension_count of each head, the LongRoPE factors as tensors with
// the original context and attention factor as keys (no type key), a window of 0 meaning none.
TEST(ModelConfig, ReadsPhi3GgufRope) {
  using format::GgufValue;
  format::GgufWriter w = small_gguf("phi3", 1);
  w.add_metadata("phi3.vocab_size", GgufValue::scalar<std::uint32_t>(10));
  w.add_metadata("phi3.context_length", GgufValue::scalar<std::uint32_t>(2048));
  w.add_metadata("phi3.rope.dimension_count", GgufValue::scalar<std::uint32_t>(12));
  w.add_metadata("phi3.attention.sliding_window", GgufValue::scalar<std::uint32_t>(0));
  w.add_metadata("phi3.rope.scaling.original_context_length", GgufValue::scalar<std::uint32_t>(128));
  w.add_metadata("phi3.rope.scaling.attn_factor", GgufValue::scalar<float>(1.25f));
  const auto layout = gguf_of(w);
  const std::vector<double> six = {1, 2, 3, 4, 5, 6};
  const auto c = config_from_gguf(layout, "m.gguf", {{}, six, six});
  EXPECT_EQ(c.architecture, Architecture::Phi3);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
  EXPECT_EQ(rotary_dims(c), 12u);
  EXPECT_FALSE(c.sliding_window);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->type, RopeType::LongRope);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 128u);
  EXPECT_EQ(c.rope_scaling->factor, 16.0);
  EXPECT_EQ(c.rope_scaling->attention_factor, 1.25);
  EXPECT_EQ(c.rope_scaling->long_factor, six);
  // Without the factor tensors the attention factor has nothing to belong to; one of the two alone, or too
  // few factors, is refused.
  EXPECT_THROW(config_from_gguf(layout, "m.gguf"), ConfigError);
  try {
    config_from_gguf(layout, "m.gguf", {{}, six, {}});
    ADD_FAILURE() << "one factor tensor accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rope_factors_short.weight is missing"));
  }
  EXPECT_THROW(config_from_gguf(layout, "m.gguf", {{}, {1, 2}, {1, 2}}), ConfigError);
}

}  // namespace engine::model

namespace engine::model {
namespace {

// Qwen3-30B-A3B's experts on a small shape: 128 experts of 768, 8 per token, renormalized.
constexpr const char* kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 1024,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
  "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "output_router_logits": false)";

// `json` with its first `from` replaced by `to`.
std::string replaced(std::string json, std::string_view from, std::string_view to) {
  json.replace(json.find(from), from.size(), to);
  return json;
}

TEST(ModelConfig, ReadsQwen3MoesExperts) {
  const auto c = parse_hf_config(std::string(kQwen3Moe) + "}", "config.json");
  EXPECT_EQ(c.architecture, Architecture::Qwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  ASSERT_TRUE(c.moe);
  EXPECT_EQ(c.moe->num_experts, 128u);
  EXPECT_EQ(c.moe->experts_per_token, 8u);
  EXPECT_EQ(c.moe->expert_intermediate_size, 768u);
  EXPECT_TRUE(c.moe->norm_topk_prob);
  EXPECT_EQ(c.moe->shared_expert_intermediate_size, 0u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(is_moe_layer(c, i));
  // Qwen3MoeConfig's default leaves the weights as the softmax gave them.
  const std::string unset = replaced(kQwen3Moe, R"("norm_topk_prob": true,)", "");
  EXPECT_FALSE(parse_hf_config(unset + "}", "c").moe->norm_topk_prob);
  EXPECT_FALSE(is_moe_layer(parse_hf_config(kQwen3, "c"), 0));
}

// transformers: layer i is sparse where mlp_only_layers leaves it out and (i + 1) % decoder_sparse_step == 0.
TEST(ModelConfig, ReadsWhichLayersAreSparse) {
  const auto c = parse_hf_config(replaced(kQwen3Moe, R"("decoder_sparse_step": 1, "mlp_only_layers": [])",
                                          R"("decoder_sparse_step": 2, "mlp_only_layers": [3])") +
                                     "}",
                                 "c");
  EXPECT_EQ(c.moe->layers, (std::vector<bool>{false, true, false, false}));
  EXPECT_FALSE(is_moe_layer(c, 0));
  EXPECT_TRUE(is_moe_layer(c, 1));
  EXPECT_THAT(error_of(replaced(kQwen3Moe, R"("mlp_only_layers": [])", R"("mlp_only_layers": [4])") + "}"),
              HasSubstr("'mlp_only_layers' holds something that is not a layer index below "
                        "num_hidden_layers (4)"));
}

TEST(ModelConfig, ReadsQwen2MoesSharedExpertAndMixtralsExperts) {
  const auto q = parse_hf_config(R"({"architectures":["Qwen2MoeForCausalLM"],"vocab_size":100,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_experts":60,"num_experts_per_tok":4,
    "moe_intermediate_size":32,"shared_expert_intermediate_size":256,"use_sliding_window":false,
    "sliding_window":4096})",
                                 "c");
  EXPECT_EQ(q.architecture, Architecture::Qwen2Moe);
  EXPECT_TRUE(q.attention_bias);
  EXPECT_FALSE(q.sliding_window);
  EXPECT_EQ(q.moe->shared_expert_intermediate_size, 256u);
  EXPECT_FALSE(q.moe->norm_topk_prob);
  EXPECT_THAT(error_of(R"({"architectures":["Qwen2MoeForCausalLM"],"vocab_size":100,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_experts":60,"num_experts_per_tok":4,
    "moe_intermediate_size":32})"),
              HasSubstr("'shared_expert_intermediate_size' is missing"));

  const auto m = parse_hf_config(R"({"architectures":["MixtralForCausalLM"],"vocab_size":32000,"hidden_size":4096,
    "intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,
    "num_local_experts":8,"num_experts_per_tok":2,"rope_theta":1e6,"sliding_window":null,"router_jitter_noise":0.0})",
                                 "c");
  EXPECT_EQ(m.architecture, Architecture::Mixtral);
  EXPECT_EQ(m.moe->num_experts, 8u);
  EXPECT_EQ(m.moe->experts_per_token, 2u);
  EXPECT_EQ(m.moe->expert_intermediate_size, 14336u);
  EXPECT_TRUE(m.moe->norm_topk_prob);  // Mixtral always renormalizes
  EXPECT_TRUE(m.moe->layers.empty());
  EXPECT_FALSE(m.sliding_window);
  EXPECT_THAT(error_of(R"({"architectures":["MixtralForCausalLM"],"vocab_size":32000,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_local_experts":2,
    "num_experts_per_tok":3})"),
              HasSubstr("'num_experts_per_tok' (3) is more than the 2 experts"));
}

// llama.cpp's files: qwen3moe and qwen2moe keys, Mixtral as a llama file with experts; qwen2moe's graph leaves
// the chosen weights unnormalized.
TEST(ModelConfig, ReadsGgufMixtures) {
  using format::GgufValue;
  format::GgufWriter q = small_gguf("qwen3moe");
  q.add_metadata("qwen3moe.vocab_size", GgufValue::scalar<std::uint32_t>(10));
  q.add_metadata("qwen3moe.expert_count", GgufValue::scalar<std::uint32_t>(128));
  q.add_metadata("qwen3moe.expert_used_count", GgufValue::scalar<std::uint32_t>(8));
  q.add_metadata("qwen3moe.expert_feed_forward_length", GgufValue::scalar<std::uint32_t>(768));
  const auto c = config_from_gguf(gguf_of(q), "m.gguf");
  EXPECT_EQ(c.architecture, Architecture::Qwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe->num_experts, 128u);
  EXPECT_EQ(c.moe->expert_intermediate_size, 768u);
  EXPECT_TRUE(c.moe->norm_topk_prob);
  q.add_metadata("qwen3moe.expert_weights_scale", GgufValue::scalar<float>(2.5f));
  EXPECT_THROW(
      {
        try {
          config_from_gguf(gguf_of(q), "m.gguf");
        } catch (const ConfigError& e) {
          EXPECT_THAT(e.what(), HasSubstr("qwen3moe.expert_weights_scale is 2.5"));
          throw;
        }
      },
      ConfigError);

  format::GgufWriter q2 = small_gguf("qwen2moe");
  q2.add_metadata("qwen2moe.vocab_size", GgufValue::scalar<std::uint32_t>(10));
  q2.add_metadata("qwen2moe.expert_count", GgufValue::scalar<std::uint32_t>(60));
  q2.add_metadata("qwen2moe.expert_used_count", GgufValue::scalar<std::uint32_t>(4));
  q2.add_metadata("qwen2moe.expert_feed_forward_length", GgufValue::scalar<std::uint32_t>(32));
  q2.add_metadata("qwen2moe.expert_shared_feed_forward_length", GgufValue::scalar<std::uint32_t>(256));
  const auto c2 = config_from_gguf(gguf_of(q2), "m.gguf");
  EXPECT_EQ(c2.architecture, Architecture::Qwen2Moe);
  EXPECT_TRUE(c2.attention_bias);
  EXPECT_FALSE(c2.moe->norm_topk_prob);
  EXPECT_EQ(c2.moe->shared_expert_intermediate_size, 256u);

  format::GgufWriter m = small_gguf("llama");
  m.add_metadata("llama.vocab_size", GgufValue::scalar<std::uint32_t>(10));
  m.add_metadata("llama.expert_count", GgufValue::scalar<std::uint32_t>(8));
  m.add_metadata("llama.expert_used_count", GgufValue::scalar<std::uint32_t>(9));
  EXPECT_THROW(config_from_gguf(gguf_of(m), "m.gguf"), ConfigError);  // more used than there are
  format::GgufWriter m2 = small_gguf("llama");
  m2.add_metadata("llama.vocab_size", GgufValue::scalar<std::uint32_t>(10));
  m2.add_metadata("llama.expert_count", GgufValue::scalar<std::uint32_t>(8));
  m2.add_metadata("llama.expert_used_count", GgufValue::scalar<std::uint32_t>(2));
  const auto mixtral = config_from_gguf(gguf_of(m2), "m.gguf");
  EXPECT_EQ(mixtral.architecture, Architecture::Mixtral);
  EXPECT_EQ(mixtral.rope_pairing, RopePairing::Interleaved);
  EXPECT_EQ(mixtral.moe->expert_intermediate_size, 128u);  // feed_forward_length
  EXPECT_TRUE(mixtral.moe->norm_topk_prob);
}

}  // namespace
}  // namespace engine::model
