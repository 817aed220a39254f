#pragma once

// How the CUDA backend's launchers queue kernels. A decode step is a few hundred short kernels, and on
// Hopper each may be launched as a "programmatic dependent launch": it starts while the kernel before it
// is still finishing, does what needs none of that kernel's results (a GEMV starts streaming its weights),
// then waits for it. Every kernel queued through launch() calls wait_for_prior_kernels() before it reads
// anything an earlier kernel wrote, and writes nothing before it; launched without overlap the wait is a
// no-op, so the same kernels serve plain stream order.

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "engine/backend/cuda/cuda_check.h"

namespace engine::cuda {

// A stream, and whether kernels on it may overlap the kernel before them (compute capability 9.0 and
// later). A bare cudaStream_t converts to plain stream order.
struct Stream {
  Stream(cudaStream_t s) : stream(s) {}  // NOLINT(google-explicit-constructor): plain order is the default
  Stream(cudaStream_t s, bool overlapping) : stream(s), overlap(overlapping) {}
  cudaStream_t stream = nullptr;
  bool overlap = false;
};

// Launches kernel<<<grid, block, shared, stream>>>(args...) and checks the launch.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared, Stream stream, Args&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream.stream;
  config.attrs = stream.overlap ? &overlap : nullptr;
  config.numAttrs = stream.overlap ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

#ifdef __CUDACC__
// Blocks until the kernels queued before this one have finished and their writes are visible.
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next kernel on the stream be launched now (it still waits for this one before reading).
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// The usual start of a kernel: the next may launch, and this one waits for its inputs.
__device__ __forceinline__ void start_after_prior_kernels() {
  allow_next_kernel();
  wait_for_prior_kernels();
}
#endif

}  // namespace engine::cuda
