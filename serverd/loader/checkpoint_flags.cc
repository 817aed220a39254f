#include "serverd/loader/checkpoint_flags.h"

#include "base/flags.h"

namespace serverd {
namespace {

using base::UsageError;

// vLLM's --dtype spellings, by the precision they name.
std::string named_precision(const std::string& dtype) {
  if (dtype == "half" || dtype == "float16") return "float16";
  if (dtype == "float" || dtype == "float32") return "float32";
  return dtype;  // bfloat16
}

std::string format_of(bool gguf) {
  return gguf ? "a GGUF file" : "a safetensors directory";
}

}  // namespace

std::vector<std::string> check_checkpoint_flags(const ServerOptions& options, const CheckpointFacts& checkpoint) {
  std::vector<std::string> notes;
  if (options.dtype != "auto") {
    if (named_precision(options.dtype) != checkpoint.precision) {
      throw UsageError("--dtype " + options.dtype + ": the checkpoint's weights are " + checkpoint.precision +
                       " and the engine converts none; use --dtype auto");
    }
    notes.push_back("--dtype " + options.dtype + ": the checkpoint's weights are " + checkpoint.precision +
                    "; the engine uses them as stored, accumulating in f32");
  }
  if (options.load_format != "auto") {
    if ((options.load_format == "gguf") != checkpoint.gguf) {
      throw UsageError("--load-format " + options.load_format + ": the model is " + format_of(checkpoint.gguf) +
                       "; use --load-format auto");
    }
    notes.push_back("--load-format " + options.load_format + ": the model is " + format_of(checkpoint.gguf) +
                    ", which serverd loads as it is");
  }
  if (!options.quantization.empty() && options.quantization != "None") {
    const std::string q = "--quantization " + options.quantization;
    const std::string actual = checkpoint.gguf ? "gguf" : checkpoint.quant_method;
    const std::string is = checkpoint.gguf  ? "a GGUF file"
                           : actual.empty() ? "a safetensors directory"
                           : actual == "mxfp4"
                               ? "a checkpoint with MXFP4 experts (quantization_config's quant_method mxfp4)"
                               : "an FP8 checkpoint (quantization_config's quant_method " + actual + ")";
    if (options.quantization != actual) {
      throw UsageError(q + ": the model is " + is +
                       (actual.empty() ? ", which serverd runs unquantized; serve a GGUF file (org/repo:Q4_K_M) or an "
                                         "FP8 checkpoint for quantized weights"
                                       : "") +
                       "; leave --quantization out (serverd reads the quantization from the checkpoint)");
    }
    notes.push_back(q + ": the model is " + is +
                    (checkpoint.gguf     ? "; its ggml types run as stored"
                     : actual == "mxfp4" ? "; its MXFP4 experts run as stored"
                                         : "; its FP8 weights and scales run as stored"));
  }
  if (options.max_model_len > checkpoint.trained_len && checkpoint.trained_len > 0) {
    const std::string numbers = "--max-model-len " + std::to_string(options.max_model_len) +
                                " is longer than the model's trained length of " +
                                std::to_string(checkpoint.trained_len) + " positions";
    if (!options.allow_long_max_model_len) {
      throw UsageError(numbers +
                       "; lower it, or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to serve positions the model "
                       "never saw (its outputs past them may be garbage)");
    }
    notes.push_back(numbers + ", allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: outputs past " +
                    std::to_string(checkpoint.trained_len) + " positions may be garbage");
  }
  return notes;
}

std::optional<engine::model::PoolingConfig> resolve_runner(
    const ServerOptions& options, const std::optional<engine::model::PoolingConfig>& checkpoint_pooling,
    std::vector<std::string>& notes) {
  const bool embed = options.convert == "embed";
  if (options.runner == "generate") {
    if (embed) {
      throw UsageError(
          "--convert embed makes an embedding model, which --runner generate does not serve; pass "
          "--runner pooling (or leave --runner auto)");
    }
    return std::nullopt;
  }
  const bool pooling = options.runner == "pooling" || embed || checkpoint_pooling;
  if (!pooling) return std::nullopt;
  if (options.convert == "none") {
    throw UsageError(std::string(options.runner == "pooling" ? "--runner pooling"
                                                             : "--runner auto (pooling, for the model's "
                                                               "sentence-transformers or GGUF pooling)") +
                     " --convert none: the engine's models generate text and serve embeddings only converted; pass "
                     "--convert embed (or leave --convert auto), or --runner generate for text generation");
  }
  const auto config = checkpoint_pooling.value_or(engine::model::kDefaultPooling);
  const std::string how = std::string(engine::model::pooling_type_name(config.type)) + " pooling" +
                          (config.normalize ? ", normalized" : "") +
                          (checkpoint_pooling ? " (the model's sentence-transformers or GGUF pooling)"
                                              : " (vLLM's default for a converted causal model)");
  if (options.runner == "auto") {
    notes.push_back("--runner auto resolved to --runner pooling: the model serves embeddings (POST /v1/embeddings), " +
                    how);
  } else {
    notes.push_back("--runner pooling: the model serves embeddings (POST /v1/embeddings), " + how);
  }
  return config;
}

}  // namespace serverd
