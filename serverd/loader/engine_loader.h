#pragma once

// The seam between serverd's main and the engine: everything model-specific that main needs to serve, so
// main itself stays a few lines of lifecycle.

#include <functional>
#include <memory>
#include <stop_token>
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
// A stop requested on `stop` while a download runs in the fetchd child stops the child, so the download
// ends (its partial files kept) and load_model throws at once instead of finishing it. Returns nullptr
// when this build has no inference engine. Throws fetchd::FetchError or std::exception.
std::unique_ptr<LoadedModel> load_model(const ServerOptions& options, const std::function<void(std::string)>& phase,
                                        std::stop_token stop = {});

}  // namespace serverd
