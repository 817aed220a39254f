#include "serverd/loader/engine_options.h"

namespace serverd {

engine::runtime::EngineOptions engine_options(const ServerOptions& options) {
  engine::runtime::EngineOptions eo;
  eo.device = engine::runtime::parse_device(options.device).value_or(engine::runtime::Device::Auto);
  eo.max_model_len = options.max_model_len;
  eo.block_size = options.block_size;
  eo.max_num_batched_tokens = options.max_num_batched_tokens;  // the scheduler's step: what a window group holds
  eo.threads = options.cpu_threads;
  eo.cpus = options.cpu_pinned;
  // The flag's choices are checked when it is read; parse_kv_cache_dtype takes each one it accepts.
  eo.kv_cache_dtype =
      engine::runtime::parse_kv_cache_dtype(options.kv_cache_dtype).value_or(engine::runtime::KvCacheDtype::Auto);
  eo.gpu_memory_utilization = options.gpu_memory_utilization;
  eo.enforce_eager = options.enforce_eager;
  eo.kv_cache_bytes = options.kv_cache_memory_bytes;
  if (options.cpu_kv_cache_bytes != 0) eo.cpu_kv_cache_bytes = options.cpu_kv_cache_bytes;
  return eo;
}

}  // namespace serverd
