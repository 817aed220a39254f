#include "engine/cpu/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_set.h"

namespace engine::cpu {
namespace {

TEST(ThreadPool, Size) {
  EXPECT_EQ(ThreadPool(3).size(), 3u);
  EXPECT_EQ(ThreadPool(1).size(), 1u);
  EXPECT_EQ(ThreadPool(0).size(), allowed_cpus().size());
}

// ThreadPool(0) counts the CPUs the process may run on, not the machine's: a thread restricted to one CPU
// (as a container's cpuset restricts a process) gets a pool of one.
TEST(ThreadPool, DefaultSizeFollowsTheAffinityMask) {
  const int cpu = allowed_cpus().back();
  std::size_t size = 0;
  std::thread([&] {
    pin_thread(pthread_self(), cpu);
    size = ThreadPool(0).size();
  }).join();
  EXPECT_EQ(size, 1u);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnceInGrainAlignedRanges) {
  for (const std::size_t threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (const std::size_t count : {1, 2, 7, 64, 1000, 4099}) {
      for (const std::size_t grain : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> hits(count);
        std::mutex mutex;
        bool ranges_ok = true;
        pool.parallel_for(count, grain, [&](std::size_t begin, std::size_t end) {
          const bool ok = begin < end && end <= count && begin % grain == 0 && (end - begin >= grain || end == count);
          if (!ok) {
            const std::lock_guard lock(mutex);
            ranges_ok = false;
          }
          for (std::size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        EXPECT_TRUE(ranges_ok) << threads << " threads, count " << count << ", grain " << grain;
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(hits[i].load(), 1) << threads << " threads, count " << count << ", grain " << grain << ", i " << i;
        }
      }
    }
  }
}

TEST(ThreadPool, ZeroCountCallsNothing) {
  ThreadPool pool(2);
  bool called = false;
  pool.parallel_for(0, 1, [&](std::size_t, std::size_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, SpreadsOverWorkersAndTheCaller) {
  ThreadPool pool(3);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  // Each range waits until every thread has taken one, so all three threads must take part.
  std::atomic<int> arrived{0};
  pool.parallel_for(3, 1, [&](std::size_t, std::size_t) {
    arrived.fetch_add(1);
    while (arrived.load() < 3) std::this_thread::yield();
    const std::lock_guard lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 1u);
}

TEST(ThreadPool, PropagatesExceptionsAndStaysUsable) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    try {
      pool.parallel_for(100, 1, [&](std::size_t begin, std::size_t end) {
        if (begin <= 57 && 57 < end) throw std::runtime_error("range with 57");
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "range with 57");
    }
    std::atomic<std::size_t> sum{0};
    pool.parallel_for(100, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
    EXPECT_EQ(sum.load(), 4950u);
  }
  // The caller's own single range throws as well.
  EXPECT_THROW(pool.parallel_for(1, 1, [](std::size_t, std::size_t) { throw std::logic_error("inline"); }),
               std::logic_error);
}

TEST(ThreadPool, ManyConsecutiveLoops) {
  ThreadPool pool(3);
  std::vector<std::uint64_t> data(64);
  for (int call = 0; call < 20000; ++call) {
    pool.parallel_for(data.size(), 4, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) data[i] += i + 1;
    });
  }
  for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], 20000 * (i + 1)) << i;
}

// What one thread of a pinned pool saw from inside parallel_for.
struct Seen {
  int cpu = -1;                 // sched_getcpu()
  std::vector<int> may_run_on;  // its own affinity mask
};

// Runs one loop of `pool.size()` ranges in which every range waits for all the others to start, so that each
// thread of the pool (the caller and every worker) takes exactly one, and returns what each thread saw.
std::map<std::thread::id, Seen> one_range_per_thread(ThreadPool& pool) {
  const std::size_t n = pool.size();
  std::mutex mutex;
  std::condition_variable all_arrived;
  std::map<std::thread::id, Seen> seen;
  bool timed_out = false;
  pool.parallel_for(n, 1, [&](std::size_t, std::size_t) {
    Seen here{sched_getcpu(), allowed_cpus()};
    std::unique_lock lock(mutex);
    seen[std::this_thread::get_id()] = std::move(here);
    all_arrived.notify_all();
    // A deadline, not a sleep: the wait ends as soon as the last thread arrives.
    if (!all_arrived.wait_for(lock, std::chrono::seconds(60), [&] { return seen.size() == n; })) timed_out = true;
  });
  EXPECT_FALSE(timed_out) << "not every thread of the pool took a range";
  return seen;
}

// Each thread of a pool given CPUs runs on its own one of them, and only there: the caller on the first.
TEST(ThreadPool, PinnedThreadsRunOnTheCpusGiven) {
  auto cpus = allowed_cpus();
  if (cpus.size() > 4) cpus.resize(4);
  std::reverse(cpus.begin(), cpus.end());  // the caller's CPU is the last allowed one, not where it started
  std::map<std::thread::id, Seen> seen;
  std::thread::id caller;
  // On a thread of its own, so that this test's thread keeps its affinity.
  std::thread([&] {
    caller = std::this_thread::get_id();
    ThreadPool pool(cpus);
    EXPECT_EQ(pool.size(), cpus.size());
    seen = one_range_per_thread(pool);
  }).join();
  ASSERT_EQ(seen.size(), cpus.size());
  std::set<int> used;
  for (const auto& [thread, s] : seen) {
    ASSERT_EQ(s.may_run_on.size(), 1u) << "a thread of a pinned pool may run on " << cpu_list_text(s.may_run_on);
    EXPECT_EQ(s.cpu, s.may_run_on.front());
    used.insert(s.cpu);
  }
  EXPECT_EQ(used, std::set<int>(cpus.begin(), cpus.end()));
  ASSERT_EQ(seen.count(caller), 1u);
  EXPECT_EQ(seen[caller].cpu, cpus.front());
}

TEST(ThreadPool, UnpinnedThreadsKeepTheProcessMask) {
  ThreadPool pool(2);
  for (const auto& [thread, s] : one_range_per_thread(pool)) EXPECT_EQ(s.may_run_on, allowed_cpus());
}

TEST(ThreadPool, RefusesBadCpuLists) {
  EXPECT_THROW(ThreadPool(std::span<const int>{}), std::invalid_argument);
  const int cpu = allowed_cpus().front();
  try {
    ThreadPool pool(std::vector<int>{cpu, cpu});
    FAIL() << "a CPU listed twice was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CPU " + std::to_string(cpu) + " is listed twice"), std::string::npos)
        << e.what();
  }
  try {
    ThreadPool pool(std::vector<int>{100000});
    FAIL() << "a CPU the process may not run on was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CPU 100000 is not one this process may run on (" +
                                         cpu_list_text(allowed_cpus()) + ")"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace engine::cpu
