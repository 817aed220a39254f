#include "serverd/options/cpu_threads.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "base/flags.h"

namespace serverd {
namespace {

const std::vector<int> kEightCpus = {0, 1, 2, 3, 4, 5, 6, 7};
constexpr std::nullopt_t kUnset = std::nullopt;

CpuThreads from(std::optional<std::string> bind, std::optional<std::string> reserved = kUnset,
                std::optional<std::string> omp = kUnset, const std::vector<int>& allowed = kEightCpus) {
  return cpu_threads_from_env(bind, reserved, omp, allowed);
}

// The refusal's message, or "" when the settings were taken.
std::string refusal(std::optional<std::string> bind, std::optional<std::string> reserved = kUnset,
                    std::optional<std::string> omp = kUnset, const std::vector<int>& allowed = kEightCpus) {
  try {
    from(bind, reserved, omp, allowed);
  } catch (const base::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CpuThreads, AutoIsOneUnpinnedThreadPerAllowedCpu) {
  for (const auto& bind :
       {std::optional<std::string>{}, std::optional<std::string>{""}, std::optional<std::string>{"auto"}}) {
    const auto t = from(bind);
    EXPECT_EQ(t.threads, 8u);
    EXPECT_TRUE(t.pinned.empty());
    EXPECT_FALSE(t.note);
  }
  // The process's mask, not the machine's CPUs: a cpuset of 2.
  EXPECT_EQ(from("auto", kUnset, kUnset, {4, 9}).threads, 2u);
}

TEST(CpuThreads, AutoLeavesTheReservedCpus) {
  EXPECT_EQ(from("auto", "2").threads, 6u);
  EXPECT_EQ(from(kUnset, "1").threads, 7u);
  EXPECT_EQ(from(kUnset, "0").threads, 8u);
  EXPECT_EQ(from(kUnset, "").threads, 8u);
  EXPECT_EQ(refusal(kUnset, "8"),
            "VLLM_CPU_NUM_OF_RESERVED_CPU='8' leaves no CPU for the engine: this process may run on 8 (0-7); "
            "reserve fewer than 8");
  EXPECT_EQ(refusal(kUnset, "-1"),
            "VLLM_CPU_NUM_OF_RESERVED_CPU='-1' takes a whole number of CPUs to leave to serverd's other threads "
            "(HTTP, scheduler)");
  EXPECT_NE(refusal(kUnset, "two"), "");
  EXPECT_NE(refusal(kUnset, "1 "), "");
}

TEST(CpuThreads, AListPinsOneThreadPerCpuInTheOrderWritten) {
  auto t = from("0-3");
  EXPECT_EQ(t.threads, 4u);
  EXPECT_EQ(t.pinned, (std::vector<int>{0, 1, 2, 3}));
  t = from("6,0,2-4");
  EXPECT_EQ(t.threads, 5u);
  EXPECT_EQ(t.pinned, (std::vector<int>{6, 0, 2, 3, 4}));
  EXPECT_EQ(from("5").pinned, std::vector<int>{5});
  EXPECT_EQ(from("3-3").pinned, std::vector<int>{3});
}

TEST(CpuThreads, RefusesMalformedListsNamingTheVariable) {
  const std::string takes = "; it takes auto, nobind, or CPU ids and ranges separated by commas (e.g. 0-31 or 0,2,4-7)";
  EXPECT_EQ(refusal("all"), "VLLM_CPU_OMP_THREADS_BIND='all': 'all' is not a CPU id or a range of them" + takes);
  EXPECT_EQ(refusal("0-3,"), "VLLM_CPU_OMP_THREADS_BIND='0-3,': '' is not a CPU id or a range of them" + takes);
  EXPECT_EQ(refusal("3-1"), "VLLM_CPU_OMP_THREADS_BIND='3-1': the range '3-1' runs backwards" + takes);
  EXPECT_EQ(refusal("0-3,2"), "VLLM_CPU_OMP_THREADS_BIND='0-3,2': CPU 2 is listed twice" + takes);
  EXPECT_NE(refusal("0 - 3"), "");
  EXPECT_NE(refusal("-3"), "");
  EXPECT_NE(refusal("0-"), "");
  EXPECT_NE(refusal("Auto"), "");
}

TEST(CpuThreads, RefusesCpusTheProcessMayNotRunOn) {
  EXPECT_EQ(refusal("0-9"),
            "VLLM_CPU_OMP_THREADS_BIND='0-9': CPUs 8-9 are not among the CPUs this process may run on (0-7); "
            "list only those");
  EXPECT_EQ(refusal("0,1", kUnset, kUnset, {1, 2}),
            "VLLM_CPU_OMP_THREADS_BIND='0,1': CPU 0 is not among the CPUs this process may run on (1-2); "
            "list only those");
}

TEST(CpuThreads, RefusesOneListPerTensorParallelRank) {
  EXPECT_EQ(refusal("0-3|4-7"),
            "VLLM_CPU_OMP_THREADS_BIND='0-3|4-7' gives CPU lists for 2 tensor-parallel ranks ('|' between them); "
            "serverd runs the CPU engine in one process, without tensor parallelism, so give one list (e.g. 0-3)");
}

TEST(CpuThreads, NobindTakesOmpNumThreads) {
  auto t = from("nobind");
  EXPECT_EQ(t.threads, 8u);
  EXPECT_TRUE(t.pinned.empty());
  t = from("nobind", kUnset, "3");
  EXPECT_EQ(t.threads, 3u);
  EXPECT_TRUE(t.pinned.empty());
  EXPECT_FALSE(t.note);
  // More threads than CPUs is the user's choice, as OpenMP's.
  EXPECT_EQ(from("nobind", kUnset, "16").threads, 16u);
  EXPECT_EQ(refusal("nobind", kUnset, "0"),
            "OMP_NUM_THREADS='0' with VLLM_CPU_OMP_THREADS_BIND=nobind takes a whole number of threads, at least 1");
  EXPECT_NE(refusal("nobind", kUnset, "4,2"), "");
}

TEST(CpuThreads, ReservedCpusOnlyWithAuto) {
  EXPECT_EQ(refusal("0-3", "1"),
            "VLLM_CPU_NUM_OF_RESERVED_CPU='1' applies only to VLLM_CPU_OMP_THREADS_BIND=auto, not with "
            "VLLM_CPU_OMP_THREADS_BIND='0-3'; leave the reserved CPUs out of the list instead");
  EXPECT_EQ(refusal("nobind", "1"),
            "VLLM_CPU_NUM_OF_RESERVED_CPU='1' applies only to VLLM_CPU_OMP_THREADS_BIND=auto, not with "
            "VLLM_CPU_OMP_THREADS_BIND='nobind'; set OMP_NUM_THREADS to fewer threads instead");
  EXPECT_EQ(from("0-3", "0").threads, 4u);  // reserving none is no setting to refuse
}

TEST(CpuThreads, OmpNumThreadsOutsideNobindIsANote) {
  const auto t = from("auto", kUnset, "1");
  EXPECT_EQ(t.threads, 8u);
  ASSERT_TRUE(t.note);
  EXPECT_EQ(*t.note,
            "OMP_NUM_THREADS='1' is not used: it sets the engine's CPU threads only with "
            "VLLM_CPU_OMP_THREADS_BIND=nobind (the threads now follow VLLM_CPU_OMP_THREADS_BIND='auto')");
}

}  // namespace
}  // namespace serverd
