#pragma once

// model-writer: writes a model with random weights in the Hugging Face layout (config.json,
// generation_config.json, tokenizer files, safetensors weights, one file or shards with an index) and as
// GGUF files, for the engine's tests and benchmarks. Weights are deterministic from the seed. Tensors are
// generated and written a slice at a time, so a 1.2 GB model never sits in memory.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/flags.h"
#include "engine/model/model_config.h"
#include "engine/model/pooling.h"
#include "engine/quant/quant.h"

namespace engine::tools {

enum class ModelPreset { Tiny, Qwen3_0_6B, Qwen3_30B_A3B };

// A GGUF file to write: every matrix in `type`, or, with `medium_mix`, llama.cpp's "_M" mix of that K-quant
// (Q4_K_M, Q5_K_M): Q6_K for the output matrix (the token embedding where the two are tied) and for attn_v
// (attn_qkv) and ffn_down of the layers llama.cpp's quantizer gives more bits, `type` for the other matrices.
struct GgufFileType {
  quant::WeightType type;
  bool medium_mix = false;
  // Implicit: a weight type names the file of that one type.
  GgufFileType(quant::WeightType matrices, bool medium = false) : type(matrices), medium_mix(medium) {}  // NOLINT
  bool operator==(const GgufFileType&) const = default;
};
// "Q4_K", "Q4_K_M"
std::string gguf_type_name(GgufFileType file);
// A --gguf TYPE: a weight type model-writer can quantize to, or Q4_K_M / Q5_K_M; nullopt for anything else.
std::optional<GgufFileType> gguf_type_from_name(std::string_view name);
// The --gguf TYPE names, comma-separated.
std::string gguf_type_names();

struct ModelWriterOptions {
  model::Architecture arch = model::Architecture::Qwen3;
  ModelPreset preset = ModelPreset::Tiny;
  std::filesystem::path out_dir;
  // Storage type of the safetensors weights (F32, F16 or BF16); the default is F32 for tiny, BF16 for
  // qwen3-0.6b. GGUF files are converted from the stored values, as a converter would read them.
  std::optional<quant::WeightType> dtype;
  std::uint32_t shards = 1;
  std::uint64_t seed = 0;
  std::vector<GgufFileType> gguf_types;  // one model-TYPE.gguf each
  // Each GGUF file split, as llama.cpp's gguf-split --split-max-tensors does, into
  // model-TYPE-0000i-of-0000N.gguf of at most this many tensors (0: whole files).
  std::size_t split_max_tensors = 0;
  std::optional<std::filesystem::path> tokenizer_dir;  // a real tokenizer to copy instead of the generated one
  bool safetensors = true;                             // false: no .safetensors files (nor index)
  // RoPE scaling in config.json and the GGUF files, with the preset's parameters (factor 4 over
  // max_position_embeddings; llama3: Llama 3.1's). Unset: llama3 for llama, none for the others; nullopt
  // inside: none.
  std::optional<std::optional<model::RopeType>> rope_scaling;
  // A scripted model (tiny preset, generated tokenizer, an untied lm_head): each piece becomes one added
  // token, and the model's greedy reply to every prompt is the pieces in order, then the end of the turn.
  // For tests that need the real binaries to emit a chosen text (a tool call, a reasoning block).
  std::vector<std::string> script;
  // An embedding model pooling this way: sentence-transformers' modules.json and 1_Pooling/config.json (with
  // a Normalize module), and {arch}.pooling_type in the GGUF files, as Qwen3-Embedding's repositories hold.
  std::optional<model::PoolingType> pooling;
  // The preset's shape with this many layers (a model scaled down in depth that keeps every matrix's shape:
  // the benchmarks' Qwen3-30B-A3B).
  std::optional<std::uint64_t> num_layers;
  // FP8 safetensors: the linear layers' matrices as F8_E4M3 with scales of this scheme (--fp8 block: quant_method
  // fp8 over blocks of 128 x 128, as DeepSeek's and Qwen's FP8 checkpoints; channel and tensor: compressed-tensors
  // float-quantized, as RedHat's), the rest in `dtype`. GGUF files are converted from the FP8 values.
  std::optional<model::Fp8Scheme> fp8;
  // gpt-oss as OpenAI publishes it: the experts' matrices as MXFP4 `_blocks` and `_scales` (quantization_config
  // quant_method mxfp4), the GGUF files' experts holding the same values.
  bool mxfp4 = false;
};

// A command line that cannot be followed; the message names the flag and the value.
using base::UsageError;

// The --help text: the flags (base::FlagParser's list) and what the tool writes.
std::string model_writer_usage();
// Parses the arguments after the program name. Throws UsageError. Returns nullopt when they ask for --help
// (the caller prints model_writer_usage() and exits 0).
std::optional<ModelWriterOptions> parse_model_writer_command_line(std::span<const std::string> args);
// parse_model_writer_command_line for arguments built by a program, where --help is refused as a UsageError.
ModelWriterOptions parse_model_writer_args(std::span<const std::string> args);

struct WrittenModel {
  model::ModelConfig config;                 // what config.json says
  std::vector<std::filesystem::path> files;  // every file written, in the order written
  std::uint64_t parameters = 0;              // elements of the Hugging Face tensors
};

// Writes the model into options.out_dir (created when missing). Throws UsageError for options that do not
// fit together (e.g. a preset for another architecture) and std::runtime_error for I/O failures.
WrittenModel write_model(const ModelWriterOptions& options);

// ---- facts shared with the tests ------------------------------------------------------------------------

// The configuration a preset gives an architecture (vocab_size from the tokenizer size; 0 when unknown).
model::ModelConfig preset_config(model::Architecture arch, ModelPreset preset, std::uint64_t tokenizer_size);
// The RoPE scaling --rope-scaling TYPE writes into `config`: factor 4 over its max_position_embeddings, or
// Llama 3.1's llama3 parameters.
model::RopeScaling preset_rope_scaling(model::RopeType type, const model::ModelConfig& config);

// "model-00002-of-00003.safetensors"
std::string shard_file_name(std::uint32_t index, std::uint32_t count);
// "model-Q4_K.gguf", "model-Q4_K_M.gguf"
std::string gguf_file_name(GgufFileType file);

}  // namespace engine::tools
