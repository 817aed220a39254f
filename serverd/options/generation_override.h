#pragma once

// --override-generation-config: sampling defaults over the generation config's, as vLLM takes them (a JSON
// object of temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens). vLLM ignores other keys;
// serverd refuses them by name, so that a misspelt key is not silently dropped.

#include <string_view>

#include "engine/model/model_config.h"

namespace serverd {

// `defaults` with the object's values over them; a key set to null drops that default (vLLM's dict update
// then skips it). Throws base::UsageError naming the key and what it needs.
engine::model::GenerationDefaults apply_generation_override(engine::model::GenerationDefaults defaults,
                                                            std::string_view json);

}  // namespace serverd
