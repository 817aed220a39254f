#pragma once

// The flags that can only be judged once the checkpoint is open: --dtype, --load-format and --quantization
// name what the weights are (the engine converts none, so a value is taken when it describes the checkpoint
// and refused otherwise), and --max-model-len may not pass the model's trained length unless
// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 allows it.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/pooling.h"
#include "serverd/options/server_options.h"

namespace serverd {

// What the checks need to know about the checkpoint.
struct CheckpointFacts {
  bool gguf = false;      // a .gguf file (else a safetensors directory)
  std::string precision;  // the weights' type: "float32", "float16", "bfloat16" (FP8: its other tensors'), or a
                          // ggml type ("Q4_K")
  // max_position_embeddings (config.json) or context_length (GGUF), times the RoPE scaling factor where
  // linear, dynamic or YaRN scaling stretches it (vLLM's derived max_model_len)
  std::uint64_t trained_len = 0;
  // A quantized safetensors checkpoint's quant_method ("fp8", "compressed-tensors", gpt-oss's "mxfp4"); empty
  // otherwise.
  std::string quant_method{};
};

// One line per flag taken as it is (for the log). Throws base::UsageError naming the flag, the checkpoint's
// value and what to use instead.
std::vector<std::string> check_checkpoint_flags(const ServerOptions& options, const CheckpointFacts& checkpoint);

// What the model serves, as vLLM resolves --runner and --convert: the pooling of its embeddings (pooling
// runner: the checkpoint's own pooling, `checkpoint_pooling`, else vLLM's default for a converted causal
// model, the last token normalised), or nullopt for text generation. --runner auto picks pooling for a
// checkpoint that describes one, or under --convert embed. `notes` receives a line for the log when auto was
// resolved to pooling. Throws base::UsageError for --runner and --convert that contradict each other.
std::optional<engine::model::PoolingConfig> resolve_runner(
    const ServerOptions& options, const std::optional<engine::model::PoolingConfig>& checkpoint_pooling,
    std::vector<std::string>& notes);

}  // namespace serverd
