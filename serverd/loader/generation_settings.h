#pragma once

// The sampling defaults requests start from, as vLLM picks them: --generation-config auto takes the model's
// generation_config.json, vllm takes none (OpenAI's defaults), a directory takes its generation_config.json;
// --override-generation-config then sets or (with null) drops single values.

#include "engine/model/model_config.h"
#include "serverd/options/server_options.h"

namespace serverd {

// `model` is the checkpoint's generation_config.json. Throws base::UsageError for a directory without a
// generation_config.json, or a bad override.
engine::model::GenerationDefaults resolve_generation_defaults(const ServerOptions& options,
                                                              const engine::model::GenerationDefaults& model);

}  // namespace serverd
