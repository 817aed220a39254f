#include "serverd/loader/generation_settings.h"

#include <filesystem>

#include "base/flags.h"
#include "serverd/options/generation_override.h"

namespace serverd {

engine::model::GenerationDefaults resolve_generation_defaults(const ServerOptions& options,
                                                              const engine::model::GenerationDefaults& model) {
  engine::model::GenerationDefaults defaults;
  if (options.generation_config == "auto") {
    defaults = model;
  } else if (options.generation_config != "vllm") {
    const std::filesystem::path file = std::filesystem::path(options.generation_config) / "generation_config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      throw base::UsageError("--generation-config " + options.generation_config + ": there is no " + file.string() +
                             "; give auto, vllm, or a directory holding generation_config.json");
    }
    defaults = engine::model::read_generation_config(file);
  }
  if (!options.override_generation_config.empty()) {
    defaults = apply_generation_override(std::move(defaults), options.override_generation_config);
  }
  return defaults;
}

}  // namespace serverd
