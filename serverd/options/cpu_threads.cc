#include "serverd/options/cpu_threads.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string_view>
#include <unordered_set>

#include "base/flags.h"
#include "engine/cpu/cpu_set.h"

namespace serverd {

namespace {

using base::UsageError;

constexpr std::string_view kBind = "VLLM_CPU_OMP_THREADS_BIND";
constexpr std::string_view kReserved = "VLLM_CPU_NUM_OF_RESERVED_CPU";
constexpr std::string_view kOmpThreads = "OMP_NUM_THREADS";

std::string setting(std::string_view name, std::string_view value) {
  return std::string(name) + "='" + std::string(value) + "'";
}

// Digits only, at most `max`; nullopt otherwise.
std::optional<std::uint64_t> whole_number(std::string_view text, std::uint64_t max) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n > max) return std::nullopt;
  return n;
}

// "0-3,8" into 0, 1, 2, 3, 8 in the order written.
std::vector<int> parse_cpu_list(std::string_view list, std::span<const int> allowed) {
  const auto refuse = [&](const std::string& why) {
    return UsageError(setting(kBind, list) + ": " + why +
                      "; it takes auto, nobind, or CPU ids and ranges separated by commas (e.g. 0-31 or 0,2,4-7)");
  };
  std::vector<int> cpus;
  std::unordered_set<int> seen;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view item = list.substr(at, comma - at);
    const std::size_t dash = item.find('-');
    const auto first = whole_number(item.substr(0, dash), 1 << 20);
    const auto last = dash == std::string_view::npos ? first : whole_number(item.substr(dash + 1), 1 << 20);
    if (!first || !last) throw refuse("'" + std::string(item) + "' is not a CPU id or a range of them");
    if (*last < *first) throw refuse("the range '" + std::string(item) + "' runs backwards");
    for (auto cpu = static_cast<int>(*first); cpu <= static_cast<int>(*last); ++cpu) {
      if (!seen.insert(cpu).second) throw refuse("CPU " + std::to_string(cpu) + " is listed twice");
      cpus.push_back(cpu);
    }
    at = comma + 1;
  }
  std::vector<int> outside;
  for (const int cpu : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) outside.push_back(cpu);
  }
  if (!outside.empty()) {
    throw UsageError(setting(kBind, list) + (outside.size() == 1 ? ": CPU " : ": CPUs ") +
                     engine::cpu::cpu_list_text(outside) + (outside.size() == 1 ? " is" : " are") +
                     " not among the CPUs this process may run on (" + engine::cpu::cpu_list_text(allowed) +
                     "); list only those");
  }
  return cpus;
}

}  // namespace

CpuThreads cpu_threads_from_env(const std::optional<std::string>& bind, const std::optional<std::string>& reserved,
                                const std::optional<std::string>& omp_num_threads, std::span<const int> allowed_cpus) {
  const std::string mode = bind && !bind->empty() ? *bind : "auto";
  std::uint64_t reserve = 0;
  if (reserved && !reserved->empty()) {
    const auto n = whole_number(*reserved, 1 << 20);
    if (!n) {
      throw UsageError(setting(kReserved, *reserved) +
                       " takes a whole number of CPUs to leave to serverd's other threads (HTTP, scheduler)");
    }
    reserve = *n;
  }
  if (reserve != 0 && mode != "auto") {
    throw UsageError(setting(kReserved, *reserved) + " applies only to " + std::string(kBind) + "=auto, not with " +
                     setting(kBind, mode) +
                     (mode == "nobind" ? "; set OMP_NUM_THREADS to fewer threads instead"
                                       : "; leave the reserved CPUs out of the list instead"));
  }
  CpuThreads out;
  const bool omp_set = omp_num_threads && !omp_num_threads->empty();
  if (omp_set && mode != "nobind") {
    out.note = setting(kOmpThreads, *omp_num_threads) + " is not used: it sets the engine's CPU threads only with " +
               std::string(kBind) + "=nobind (the threads now follow " + setting(kBind, mode) + ")";
  }
  if (mode == "auto") {
    if (reserve >= allowed_cpus.size()) {
      throw UsageError(setting(kReserved, reserved.value_or("0")) +
                       " leaves no CPU for the engine: this process may run on " + std::to_string(allowed_cpus.size()) +
                       " (" + engine::cpu::cpu_list_text(allowed_cpus) + "); reserve fewer than " +
                       std::to_string(allowed_cpus.size()));
    }
    out.threads = allowed_cpus.size() - reserve;
  } else if (mode == "nobind") {
    out.threads = allowed_cpus.size();
    if (omp_set) {
      const auto n = whole_number(*omp_num_threads, 1 << 20);
      if (!n || *n == 0) {
        throw UsageError(setting(kOmpThreads, *omp_num_threads) + " with " + std::string(kBind) +
                         "=nobind takes a whole number of threads, at least 1");
      }
      out.threads = *n;
    }
  } else if (mode.find('|') != std::string::npos) {
    const auto ranks = std::count(mode.begin(), mode.end(), '|') + 1;
    throw UsageError(setting(kBind, mode) + " gives CPU lists for " + std::to_string(ranks) +
                     " tensor-parallel ranks ('|' between them); serverd runs the CPU engine in one process, "
                     "without tensor parallelism, so give one list (e.g. " +
                     mode.substr(0, mode.find('|')) + ")");
  } else {
    out.pinned = parse_cpu_list(mode, allowed_cpus);
    out.threads = out.pinned.size();
  }
  return out;
}

}  // namespace serverd
