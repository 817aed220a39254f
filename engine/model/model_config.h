#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/quant/quant.h"

namespace engine::model {

// The architectures the engine runs; each is one model graph written once against the backend interface.
// Mistral is Llama's graph under its own name (and, where its config sets one, a sliding window). Gemma 2 and
// 3 are the same graph with Gemma's data: GeGLU, norms after each sub-block too, interleaved sliding-window
// layers (Gemma 2: soft-capped scores and logits; Gemma 3: q/k norms, a RoPE of their own on local layers).
// SmolLM3 is Llama's graph with RoPE left out of every fourth layer. Phi-3 (and Phi-4-mini, the same class) is
// Llama's graph with q, k and v in one stored matrix, gate and up in another, and RoPE over part of each head.
// Qwen3-MoE, Qwen2-MoE and Mixtral are Qwen3's, Qwen2's and Llama's graphs with a mixture of experts in place
// of the feed-forward block (MoeConfig). gpt-oss is Llama's graph with biases on every attention projection,
// attention sinks, alternating sliding-window and full layers, and a mixture with biases and a clamped SwiGLU.
enum class Architecture {
  Qwen3,
  Qwen2,
  Llama,
  Mistral,
  Gemma3,
  Gemma2,
  SmolLM3,
  Phi3,
  Qwen3Moe,
  Qwen2Moe,
  Mixtral,
  GptOss
};
// Gemma 2 or 3: Gemma's norms, embedding scale and GeGLU.
bool is_gemma(Architecture arch);
// Qwen3-MoE, Qwen2-MoE, Mixtral or gpt-oss: a mixture of experts in place of the feed-forward block (MoeConfig).
bool is_moe(Architecture arch);
std::string_view architecture_name(Architecture arch);  // the Hugging Face class name

// The RoPE scalings transformers defines for these families (config.json "rope_type"; GGUF
// "{arch}.rope.scaling.type" linear and yarn, Llama 3's as the rope_freqs.weight tensor, Phi-3's LongRoPE as
// the rope_factors_long/short.weight tensors).
enum class RopeType { Linear, Dynamic, Yarn, Llama3, LongRope };
std::string_view rope_type_name(RopeType type);  // as config.json spells it

struct RopeScaling {
  RopeType type = RopeType::Linear;
  double factor = 1.0;
  // The context the model was trained at (yarn, llama3; linear and dynamic use max_position_embeddings).
  std::uint64_t original_max_position_embeddings = 0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0;        // yarn: the ramp between extrapolated and interpolated frequencies
  double beta_slow = 1.0;
  bool truncate = true;  // yarn: the ramp's ends rounded to whole dimensions
  // yarn: the factor on cos and sin (so on q·k, squared); unset: 0.1 ln(factor) + 1, or DeepSeek's ratio of
  // two such terms when mscale and mscale_all_dim are given.
  std::optional<double> attention_factor;
  double mscale = 0.0, mscale_all_dim = 0.0;
  // longrope: one divisor per rotary frequency for contexts up to original_max_position_embeddings (short) and
  // beyond (long); which set a model runs with is fixed at load by its max_model_len, as vLLM fixes it, so
  // that keys already cached never change their rotation. attention_factor, when the config gives none, is
  // sqrt(1 + ln(factor) / ln(original_max_position_embeddings)), factor being max_position_embeddings over it.
  std::vector<double> short_factor, long_factor;
};

// How rotary embeddings pair dimensions: half-split (NEOX: i with i + d/2), or adjacent pairs (GGUF llama
// files, whose Q/K weights were permuted by the converter).
enum class RopePairing { HalfSplit, Interleaved };

// The gated feed-forward's activation: SwiGLU's silu, or GeGLU's GELU in its tanh approximation
// (hidden_activation gelu_pytorch_tanh).
enum class Activation { Silu, GeluTanh };

// A mixture-of-experts feed-forward block: a router (num_experts x hidden_size) scores each token, the softmax
// of its scores picks the experts_per_token best (ties to the lower index, as torch.topk on the CPU), and the
// token's output is their gated MLPs' outputs weighted by those probabilities (renormalized to sum to 1 where
// norm_topk_prob: Qwen3-MoE's checkpoints, always for Mixtral). Qwen2-MoE adds a shared expert on every token,
// its output times sigmoid(h . shared_expert_gate).
struct MoeConfig {
  std::uint64_t num_experts = 0;
  std::uint64_t experts_per_token = 0;         // num_experts_per_tok
  std::uint64_t expert_intermediate_size = 0;  // moe_intermediate_size (Mixtral: intermediate_size)
  bool norm_topk_prob = false;
  std::uint64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE; 0: no shared expert
  // The layers whose feed-forward block is the mixture (the others a dense MLP of intermediate_size): Qwen's
  // decoder_sparse_step and mlp_only_layers. Empty: every layer.
  std::vector<bool> layers;
  // gpt-oss: the router and every expert's three products carry a bias, and the experts' activation is the
  // SwiGLU clamped at swiglu_limit (backend::ClampedSwiglu) in place of silu.
  bool biases = false;
  std::optional<double> swiglu_limit{};
};

// How an FP8 checkpoint scales its F8_E4M3 matrices: beside each quantized `<module>.weight` lies
// `<module>.<scale_name>`, and a weight is its stored value times its block's scale. quant_method "fp8" (DeepSeek's
// and Qwen's FP8 checkpoints): weight_scale_inv over blocks of weight_block_size, or one weight_scale per tensor
// without it. compressed-tensors "float-quantized" (RedHat's, LLM Compressor's): weight_scale per tensor, per
// output channel or per block. Activations stay f32 (more exact than the FP8 activations the checkpoint was
// calibrated for, so an input_scale is not used).
struct Fp8Scheme {
  enum class Granularity { Tensor, Channel, Block };
  Granularity granularity = Granularity::Block;
  std::string scale_name;                        // "weight_scale_inv" or "weight_scale"
  std::uint64_t block_rows = 0, block_cols = 0;  // Block: rows and columns per scale
  std::string quant_method;                      // "fp8" or "compressed-tensors"
};

// Everything the model graph needs to know, from config.json or from GGUF metadata.
struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  std::uint64_t vocab_size = 0;
  std::uint64_t hidden_size = 0;
  std::uint64_t intermediate_size = 0;
  std::uint64_t num_layers = 0;
  std::uint64_t num_heads = 0;
  std::uint64_t num_kv_heads = 0;
  std::uint64_t head_dim = 0;  // Qwen3 sets it apart from hidden_size / num_heads
  // The leading dimensions of each head that RoPE rotates (Phi-3's partial_rotary_factor times head_dim);
  // 0: the whole head. The rest pass through unrotated.
  std::uint64_t rotary_dim = 0;
  std::uint64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  RopePairing rope_pairing = RopePairing::HalfSplit;
  // GGUF files of rope-scaled Llamas carry the scaling as one divisor per frequency (rope_freqs.weight)
  // instead of the parameters; when present it replaces rope_scaling.
  std::vector<double> rope_freq_factors;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  // The output projection carries a bias too: where the class puts one on o_proj with attention_bias (Llama,
  // Qwen3, Gemma, SmolLM3, gpt-oss; Qwen2's and Mistral's never have one).
  bool output_bias = false;
  // Attention sinks (gpt-oss): a learned logit per q head in each query's softmax (self_attn.sinks).
  bool attention_sinks = false;
  bool qk_norm = false;  // per-head RMSNorm on q and k before RoPE (Qwen3, Gemma 3)
  Activation activation = Activation::Silu;
  // Gemma: the embedding is multiplied by sqrt(hidden_size) (transformers rounds it to the weights' dtype
  // first, which Checkpoint does for safetensors; llama.cpp multiplies by it unrounded), each sub-block's
  // output goes through a norm of its own before the residual add (post_attention_layernorm,
  // post_feedforward_layernorm), and q·k is scaled by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5.
  std::optional<double> embedding_scale;
  bool post_norms = false;
  std::optional<double> query_pre_attn_scalar;
  // The file stores each norm weight as w for a norm that multiplies by (1 + w): Gemma's Hugging Face
  // checkpoints (llama.cpp's converter writes w + 1 into GGUF files, which are read as they are).
  bool norm_weight_plus_one = false;
  // Attention over the last `sliding_window` positions only: Mistral v0.1's on every layer, Gemma 3's on the
  // layers `sliding_layers` marks (empty: every layer).
  std::optional<std::uint64_t> sliding_window;
  std::vector<bool> sliding_layers;
  // The RoPE base of the sliding-window layers, which then rotate without scaling (Gemma 3's
  // rope_local_base_freq); unset: they rotate as the other layers.
  std::optional<double> sliding_rope_theta;
  // The layers that rotate q and k (SmolLM3's no_rope_layers, 1 for those that do); empty: every layer.
  std::vector<bool> rope_layers;
  // Gemma 2: attention scores become cap * tanh(score / cap) on every layer, and so do the final logits.
  std::optional<double> attn_logit_softcapping, final_logit_softcapping;
  std::optional<MoeConfig> moe;
  // An FP8 checkpoint's scales (config.json's quantization_config); unset: the weights are stored as they are.
  std::optional<Fp8Scheme> fp8;
  // gpt-oss's checkpoints as OpenAI publishes them (quantization_config quant_method mxfp4): the experts' matrices
  // are MXFP4 `_blocks` and `_scales` tensors, the rest as they are.
  bool mxfp4_experts = false;
  std::vector<std::int64_t> eos_token_ids;
  std::optional<std::int64_t> bos_token_id;
};

