#include "engine/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/cpu/cpu_set.h"

namespace engine::cpu {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// How long an idle thread keeps polling before it sleeps. Decode calls parallel_for every few
// microseconds, so polling saves a futex wake-up on nearly every call; past it, idle threads cost nothing.
// After the first few hundred polls it yields between polls, so that on a busy (oversubscribed) machine
// the thread it waits for can have the core.
constexpr auto kPollFor = std::chrono::microseconds(300);
constexpr unsigned kPurePolls = 512;

// Waits until `value` differs from `old` and returns the new value: polls, then blocks in atomic::wait.
std::uint32_t await_change(const std::atomic<std::uint32_t>& value, std::uint32_t old) {
  const auto deadline = std::chrono::steady_clock::now() + kPollFor;
  for (unsigned i = 1;; ++i) {
    const std::uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if (i < kPurePolls) {
      cpu_relax();
    } else {
      std::this_thread::yield();
      if (i % 16 == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    const std::uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

// The join word of a loop: generation (high 32 bits), a closed flag, and how many workers joined.
constexpr std::uint64_t kClosed = std::uint64_t{1} << 31;
constexpr std::uint64_t kJoinedMask = kClosed - 1;
constexpr std::uint64_t join_word(std::uint32_t generation) {
  return std::uint64_t{generation} << 32;
}
constexpr std::uint32_t generation_of(std::uint64_t word) {
  return static_cast<std::uint32_t>(word >> 32);
}

}  // namespace

// A loop is published by bumping `generation`. Workers that wake while it is still open join it (one CAS
// on `join`) and then claim ranges; once every range is claimed, the caller closes it and waits only for
// the workers that joined. A worker that is slow to wake (descheduled on a busy machine) never holds the
// caller up: it finds the loop closed and goes back to sleep, having read nothing of it.
struct ThreadPool::State {
  std::size_t threads = 1;
  std::vector<std::thread> workers;
  std::vector<int> cpus;            // thread i's CPU when pinned; empty: not pinned
  std::thread::id pinned_caller{};  // the calling thread once parallel_for has pinned it to cpus[0]

  // The current loop. Written by the caller only while no worker has joined, published by the release
  // store of `join`, and read only by workers that joined (their CAS acquires it).
  const std::function<void(std::size_t, std::size_t)>* body = nullptr;
  std::size_t count = 0;
  std::size_t chunk = 0;

  std::atomic<std::uint64_t> join{0};
  std::atomic<std::uint32_t> generation{0};  // the same generation as `join`, for waiting on
  std::atomic<std::uint32_t> finished{0};    // joined workers done with the current loop
  std::atomic<std::size_t> next{0};          // start of the next unclaimed range
  std::atomic<bool> failed{false};
  std::atomic<bool> stop{false};

  std::mutex error_mutex;
  std::exception_ptr error;

  // Claims ranges until none are left (or a body has thrown).
  void run_ranges() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const std::size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= count) return;
      const std::size_t end = std::min(count, begin + chunk);
      try {
        (*body)(begin, end);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  }

  bool try_join(std::uint32_t gen) {
    std::uint64_t word = join.load(std::memory_order_acquire);
    while (generation_of(word) == gen && (word & kClosed) == 0) {
      if (join.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return true;
      }
    }
    return false;
  }

  void worker_loop() {
    std::uint32_t seen = 0;
    for (;;) {
      seen = await_change(generation, seen);
      if (stop.load(std::memory_order_acquire)) return;
      if (!try_join(seen)) continue;
      run_ranges();
      finished.fetch_add(1, std::memory_order_release);
      finished.notify_one();
    }
  }

  void publish(std::uint32_t gen) {
    join.store(join_word(gen), std::memory_order_release);
    generation.store(gen, std::memory_order_release);
    generation.notify_all();
  }

  void stop_workers() {
    stop.store(true, std::memory_order_release);
    publish(generation.load() + 1);
    for (auto& w : workers) w.join();
  }

  // Starts the workers (pinned to cpus[1..] when there are cpus); on failure stops those already started.
  void start_workers() {
    try {
      workers.reserve(threads - 1);
      for (std::size_t i = 1; i < threads; ++i) {
        workers.emplace_back([this] { worker_loop(); });
        if (!cpus.empty()) pin_thread(workers.back().native_handle(), cpus[i]);
      }
    } catch (...) {
      stop_workers();
      throw;
    }
  }
};

ThreadPool::ThreadPool(std::size_t threads) : state_(new State) {
  try {
    state_->threads = threads != 0 ? threads : std::max<std::size_t>(1, allowed_cpus().size());
    state_->start_workers();
  } catch (...) {
    delete state_;
    throw;
  }
}

ThreadPool::ThreadPool(std::span<const int> cpus) : state_(new State) {
  try {
    if (cpus.empty()) throw std::invalid_argument("a pinned thread pool needs at least one CPU");
    std::unordered_set<int> seen;
    for (const int cpu : cpus) {
      if (!seen.insert(cpu).second) {
        throw std::invalid_argument("CPU " + std::to_string(cpu) + " is listed twice for the thread pool (" +
                                    cpu_list_text(cpus) + "); give each CPU once");
      }
    }
    const auto allowed = allowed_cpus();
    for (const int cpu : cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
        throw std::invalid_argument("CPU " + std::to_string(cpu) + " is not one this process may run on (" +
                                    cpu_list_text(allowed) + ")");
      }
    }
    state_->cpus.assign(cpus.begin(), cpus.end());
    state_->threads = cpus.size();
    state_->start_workers();
  } catch (...) {
    delete state_;
    throw;
  }
}

ThreadPool::~ThreadPool() {
  state_->stop_workers();
  delete state_;
}

std::size_t ThreadPool::size() const {
  return state_->threads;
}

void ThreadPool::parallel_for(std::size_t count, std::size_t grain,
                              const std::function<void(std::size_t, std::size_t)>& body) {
  if (count == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  State& s = *state_;
  if (!s.cpus.empty() && s.pinned_caller != std::this_thread::get_id()) {
    pin_thread(pthread_self(), s.cpus[0]);
    s.pinned_caller = std::this_thread::get_id();
  }
  if (s.workers.empty() || count <= grain) {
    body(0, count);  // one range: waking workers would cost more than it saves
    return;
  }
  // Ranges are whole multiples of `grain`; about four per thread lets threads that finish early take more
  // without paying an atomic per grain on long loops.
  const std::size_t grains = (count + grain - 1) / grain;
  const std::size_t grains_per_range = std::max<std::size_t>(1, grains / (s.threads * 4));
  s.body = &body;
  s.count = count;
  s.chunk = grains_per_range * grain;
  s.next.store(0, std::memory_order_relaxed);
  s.failed.store(false, std::memory_order_relaxed);
  s.error = nullptr;
  s.finished.store(0, std::memory_order_relaxed);
  s.publish(s.generation.load(std::memory_order_relaxed) + 1);

  s.run_ranges();

  // Every range is claimed: close the loop to latecomers and wait for the workers that joined it.
  const auto joined = static_cast<std::uint32_t>(s.join.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask);
  for (std::uint32_t done = s.finished.load(std::memory_order_acquire); done != joined;) {
    done = await_change(s.finished, done);
  }
  s.body = nullptr;
  if (s.error) std::rethrow_exception(s.error);
}

}  // namespace engine::cpu
