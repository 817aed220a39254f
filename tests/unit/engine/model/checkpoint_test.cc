// Checkpoint loading: tensors found by the architecture's names, shapes checked against config.json,
// tied and untied output matrices, half-precision vectors widened, and clear refusals.
#include "engine/model/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>

#include "engine/format/gguf_writer.h"
#include "engine/format/safetensors_writer.h"
#include "engine/model_writer/model_writer.h"
#include "engine/quant/quant.h"
#include "tests/support/gguf_rewrite.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_tokenizer.h"

namespace {

using engine::format::SafetensorsDType;
using engine::model::Checkpoint;
using engine::model::ConfigError;
using testing::HasSubstr;
using testing_support::TempDir;
using testing_support::write_file;

constexpr std::uint64_t kVocab = 256, kHidden = 32, kInter = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 8;

struct TensorSpec {
  SafetensorsDType dtype = SafetensorsDType::F32;
  std::vector<std::uint64_t> shape;
  float fill = 0.0f;
};

// The tensors of a one-layer Llama checkpoint; tests edit the map before writing it.
std::map<std::string, TensorSpec> llama_tensors() {
  std::map<std::string, TensorSpec> t;
  const std::string p = "model.layers.0.";
  t["model.embed_tokens.weight"] = {SafetensorsDType::F32, {kVocab, kHidden}, 0.5f};
  t["model.norm.weight"] = {SafetensorsDType::F32, {kHidden}, 1.0f};
  t[p + "input_layernorm.weight"] = {SafetensorsDType::F32, {kHidden}, 1.0f};
  t[p + "post_attention_layernorm.weight"] = {SafetensorsDType::F32, {kHidden}, 1.0f};
  t[p + "self_attn.q_proj.weight"] = {SafetensorsDType::F32, {kHeads * kHeadDim, kHidden}, 0.1f};
  t[p + "self_attn.k_proj.weight"] = {SafetensorsDType::F32, {kKvHeads * kHeadDim, kHidden}, 0.1f};
  t[p + "self_attn.v_proj.weight"] = {SafetensorsDType::F32, {kKvHeads * kHeadDim, kHidden}, 0.1f};
  t[p + "self_attn.o_proj.weight"] = {SafetensorsDType::F32, {kHidden, kHeads * kHeadDim}, 0.1f};
  t[p + "mlp.gate_proj.weight"] = {SafetensorsDType::F32, {kInter, kHidden}, 0.1f};
  t[p + "mlp.up_proj.weight"] = {SafetensorsDType::F32, {kInter, kHidden}, 0.1f};
  t[p + "mlp.down_proj.weight"] = {SafetensorsDType::F32, {kHidden, kInter}, 0.1f};
  return t;
}

// `extra`: more fields of config.json (a quantization_config), after a comma.
std::string llama_config(bool tied, const std::string& extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 7,
    "tie_word_embeddings": )" +
         std::string(tied ? "true" : "false") + (extra.empty() ? "" : ", " + extra) + "}";
}

std::vector<std::byte> tensor_bytes(const TensorSpec& spec) {
  std::uint64_t count = 1;
  for (const auto d : spec.shape) count *= d;
  std::vector<std::byte> bytes(count * engine::format::dtype_size(spec.dtype));
  for (std::uint64_t i = 0; i < count; ++i) {
    if (spec.dtype == SafetensorsDType::F32) {
      std::memcpy(bytes.data() + 4 * i, &spec.fill, 4);
    } else if (spec.dtype == SafetensorsDType::BF16) {
      const auto bits = engine::quant::f32_to_bf16(spec.fill);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    } else if (spec.dtype == SafetensorsDType::F16) {
      const auto bits = engine::quant::f32_to_f16(spec.fill);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    } else if (spec.dtype == SafetensorsDType::F8_E4M3) {
      bytes[i] = static_cast<std::byte>(engine::quant::f32_to_e4m3(spec.fill));
    }
  }
  return bytes;
}

void write_checkpoint(const TempDir& dir, const std::map<std::string, TensorSpec>& tensors, bool tied = true,
                      const std::string& extra_config = "") {
  write_file(dir / "config.json", llama_config(tied, extra_config));
  write_file(dir / "tokenizer.json", tiny::json(tiny::Spec{}));
  engine::format::SafetensorsWriter writer;
  for (const auto& [name, spec] : tensors) writer.add(name, spec.dtype, spec.shape, tensor_bytes(spec));
  writer.write(dir / "model.safetensors");
}

