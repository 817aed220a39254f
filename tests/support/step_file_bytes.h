#pragma once

// How many bytes of a model's files one step reads where they are mapped: the process's mappings of model files
// are emptied (MADV_DONTNEED) and the files dropped from the page cache (written back first, then
// POSIX_FADV_DONTNEED), readahead turned off (MADV_RANDOM: a fault reads its own page and no other, and with
// nothing else cached, fault-around maps nothing more), the step run, and the file's pages back in the page cache
// counted (mincore). A mixture of experts should read the experts its tokens are routed to, not all of them. Used
// by engine-bench (--step-bytes) and the engine's tests. The files must live where the page cache can drop them
// (not tmpfs); each measured step reads its pages from storage.

#include <cstdint>
#include <functional>

namespace testing_support {

struct StepFileBytes {
  std::uint64_t mapped = 0;  // bytes of the model's files the process maps
  std::uint64_t read = 0;    // of those, bytes the step read
};

// Runs `step` with every mapping of a .gguf or .safetensors file in this process cold, and counts. The mappings
// are advised back to MADV_NORMAL after. Throws std::runtime_error where the process maps no such file, a file
// cannot be dropped from the page cache (more than 1% of it stays), or a call fails.
StepFileBytes measure_step_file_bytes(const std::function<void()>& step);

}  // namespace testing_support
