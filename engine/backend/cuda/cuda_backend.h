#pragma once

// The CUDA backend: weights uploaded once as stored, the paged KV cache in device memory, cuBLAS GEMMs,
// fused kernels, and decode steps replayed as CUDA graphs. This header needs no CUDA headers.

#include <memory>

#include "engine/backend/backend.h"

namespace engine::backend {

struct CudaBackendOptions {
  int device = 0;
  bool enforce_eager = false;         // no CUDA graphs: every kernel launched as the graph asks for it
  bool tensor_core_attention = true;  // bf16 caches: prefill attention on the tensor cores
  // Compute capability 9.0 and later: each kernel may start while the one before it finishes (programmatic
  // dependent launch), e.g. a GEMV streams its weights during the previous kernel's tail.
  bool overlap_kernels = true;
};

// Throws std::runtime_error naming the device and CUDA's words when it cannot be used.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace engine::backend