std::string load_error(const TempDir& dir) {
  try {
    Checkpoint::open(dir.path());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(Checkpoint, LoadsTensorsInPlaceWithTheirShapes) {
  TempDir dir;
  write_checkpoint(dir, llama_tensors());
  const auto ckpt = Checkpoint::open(dir.path());
  const auto& w = ckpt->weights();
  ASSERT_EQ(w.layers.size(), 1u);
  EXPECT_EQ(w.layers[0].q.rows, kHeads * kHeadDim);
  EXPECT_EQ(w.layers[0].q.cols, kHidden);
  EXPECT_EQ(w.layers[0].down.rows, kHidden);
  EXPECT_EQ(w.layers[0].down.cols, kInter);
  EXPECT_FALSE(w.layers[0].q_bias.has_value());
  EXPECT_FALSE(w.layers[0].q_norm.has_value());
  // Tied: the output matrix is the embedding's own bytes.
  EXPECT_EQ(w.lm_head.bytes.data(), w.embed.bytes.data());
  EXPECT_EQ(ckpt->eos_token_ids(), std::vector<std::int32_t>{7});
  EXPECT_GT(ckpt->weight_bytes(), kVocab * kHidden * 4);
}

TEST(Checkpoint, UsesAnOutputMatrixThatIsPresentEvenWhenTied) {
  TempDir dir;
  auto tensors = llama_tensors();
  tensors["lm_head.weight"] = {SafetensorsDType::F32, {kVocab, kHidden}, 0.25f};
  write_checkpoint(dir, tensors, /*tied=*/true);
  const auto ckpt = Checkpoint::open(dir.path());
  EXPECT_NE(ckpt->weights().lm_head.bytes.data(), ckpt->weights().embed.bytes.data());
  float first = 0;
  std::memcpy(&first, ckpt->weights().lm_head.bytes.data(), 4);
  EXPECT_EQ(first, 0.25f);
}

TEST(Checkpoint, UntiedWithoutAnOutputMatrixIsRefused) {
  TempDir dir;
  write_checkpoint(dir, llama_tensors(), /*tied=*/false);
  EXPECT_THAT(load_error(dir), HasSubstr("lm_head.weight is missing (tie_word_embeddings is false)"));
}

TEST(Checkpoint, MissingTensorIsNamed) {
  TempDir dir;
  auto tensors = llama_tensors();
  tensors.erase("model.layers.0.mlp.up_proj.weight");
  write_checkpoint(dir, tensors);
  const auto error = load_error(dir);
  EXPECT_THAT(error, HasSubstr("model.layers.0.mlp.up_proj.weight is missing"));
  EXPECT_THAT(error, HasSubstr("LlamaForCausalLM"));
}

TEST(Checkpoint, MisShapedTensorNamesBothShapes) {
  TempDir dir;
  auto tensors = llama_tensors();
  tensors["model.layers.0.self_attn.k_proj.weight"].shape = {kHeads * kHeadDim, kHidden};
  write_checkpoint(dir, tensors);
  EXPECT_THAT(load_error(dir), HasSubstr("self_attn.k_proj.weight in model.safetensors has shape [32, 32] but the "
                                         "config needs [16, 32]"));
}

TEST(Checkpoint, UnsupportedDtypeIsNamed) {
  TempDir dir;
  auto tensors = llama_tensors();
  tensors["model.layers.0.mlp.gate_proj.weight"].dtype = SafetensorsDType::I32;
  write_checkpoint(dir, tensors);
  EXPECT_THAT(load_error(dir), HasSubstr("gate_proj.weight in model.safetensors is stored as I32"));
  EXPECT_THAT(load_error(dir), HasSubstr("(supported: " + engine::quant::weight_type_names() + ")"));
  EXPECT_THAT(load_error(dir),
              HasSubstr("Q4_0, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, Q3_K, IQ4_NL, IQ4_XS, Q2_K, IQ2_XXS, IQ2_XS, IQ2_S, "
                        "IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4, F8_E4M3)"));
}

// ---- FP8 checkpoints -------------------------------------------------------------------------------------

constexpr const char* kFp8Blocks16 =
    R"("quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
    "weight_block_size": [16, 16]})";

// The Llama checkpoint with q_proj and gate_proj in FP8, their scales beside them (F32, one per 16 x 16 block).
std::map<std::string, TensorSpec> fp8_llama_tensors() {
  auto tensors = llama_tensors();
  const std::string p = "model.layers.0.";
  tensors[p + "self_attn.q_proj.weight"].dtype = SafetensorsDType::F8_E4M3;
  tensors[p + "self_attn.q_proj.weight_scale_inv"] = {SafetensorsDType::F32, {2, 2}, 0.5f};
  tensors[p + "mlp.gate_proj.weight"].dtype = SafetensorsDType::F8_E4M3;
  tensors[p + "mlp.gate_proj.weight_scale_inv"] = {SafetensorsDType::F32, {4, 2}, 0.25f};
  return tensors;
}

