#pragma once

// The seam between serverd's main and the engine: everything model-specific that main needs to serve, so
// main itself stays a few lines of lifecycle.

#include <functional>
#include <memory>
#include <string>

#include "serverd/api/generator.h"
#include "serverd/options/server_options.h"

namespace serverd {

// A model loaded into the engine, with the scheduler that generates for it. Owns what info() points to.
class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual const api::ModelInfo& info() const = 0;
  virtual api::Generator& generator() = 0;
};

// Resolves --model (through fetchd for hub names), loads tokenizer, chat template, generation config and
// weights, and starts the scheduler. `phase` reports progress for /health ("downloading", "loading").
// Returns nullptr when this build has no inference engine. Throws fetchd::FetchError or std::exception.
std::unique_ptr<LoadedModel> load_model(const ServerOptions& options, const std::function<void(std::string)>& phase);

}  // namespace serverd
