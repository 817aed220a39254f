#pragma once

#include <cstddef>
#include <functional>

namespace engine::cpu {

// A fixed set of worker threads that run one data-parallel loop at a time. The calling thread takes part,
// so a pool of N threads starts N - 1 workers. parallel_for is not reentrant and is called from one
// thread at a time (the engine's step loop).
class ThreadPool {
 public:
  explicit ThreadPool(std::size_t threads);  // 0: one per online CPU
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
