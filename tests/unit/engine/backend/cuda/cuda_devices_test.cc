#include "engine/backend/cuda/cuda_devices.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace engine::cuda {
namespace {

// Without the NVIDIA device nodes no GPU can be listed, and the reason says why; with them, at least one
// device is listed (an empty list there is a broken driver or runtime, and says why), each with a name
// and memory.
TEST(CudaDevices, ListsWhatTheMachineHas) {
  const auto list = list_cuda_devices();
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    EXPECT_TRUE(list.devices.empty());
    EXPECT_FALSE(list.unavailable_reason.empty());
    return;
  }
  ASSERT_FALSE(list.devices.empty()) << "/dev/nvidiactl exists but no GPU is listed: " << list.unavailable_reason;
  for (const auto& d : list.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_GE(d.compute_major, 5);
  }
}

}  // namespace
}  // namespace engine::cuda