TEST(Checkpoint, Fp8MatricesCarryTheirBlockScales) {
  TempDir dir;
  write_checkpoint(dir, fp8_llama_tensors(), true, kFp8Blocks16);
  const auto ckpt = Checkpoint::open(dir.path());
  const auto& layer = ckpt->weights().layers[0];
  EXPECT_EQ(layer.q.type, engine::quant::WeightType::F8_E4M3);
  EXPECT_EQ(layer.q.bytes.size(), kHeads * kHeadDim * kHidden);  // one byte per weight, in place
  ASSERT_EQ(layer.q.scales.values.size(), 4u);
  EXPECT_EQ(layer.q.scales.block_rows, 16u);
  EXPECT_EQ(layer.q.scales.block_cols, 16u);
  EXPECT_EQ(layer.q.scales.values[3], 0.5f);
  ASSERT_EQ(layer.gate.scales.values.size(), 8u);
  EXPECT_EQ(layer.gate.scales.values[0], 0.25f);
  EXPECT_TRUE(layer.k.scales.empty());  // stored in F32, as an FP8 checkpoint may keep some matrices
}

// compressed-tensors per-channel scales, [rows, 1] in BF16, are widened to f32, one per row.
TEST(Checkpoint, Fp8ChannelScalesAreWidened) {
  TempDir dir;
  auto tensors = llama_tensors();
  const std::string p = "model.layers.0.";
  tensors[p + "self_attn.o_proj.weight"].dtype = SafetensorsDType::F8_E4M3;
  tensors[p + "self_attn.o_proj.weight_scale"] = {SafetensorsDType::BF16, {kHidden, 1}, 0.375f};
  write_checkpoint(dir, tensors, true, R"("quantization_config": {"quant_method": "compressed-tensors",
    "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8,
    "type": "float", "symmetric": true, "strategy": "channel", "dynamic": false}}}, "ignore": ["lm_head"]})");
  const auto ckpt = Checkpoint::open(dir.path());
  const auto& o = ckpt->weights().layers[0].o;
  ASSERT_EQ(o.scales.values.size(), kHidden);
  EXPECT_EQ(o.scales.block_rows, 1u);
  EXPECT_EQ(o.scales.block_cols, kHeads * kHeadDim);
  EXPECT_EQ(o.scales.values[kHidden - 1], 0.375f);
}

TEST(Checkpoint, Fp8WithoutItsScalesOrConfigIsRefusedByName) {
  {
    TempDir dir;
    write_checkpoint(dir, fp8_llama_tensors());  // no quantization_config
    EXPECT_THAT(load_error(dir), HasSubstr("self_attn.q_proj.weight is stored as F8_E4M3, but config.json has no "
                                           "quantization_config that says how it is scaled"));
  }
  {
    TempDir dir;
    auto tensors = fp8_llama_tensors();
    tensors.erase("model.layers.0.mlp.gate_proj.weight_scale_inv");
    write_checkpoint(dir, tensors, true, kFp8Blocks16);
    EXPECT_THAT(load_error(dir), HasSubstr("the tensor model.layers.0.mlp.gate_proj.weight_scale_inv is missing (the "
                                           "scales of the FP8 matrix model.layers.0.mlp.gate_proj.weight)"));
  }
  {
    TempDir dir;
    auto tensors = fp8_llama_tensors();
    tensors["model.layers.0.mlp.gate_proj.weight_scale_inv"].shape = {2, 4};
    write_checkpoint(dir, tensors, true, kFp8Blocks16);
    EXPECT_THAT(load_error(dir), HasSubstr("gate_proj.weight_scale_inv in model.safetensors has shape [2, 4] but the "
                                           "scales of model.layers.0.mlp.gate_proj.weight [64, 32] need [4, 2]"));
  }
  {
    TempDir dir;
    auto tensors = fp8_llama_tensors();
    tensors["model.layers.0.self_attn.q_proj.weight_scale_inv"].dtype = SafetensorsDType::I32;
    write_checkpoint(dir, tensors, true, kFp8Blocks16);
    EXPECT_THAT(load_error(dir), HasSubstr("q_proj.weight_scale_inv in model.safetensors is stored as I32; scales are "
                                           "read as F32, F16 or BF16"));
  }
}

