#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace engine::cuda {

struct CudaDevice {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;
};

struct CudaDeviceList {
  std::vector<CudaDevice> devices;
  std::string unavailable_reason;  // why there are none (no driver, no device), empty when some exist
};

// Lists the GPUs this process can use. Never throws: a machine without a driver simply has none.
CudaDeviceList list_cuda_devices();

}  // namespace engine::cuda
