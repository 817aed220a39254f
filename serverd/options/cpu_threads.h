#pragma once

// vLLM's CPU thread settings, read the way vLLM reads them, into the engine's CPU thread pool:
// VLLM_CPU_OMP_THREADS_BIND (auto, nobind, or a CPU list), VLLM_CPU_NUM_OF_RESERVED_CPU (auto only) and,
// with nobind, OMP_NUM_THREADS.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace serverd {

struct CpuThreads {
  std::size_t threads = 0;          // the engine's CPU threads (never 0 here)
  std::vector<int> pinned;          // the CPU of each thread, when VLLM_CPU_OMP_THREADS_BIND lists them; else empty
  std::optional<std::string> note;  // a variable set but not used in this mode (OMP_NUM_THREADS outside nobind)
};

// `bind`, `reserved` and `omp_num_threads` are the variables' values (nullopt: unset); `allowed_cpus` the CPUs
// the process may run on, ascending (engine::cpu::allowed_cpus()). An unset or empty variable means its
// default: bind auto, no CPU reserved.
//   auto:   one thread per allowed CPU but the last `reserved`, not pinned (the kernel keeps them in the mask).
//   nobind: OMP_NUM_THREADS threads (a whole number at least 1), else one per allowed CPU; not pinned.
//   a list: "0-31", "0,2,4-7" (ids and ascending ranges, comma-separated): one thread pinned to each CPU,
//           every one of them allowed and none twice. "|" between lists (one per tensor-parallel rank in vLLM)
//           is refused: the CPU engine runs in one process.
// Throws base::UsageError naming the variable, its value and what it takes.
CpuThreads cpu_threads_from_env(const std::optional<std::string>& bind, const std::optional<std::string>& reserved,
                                const std::optional<std::string>& omp_num_threads, std::span<const int> allowed_cpus);

}  // namespace serverd
