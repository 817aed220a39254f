#include "engine/cpu/simd_levels.h"

#include <cstdio>
#include <cstdlib>
#if defined(ENGINE_CPU_X86)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/matmul.h"

namespace engine::cpu {

namespace {

#if defined(ENGINE_CPU_X86)
// Linux keeps AMX's tile data (8 KiB of state) off until a process asks for it; without the permission the
// first tile instruction kills the process. Asked once; the answer holds for every thread of the process.
bool amx_permitted() {
  static const bool permitted = [] {
    constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  }();
  return permitted;
}
#endif

bool cpu_supports(std::string_view level) {
  if (level == "portable") return true;
#if defined(ENGINE_CPU_X86)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (level == "avx2" || level == "avx2int16") return avx2;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (level == "avx512") return avx512;
  if (level == "avx512bf16") return avx512 && __builtin_cpu_supports("avx512bf16");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni");
  if (level == "avx512vnni") return vnni;
  if (level == "amx") {
    return vnni && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") && amx_permitted();
  }
#endif
  return false;
}

const kernels::Table* table_for(std::string_view level) {
  if (!cpu_supports(level)) return nullptr;
  if (level == "portable") return &kernels::portable_table();
#if defined(ENGINE_CPU_X86)
  if (level == "avx2") return &kernels::avx2_table();
  if (level == "avx2int16") return &kernels::avx2int16_table();
  if (level == "avx512") return &kernels::avx512_table();
  if (level == "avx512bf16") return &kernels::avx512bf16_table();
  if (level == "avx512vnni") return &kernels::avx512vnni_table();
  if (level == "amx") return &kernels::amx_table();
#endif
  return nullptr;
}

constexpr std::string_view kLevelsBestFirst[] = {"amx",       "avx512vnni", "avx512bf16", "avx512",
                                                 "avx2int16", "avx2",       "portable"};

// The best level the CPU runs, unless ENGINE_SIMD names another one it runs.
const kernels::Table& choose_table() {
  if (const char* forced = std::getenv("ENGINE_SIMD"); forced != nullptr && *forced != '\0') {
    if (const auto* table = table_for(forced)) return *table;
    std::fprintf(stderr,
                 "engine: ENGINE_SIMD=%s is not a SIMD level this CPU runs (amx, avx512vnni, avx512bf16, avx512, "
                 "avx2int16, avx2, portable); "
                 "using the best one\n",
                 forced);
  }
  for (const auto level : kLevelsBestFirst) {
    if (const auto* table = table_for(level)) return *table;
  }
  return kernels::portable_table();
}

}  // namespace

const kernels::Table& active_table() {
  static const kernels::Table& table = choose_table();
  return table;
}

const kernels::Table& table_or_throw(std::string_view level) {
  const auto* table = table_for(level);
  if (table == nullptr) throw std::invalid_argument("SIMD level '" + std::string(level) + "' is not available");
  return *table;
}

std::string_view simd_level() {
  return active_table().name;
}

std::vector<std::string_view> supported_simd_levels() {
  std::vector<std::string_view> levels;
  for (const auto level : kLevelsBestFirst) {
    if (table_for(level) != nullptr) levels.push_back(level);
  }
  return levels;
}

}  // namespace engine::cpu
