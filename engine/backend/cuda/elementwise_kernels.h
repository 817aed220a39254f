#pragma once

// Launchers for the CUDA backend's activation kernels other than attention (norms, rotary embedding, the KV
// cache store, element-wise ops). Activations are f32; the KV cache is f32 or bf16. Every launcher checks
// its launch; launched on an overlapping Stream, each kernel waits for the one before it (launch.h).

#include <cuda_runtime.h>

#include <cstddef>

#include "engine/backend/cuda/kernel_types.h"
#include "engine/backend/cuda/launch.h"

namespace engine::cuda {

// out = x / rms(x) * w over segments of `width` (rows, or heads of a row); out may be x.
void rms_norm(const float* x, const float* w, float eps, float* out, std::size_t segments, int width, Stream stream);
// Optional per-head norms of q and k, then rotation of every head at its token's position. inv_freq is
// head_dim / 2 doubles in device memory. With v (else null), k and v then go into the cache's layer as
// store_kv stores them, in the same kernel.
void qk_norm_rope(float* q, float* k, const float* v, int q_heads, int k_heads, int head_dim, const float* q_norm,
                  const float* k_norm, float eps, const double* inv_freq, bool interleaved, const KvCache& cache,
                  int layer, const StepMeta& meta, Stream stream);
// Stores the step's keys and values (rows of kv_heads * head_dim) into the cache's layer.
void store_kv(const KvCache& cache, int layer, const float* k, const float* v, const StepMeta& meta, Stream stream);

void silu_mul(const float* gate, const float* up, float* out, std::size_t n, Stream stream);
void add_inplace(float* x, const float* y, std::size_t n, Stream stream);
// out[r] += bias for every row of `cols`.
void add_bias(float* out, const float* bias, std::size_t rows, std::size_t cols, Stream stream);
void gather_logit_rows(const float* x, std::size_t cols, float* out, const StepMeta& meta, Stream stream);
// f32 to bf16 or f16, element-wise (the GEMM's activation operand).
void to_bf16(const float* x, void* out, std::size_t n, Stream stream);
void to_f16(const float* x, void* out, std::size_t n, Stream stream);

}  // namespace engine::cuda
