#pragma once

#include <cstddef>
#include <functional>
#include <span>

namespace engine::cpu {

// A fixed set of worker threads that run one data-parallel loop at a time. The calling thread takes part,
// so a pool of N threads starts N - 1 workers. parallel_for is not reentrant and is called from one
// thread at a time (the engine's step loop).
class ThreadPool {
 public:
  // 0: one per CPU this process may run on (allowed_cpus(), not every online CPU). The threads are not
  // pinned: the kernel places them within the process's affinity mask.
  explicit ThreadPool(std::size_t threads);
  // One thread per CPU of `cpus`, each pinned to its own: worker i runs on cpus[i] (i >= 1), and the thread
  // that calls parallel_for is pinned to cpus[0] at its first call (the pool's thread 0; a thread it starts
  // later inherits that). Throws std::invalid_argument for an empty list, a CPU listed twice or one outside
  // allowed_cpus(), and std::system_error when the kernel refuses to pin.
  explicit ThreadPool(std::span<const int> cpus);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t size() const;

  // Calls body(begin, end) over disjoint ranges covering [0, count), each at least `grain` long (except
  // the last), spread over the threads; returns when all are done. An exception in a body is rethrown here.
  // Ranges begin at multiples of `grain`; a loop of at most `grain` runs on the calling thread alone. After
  // a body throws, ranges not yet started are skipped.
  void parallel_for(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

 private:
  struct State;
  State* state_;
};

}  // namespace engine::cpu
