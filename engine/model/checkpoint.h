#pragma once

// A checkpoint opened for inference: a Hugging Face snapshot directory (config.json, safetensors shards,
// tokenizer and generation files) or a single GGUF file. Tensors are found by the architecture's names,
// checked against the config's shapes and handed out as views into the mapped files (no copy), except
// small vectors stored in half precision, which are widened once to f32.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/pooling.h"
#include "engine/tokenizer/tokenizer.h"

namespace engine::model {

// One gated MLP's matrices: an expert of a mixture, or Qwen2-MoE's shared expert; gpt-oss's experts add a bias to
// each product.
struct MlpWeights {
  backend::WeightSource gate, up, down;
  std::optional<backend::WeightSource> gate_bias{}, up_bias{}, down_bias{};
};

// A mixture-of-experts feed-forward block (MoeConfig): the router, each expert, and Qwen2-MoE's shared expert
// with its gate (a vector of hidden_size values).
struct MoeWeights {
  backend::WeightSource router;
  std::optional<backend::WeightSource> router_bias{};  // gpt-oss
  std::vector<MlpWeights> experts;
  std::optional<MlpWeights> shared_expert;
  std::optional<backend::WeightSource> shared_expert_gate;
};

struct LayerWeights {
  backend::WeightSource attn_norm, q, k, v, o;
  std::optional<backend::WeightSource> q_bias, k_bias, v_bias;  // Qwen2
  std::optional<backend::WeightSource> o_bias{};                // ModelConfig::output_bias
  std::optional<backend::WeightSource> sinks{};                 // gpt-oss: one logit per q head
  std::optional<backend::WeightSource> q_norm, k_norm;          // Qwen3, Gemma 3
  backend::WeightSource ffn_norm, gate, up, down;
  // Gemma's norms of the attention and feed-forward outputs, before each is added to the residual stream.
  std::optional<backend::WeightSource> post_attn_norm, post_ffn_norm;
  // The layer's feed-forward block where it is a mixture of experts (gate, up and down are then empty).
  std::optional<MoeWeights> moe;
};

struct ModelWeights {
  backend::WeightSource embed;
  std::vector<LayerWeights> layers;
  backend::WeightSource final_norm;
  backend::WeightSource lm_head;  // the embedding itself when the model ties them
};

class Checkpoint {
 public:
  // Opens `path`: a directory with config.json, or a .gguf file. Throws ConfigError (config, missing or
  // mis-shaped tensors, unsupported dtypes) or FormatError (a malformed file), naming the file and tensor.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& path);

  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  // The chat template's source, when the checkpoint has one.
  const std::optional<std::string>& chat_template() const { return chat_template_; }
  const GenerationDefaults& generation_defaults() const { return generation_; }
  // The pooling the checkpoint describes for embeddings (sentence-transformers' modules.json, GGUF's
  // pooling_type); nullopt: none, a generation model.
  const std::optional<PoolingConfig>& pooling() const { return pooling_; }
  const Matryoshka& matryoshka() const { return matryoshka_; }
  // Every id that ends generation: the config's, generation_config.json's and the tokenizer's EOS.
  const std::vector<std::int32_t>& eos_token_ids() const { return eos_ids_; }
  // Bytes of the matrices and vectors the model reads per token: every one of a dense model; of a mixture's
  // experts, the share a token is routed to (experts_per_token of num_experts).
  std::uint64_t weight_bytes() const;

 private:
  struct Files;
  Checkpoint();
  void load_directory();
  void load_gguf();
  void collect_eos_ids();

  std::filesystem::path path_;
  std::unique_ptr<Files> files_;
  ModelConfig config_;
  ModelWeights weights_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::optional<std::string> chat_template_;
  GenerationDefaults generation_;
  std::optional<PoolingConfig> pooling_;
  Matryoshka matryoshka_;
  std::vector<std::int32_t> eos_ids_;
};

// The chat template of a Hugging Face directory whose tokenizer is `tokenizer`: chat_template.jinja when the
// directory has one (newer checkpoints), else tokenizer_config.json's.
std::optional<std::string> directory_chat_template(const std::filesystem::path& dir,
                                                   const tokenizer::Tokenizer& tokenizer);

}  // namespace engine::model
