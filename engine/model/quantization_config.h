#pragma once

// config.json's quantization_config: the FP8 checkpoints the engine computes with directly (Fp8Scheme), every
// other quantization refused by name with what to use instead. Included by the config reader only (it needs
// RapidJSON).

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "engine/model/model_config.h"

namespace engine::model {

// The scheme a quantization_config object describes (`name` is the file, for messages). Throws ConfigError naming
// the field for every method, format or setting the engine does not compute, and what to use instead.
Fp8Scheme parse_quantization_config(const rapidjson::Value& config, std::string_view name);

// What a refused quantization is told to use instead.
std::string served_formats();

}  // namespace engine::model
