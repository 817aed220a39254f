#include "engine/cpu/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <system_error>

namespace engine::cpu {

namespace {

// A dynamically sized cpu_set_t: glibc's fixed one holds 1024 CPUs, fewer than the largest machines have.
struct CpuSet {
  struct Free {
    void operator()(cpu_set_t* set) const { CPU_FREE(set); }
  };
  explicit CpuSet(int cpus) : bytes(CPU_ALLOC_SIZE(cpus)), set(CPU_ALLOC(cpus)) {
    if (!set) throw std::system_error(ENOMEM, std::generic_category(), "allocating a CPU set");
    CPU_ZERO_S(bytes, set.get());
  }
  std::size_t bytes;
  std::unique_ptr<cpu_set_t, Free> set;
};

}  // namespace

std::vector<int> allowed_cpus() {
  // The kernel refuses (EINVAL) a mask smaller than its own CPU count; grow until it fits.
  for (int count = 1024;; count *= 2) {
    CpuSet mask(count);
    if (sched_getaffinity(0, mask.bytes, mask.set.get()) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < count; ++cpu) {
        if (CPU_ISSET_S(cpu, mask.bytes, mask.set.get())) cpus.push_back(cpu);
      }
      return cpus;
    }
    if (errno != EINVAL || count >= (1 << 20)) {
      throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
    }
  }
}

void pin_thread(pthread_t thread, int cpu) {
  if (cpu < 0)
    throw std::system_error(EINVAL, std::generic_category(), "pinning a thread to CPU " + std::to_string(cpu));
  CpuSet mask(std::max(cpu + 1, 1024));
  CPU_SET_S(static_cast<std::size_t>(cpu), mask.bytes, mask.set.get());
  if (const int error = pthread_setaffinity_np(thread, mask.bytes, mask.set.get()); error != 0) {
    throw std::system_error(error, std::generic_category(), "pinning a thread to CPU " + std::to_string(cpu));
  }
}

std::string cpu_list_text(std::span<const int> cpus) {
  std::vector<int> sorted(cpus.begin(), cpus.end());
  std::sort(sorted.begin(), sorted.end());
  std::string text;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(sorted[i]);
    if (j > i) text += '-' + std::to_string(sorted[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace engine::cpu
