#include "engine/cpu/cpu_set.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace engine::cpu {
namespace {

TEST(AllowedCpus, AscendingAndIncludesTheCpuRunningNow) {
  const auto cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  EXPECT_EQ(std::adjacent_find(cpus.begin(), cpus.end()), cpus.end());
  EXPECT_TRUE(std::binary_search(cpus.begin(), cpus.end(), sched_getcpu()));
}

// A pinned thread may run on its CPU only, and runs there.
TEST(PinThread, RestrictsTheThreadToItsCpu) {
  const int cpu = allowed_cpus().back();
  std::vector<int> after;
  int running_on = -1;
  std::thread([&] {
    pin_thread(pthread_self(), cpu);
    after = allowed_cpus();
    running_on = sched_getcpu();
  }).join();
  EXPECT_EQ(after, std::vector<int>{cpu});
  EXPECT_EQ(running_on, cpu);
}

TEST(PinThread, RefusesACpuOutsideTheMaskNamingIt) {
  std::string message;
  std::thread([&] {
    try {
      pin_thread(pthread_self(), 100000);
    } catch (const std::system_error& e) {
      message = e.what();
    }
  }).join();
  EXPECT_NE(message.find("CPU 100000"), std::string::npos) << message;
}

TEST(CpuListText, AscendingRanges) {
  EXPECT_EQ(cpu_list_text(std::vector<int>{}), "");
  EXPECT_EQ(cpu_list_text(std::vector<int>{5}), "5");
  EXPECT_EQ(cpu_list_text(std::vector<int>{11, 0, 1, 2, 3, 8, 10}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text(std::vector<int>{0, 2, 4}), "0,2,4");
}

}  // namespace
}  // namespace engine::cpu
