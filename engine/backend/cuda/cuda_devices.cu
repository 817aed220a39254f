#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_devices.h"

namespace engine::cuda {

CudaDeviceList list_cuda_devices() {
  CudaDeviceList list;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    list.unavailable_reason =
        std::string("CUDA reports ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return list;
  }
  if (count == 0) list.unavailable_reason = "CUDA reports no devices";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    CudaDevice device;
    device.index = i;
    device.name = prop.name;
    device.compute_major = prop.major;
    device.compute_minor = prop.minor;
    device.total_memory = prop.totalGlobalMem;
    if (cudaSetDevice(i) == cudaSuccess) {
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) device.free_memory = free_bytes;
    }
    list.devices.push_back(device);
  }
  return list;
}

}  // namespace engine::cuda
