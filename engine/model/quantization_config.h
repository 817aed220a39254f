#pragma once

// config.json's quantization_config: the FP8 checkpoints the engine computes with directly (Fp8Scheme) and
// gpt-oss's MXFP4 experts, every other quantization refused by name with what to use instead. Included by the config
// reader only (it needs RapidJSON).

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "engine/model/model_config.h"

namespace engine::model {

// Reads a quantization_config object into `c` (its fp8 scheme, or mxfp4_experts for a gpt-oss checkpoint; `name`
// is the file, for messages). Throws ConfigError naming the field for every method, format or setting the engine
// does not compute, and what to use instead.
void parse_quantization_config(const rapidjson::Value& config, std::string_view name, ModelConfig& c);

// What a refused quantization is told to use instead.
std::string served_formats();

}  // namespace engine::model
