#pragma once

// What serverd's flags ask of the engine: the device, the lengths, the KV cache and the threads, as
// Engine::load takes them.

#include "engine/runtime/engine.h"
#include "serverd/options/server_options.h"

namespace serverd {

// The engine options `options` (parsed and checked) describe.
engine::runtime::EngineOptions engine_options(const ServerOptions& options);

}  // namespace serverd
