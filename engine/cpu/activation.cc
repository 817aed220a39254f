#include "engine/cpu/activation.h"

#include "engine/cpu/kernels.h"
#include "engine/cpu/simd_levels.h"

namespace engine::cpu {

namespace {

void spread(kernels::GatedMulFn kernel, ThreadPool& pool, const float* gate, const float* up, std::size_t n,
            float* out) {
  pool.parallel_for(n, std::size_t{1} << 14, [&](std::size_t begin, std::size_t end) {
    kernel(gate + begin, up + begin, end - begin, out + begin);
  });
}

}  // namespace

void silu_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float* out) {
  spread(active_table().silu_mul, pool, gate, up, n, out);
}

void gelu_tanh_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float* out) {
  spread(active_table().gelu_tanh_mul, pool, gate, up, n, out);
}

void clamped_swiglu_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float alpha, float limit,
                        float* out) {
  const kernels::ClampedGatedMulFn kernel = active_table().clamped_swiglu_mul;
  pool.parallel_for(n, std::size_t{1} << 14, [&](std::size_t begin, std::size_t end) {
    kernel(gate + begin, up + begin, end - begin, alpha, limit, out + begin);
  });
}

}  // namespace engine::cpu
