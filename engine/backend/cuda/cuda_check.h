#pragma once

// Every CUDA runtime and cuBLAS call goes through these: a failure throws std::runtime_error naming the
// call, where it was made and what CUDA said, instead of leaving a sticky error for a later call to trip on.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace engine::cuda {

[[noreturn]] inline void throw_cuda_error(const char* what, cudaError_t status, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA: ") + what + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

[[noreturn]] inline void throw_cublas_error(const char* what, cublasStatus_t status, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS: ") + what + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace engine::cuda

#define CUDA_CHECK(call)                                                               \
  do {                                                                                 \
    const cudaError_t cuda_check_status_ = (call);                                     \
    if (cuda_check_status_ != cudaSuccess) {                                           \
      ::engine::cuda::throw_cuda_error(#call, cuda_check_status_, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// After a kernel launch: launch configuration errors surface here, not at the next synchronisation.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                 \
  do {                                                                                     \
    const cublasStatus_t cublas_check_status_ = (call);                                    \
    if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS) {                                   \
      ::engine::cuda::throw_cublas_error(#call, cublas_check_status_, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)