// Thrown for a config the engine cannot run: the message names the file, the field and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sampling defaults a checkpoint suggests (generation_config.json); unset fields keep the API's defaults.
struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<std::int64_t> top_k;
  std::optional<std::uint64_t> max_new_tokens;
  std::vector<std::int64_t> eos_token_ids;
};

// Reads a Hugging Face config.json. An architecture the engine does not run is refused by name, with the
// list of those it does; so is every field that would change the arithmetic in a way the engine does not
// implement (hidden_act, mlp_bias, partial_rotary_factor but on Phi-3, a rope type, a quantization_config but FP8's),
// with its value.
ModelConfig parse_hf_config(std::string_view json, std::string_view name);
// A checkpoint's small JSON file read whole (at most 16 MiB); ConfigError naming the file otherwise.
std::string read_small_json(const std::filesystem::path& file);
ModelConfig read_hf_config(const std::filesystem::path& config_json);

// Reads generation_config.json (a file that is absent gives no defaults). do_sample false means greedy.
GenerationDefaults parse_generation_config(std::string_view json, std::string_view name);
GenerationDefaults read_generation_config(const std::filesystem::path& generation_config_json);

// The rotary embedding's tensors of a GGUF file, each read as F32 values (empty: absent): Llama 3's divisors
// (rope_freqs.weight), Phi-3's LongRoPE factors (rope_factors_long.weight, rope_factors_short.weight).
struct GgufRopeTensors {
  std::vector<double> freqs, long_factors, short_factors;
};

