#include "engine/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
              HasSubstr("rope_parameters of type 'yarn' is not supported"));
}

TEST(ModelConfig, RefusesWhatTheEngineCannotRunByName) {
  const auto e = error_of(R"({"architectures":["MistralForCausalLM"],"vocab_size":1})");
  EXPECT_THAT(e, HasSubstr("the architecture MistralForCausalLM is not supported"));
  EXPECT_THAT(e, HasSubstr("Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM"));
  EXPECT_THAT(error_of(R"({"vocab_size":1})"), HasSubstr("'architectures' names no model class"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64})"),
              HasSubstr("'intermediate_size' is missing"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":"64"})"),
              HasSubstr("'hidden_size' must be a positive integer"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64,"intermediate_size":1,
    "num_hidden_layers":1,"num_attention_heads":6,"num_key_value_heads":4})"),
              HasSubstr("num_attention_heads (6) is not a multiple of num_key_value_heads (4)"));
  EXPECT_THAT(error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":1,"hidden_size":64,"intermediate_size":1,
    "num_hidden_layers":1,"num_attention_heads":4,"rope_scaling":{"rope_type":"yarn","factor":4}})"),
              HasSubstr("rope_scaling of type 'yarn' is not supported"));
  EXPECT_THAT(error_of("{"), HasSubstr("not valid JSON"));
}

format::GgufLayout gguf_of(const format::GgufWriter& w) {
  const auto bytes = w.serialize();
  return format::parse_gguf(bytes, "m.gguf");  // the layout copies what it keeps
}

// A Llama GGUF's shape keys (64 wide, 2 layers, 4 heads), the rest left to each test.
format::GgufWriter small_llama_gguf() {
  format::GgufWriter w;
  using format::GgufValue;
  w.add_metadata("general.architecture", GgufValue::string("llama"));
  w.add_metadata("llama.embedding_length", GgufValue::scalar<std::uint32_t>(64));
  w.add_metadata("llama.feed_forward_length", GgufValue::scalar<std::uint32_t>(128));
  w.add_metadata("llama.block_count", GgufValue::scalar<std::uint32_t>(2));
  w.add_metadata("llama.attention.head_count", GgufValue::scalar<std::uint32_t>(4));
  return w;
}

TEST(ModelConfig, ReadsGgufLlamaWithInterleavedRope) {
  format::GgufWriter w = small_llama_gguf();
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
  w.add_metadata("general.architecture", format::GgufValue::string("gemma3"));
  try {
    config_from_gguf(gguf_of(w), "m.gguf");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("general.architecture 'gemma3' is not supported; this engine runs qwen3, qwen2, llama"));
  }
  format::GgufWriter q;
  q.add_metadata("general.architecture", format::GgufValue::string("qwen3"));
  EXPECT_THROW(config_from_gguf(gguf_of(q), "m.gguf"), ConfigError);  // qwen3.embedding_length is missing
}

// Llama 3's scaling is read from rope_freqs.weight (Checkpoint); a scaling type in the metadata (yarn,
// linear, or "llama3", which llama.cpp itself refuses) is not implemented and refused by name, not ignored.
TEST(ModelConfig, GgufRopeScalingTypeIsRefusedByName) {
  const auto with_scaling = [](std::string type) {
    format::GgufWriter w = small_llama_gguf();
    using format::GgufValue;
    w.add_metadata("llama.vocab_size", GgufValue::scalar<std::uint32_t>(3));
    w.add_metadata("llama.rope.scaling.type", GgufValue::string(std::move(type)));
    return gguf_of(w);
  };
  EXPECT_FALSE(config_from_gguf(with_scaling("none"), "m.gguf").rope_scaling.has_value());
  for (const char* type : {"yarn", "linear", "llama3"}) {
    try {
      config_from_gguf(with_scaling(type), "m.gguf");
      ADD_FAILURE() << type << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("llama.rope.scaling.type '" + std::string(type) + "' is not supported"));
    }
  }
}

}  // namespace
}  // namespace engine::model
