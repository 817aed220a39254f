#pragma once

// The CPUs a process may run on, and pinning a thread to one of them (Linux affinity).

#include <pthread.h>

#include <span>
#include <string>
#include <vector>

namespace engine::cpu {

// The CPUs the calling thread may run on, ascending: its affinity mask (sched_getaffinity), which is what a
// container's cpuset (Kubernetes' static CPU policy, docker --cpuset-cpus), taskset and numactl -C leave it.
// Unlike the number of online CPUs, it never counts CPUs the process cannot use.
std::vector<int> allowed_cpus();

// Restricts `thread` to run on `cpu` only. Throws std::system_error naming the CPU when the kernel refuses
// (a CPU outside the process's cpuset, or one that does not exist).
void pin_thread(pthread_t thread, int cpu);

// "0-3,8,10-11": CPU ids as ascending ranges, for messages (the spelling taskset and cpusets use).
std::string cpu_list_text(std::span<const int> cpus);

}  // namespace engine::cpu
