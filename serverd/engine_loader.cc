#include "serverd/engine_loader.h"

namespace serverd {

// The engine's scheduler is not wired in yet: the integrator replaces this with the real loader.
std::unique_ptr<LoadedModel> load_model(const ServerOptions&, const std::function<void(std::string)>&) {
  return nullptr;
}

}  // namespace serverd
