#pragma once

// GPU tests compile wherever nvcc exists; on a machine without a GPU they report themselves skipped and say
// why (no driver, no device) instead of failing.

#include <gtest/gtest.h>

#include <string>

#include "engine/backend/cuda/cuda_devices.h"

namespace testing_support {

// Empty when a GPU can be used; else why not.
inline std::string no_gpu_reason() {
  const auto list = engine::cuda::list_cuda_devices();
  return list.devices.empty() ? "no GPU on this machine: " + list.unavailable_reason : "";
}

}  // namespace testing_support

#define REQUIRE_GPU()                                                        \
  do {                                                                       \
    if (const auto why = ::testing_support::no_gpu_reason(); !why.empty()) { \
      GTEST_SKIP() << why;                                                   \
    }                                                                        \
  } while (0)