// Reads the hyper-parameters of a GGUF file (general.architecture and the "{arch}.*" keys) with its rope
// tensors. GGUF llama files pair RoPE dimensions interleaved. Keys that change the arithmetic in a way the
// engine does not implement are refused by name, as in config.json.
ModelConfig config_from_gguf(const format::GgufLayout& gguf, std::string_view name, const GgufRopeTensors& rope = {});

// Gemma's embedding scale as transformers multiplies by it: sqrt(hidden_size) rounded to the embedding's
// dtype (`embedding_type`: F16 or BF16 rounded to nearest even, F32 to float; sqrt(1152) is 34 in bf16).
double embedding_scale_in(quant::WeightType embedding_type, std::uint64_t hidden_size);

// LongRoPE's default factor on cos and sin for a model stretched `factor` times past `original` positions:
// sqrt(1 + ln(factor) / ln(original)), 1 when it is not stretched.
double longrope_attention_factor(double factor, std::uint64_t original);

// The dimensions of a head that RoPE rotates: rotary_dim, or the whole head.
std::uint64_t rotary_dims(const ModelConfig& config);

// Whether layer `layer`'s feed-forward block is a mixture of experts.
bool is_moe_layer(const ModelConfig& config, std::size_t layer);

// Whether layer `layer` attends over the sliding window only.
bool is_sliding_layer(const ModelConfig& config, std::size_t layer);

// The positions a config's model is made for: max_position_embeddings, times the factor of a linear, dynamic
// or yarn scaling (yarn: of original_max_position_embeddings), as vLLM derives its default max_model_len (but
// for Gemma 3, whose max_position_embeddings is the scaled length already, and LongRoPE, whose is too).
std::uint64_t derived_max_model_len(const ModelConfig& config);

}  // namespace engine::model