// A GGUF tensor of a real ggml type the engine does not compute with (TQ1_0) is named with its type.
TEST(Checkpoint, UnsupportedGgufTypeIsNamed) {
  TempDir dir;
  engine::tools::ModelWriterOptions options;
  options.out_dir = dir.path();
  options.gguf_types = {engine::quant::WeightType::Q8_0};
  options.safetensors = false;
  engine::tools::write_model(options);
  const auto* tq1_0 = engine::format::ggml_type_by_name("TQ1_0");
  ASSERT_NE(tq1_0, nullptr);
  const auto path = dir.path() / "tq1.gguf";
  testing_support::rewrite_gguf(dir.path() / "model-Q8_0.gguf", path,
                                [tq1_0](const engine::format::GgufTensor& t,
                                        std::span<const std::byte>) -> std::optional<testing_support::RestoredTensor> {
                                  if (t.name != "blk.0.ffn_down.weight") return std::nullopt;
                                  return testing_support::RestoredTensor{
                                      tq1_0,
                                      std::vector<std::byte>(t.elements() / tq1_0->block_size * tq1_0->type_size)};
                                });
  try {
    Checkpoint::open(path);
    ADD_FAILURE() << "a TQ1_0 tensor was taken";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the tensor blk.0.ffn_down.weight in"));
    EXPECT_THAT(e.what(), HasSubstr("is stored as TQ1_0, which the engine does not compute with (supported: " +
                                    engine::quant::weight_type_names() + ")"));
  }
}

TEST(Checkpoint, HalfPrecisionVectorsAreWidenedToF32) {
  TempDir dir;
  auto tensors = llama_tensors();
  tensors["model.norm.weight"] = {SafetensorsDType::BF16, {kHidden}, 1.5f};
  tensors["model.layers.0.input_layernorm.weight"] = {SafetensorsDType::F16, {kHidden}, -0.75f};
  write_checkpoint(dir, tensors);
  const auto ckpt = Checkpoint::open(dir.path());
  const auto& norm = ckpt->weights().final_norm;
  EXPECT_EQ(norm.type, engine::quant::WeightType::F32);
  ASSERT_EQ(norm.bytes.size(), kHidden * 4);
  float last = 0;
  std::memcpy(&last, norm.bytes.data() + 4 * (kHidden - 1), 4);
  EXPECT_EQ(last, 1.5f);
  float first = 0;
  std::memcpy(&first, ckpt->weights().layers[0].attn_norm.bytes.data(), 4);
  EXPECT_EQ(first, -0.75f);
}

TEST(Checkpoint, ShardIndexDecidesAndMustBeTrue) {
  TempDir dir;
  auto tensors = llama_tensors();
  write_checkpoint(dir, tensors);
  std::filesystem::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
  std::string map;
  for (const auto& [name, spec] : tensors)
    map += (map.empty() ? "" : ",") + tiny::json_quote(name) + R"(: "model-00001-of-00001.safetensors")";
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {}, "weight_map": {)" + map + "}}");
  EXPECT_NO_THROW(Checkpoint::open(dir.path()));

  map += R"(, "model.layers.0.extra.weight": "model-00001-of-00001.safetensors")";
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {}, "weight_map": {)" + map + "}}");
  EXPECT_THAT(load_error(dir), HasSubstr("maps model.layers.0.extra.weight to model-00001-of-00001.safetensors, "
                                         "which does not contain it"));
}

TEST(Checkpoint, DirectoryWithoutWeightsOrConfigIsRefused) {
  TempDir dir;
  EXPECT_THAT(load_error(dir), HasSubstr("no config.json"));
  write_file(dir / "config.json", llama_config(true));
  EXPECT_THAT(load_error(dir), HasSubstr("no model.safetensors or model.safetensors.index.json"));
  EXPECT_THAT(load_error(TempDir()), HasSubstr("no config.json"));
}

TEST(Checkpoint, GenerationConfigGivesDefaultsAndEosIds) {
  TempDir dir;
  write_checkpoint(dir, llama_tensors());
  write_file(dir / "generation_config.json",
             R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": [9, 7]})");
  auto ckpt = Checkpoint::open(dir.path());
  EXPECT_DOUBLE_EQ(*ckpt->generation_defaults().temperature, 0.6);
  EXPECT_EQ(*ckpt->generation_defaults().top_k, 20);
  EXPECT_EQ(ckpt->eos_token_ids(), (std::vector<std::int32_t>{7, 9}));

  write_file(dir / "generation_config.json", R"({"do_sample": false, "temperature": 0.6})");
  ckpt = Checkpoint::open(dir.path());
  EXPECT_DOUBLE_EQ(*ckpt->generation_defaults().temperature, 0.0);
}

TEST(Checkpoint, ChatTemplateFileTakesPrecedenceOverTokenizerConfig) {
  TempDir dir;
  write_checkpoint(dir, llama_tensors());
  EXPECT_FALSE(Checkpoint::open(dir.path())->chat_template().has_value());
  write_file(dir / "tokenizer_config.json", R"({"chat_template": "from the config"})");
  EXPECT_EQ(Checkpoint::open(dir.path())->chat_template(), "from the config");
  write_file(dir / "chat_template.jinja", "from its own file");
  EXPECT_EQ(Checkpoint::open(dir.path())->chat_template(), "from its own file");
}

}  // namespace
