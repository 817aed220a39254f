#pragma once

// The feed-forward block's elementwise activation at the SIMD level in use (kernels.h's GatedMulFn): a
// 512-token prefill of a 0.6B model takes 45 million of them, too many for a scalar std::exp each.

#include <cstddef>

#include "engine/cpu/thread_pool.h"

namespace engine::cpu {

// out[i] = silu(gate[i]) * up[i] for i < n, spread over `pool` (out may be gate or up).
void silu_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU with GELU's tanh approximation), as silu_mul.
void gelu_tanh_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float* out);
// gpt-oss's clamped SwiGLU: out[i] = (clamp(up[i], -limit, limit) + 1) · g · sigmoid(alpha · g) with
// g = min(gate[i], limit), as silu_mul.
void clamped_swiglu_mul(ThreadPool& pool, const float* gate, const float* up, std::size_t n, float alpha, float limit,
                        float* out);

}  // namespace engine::cpu
