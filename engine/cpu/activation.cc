#include "engine/cpu/activation.h"

#include "engine/cpu/kernels.h"
#include "engine/cpu/simd_levels.h"

namespace engine::cpu {

void silu_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float* out) {
  const kernels::SiluMulFn kernel = active_table().silu_mul;
  pool.parallel_for(n, std::size_t{1} << 14, [&](std::size_t begin, std::size_t end) {
    kernel(gate + begin, up + begin, end - begin, out + begin);
  });
}

}  // namespace engine::cpu
