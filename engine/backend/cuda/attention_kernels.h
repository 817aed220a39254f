#pragma once

// Launchers for the CUDA backend's paged attention kernels: decode attention over context partitions and
// prefill attention over tiles of queries. Activations are f32; the KV cache is f32 or bf16. Every launcher
// checks its launch; launched on an overlapping Stream, each kernel waits for the one before it (launch.h).

#include <cuda_runtime.h>

#include "engine/backend/cuda/kernel_types.h"
#include "engine/backend/cuda/launch.h"

namespace engine::cuda {

inline constexpr int kPrefillTile = 32;  // queries per prefill attention tile

bool attention_head_dim_supported(int head_dim);

// Causal attention of every token over its sequence's cached positions, one token at a time, the context
// split into `splits` partitions of `partition` positions. With splits > 1 they are combined through
// `partials` (num_tokens * q_heads * splits * (head_dim + 2) floats) by the last partition to finish, which
// `arrivals` (num_tokens * q_heads counters, zero before the launch and zero again after it) tells.
void decode_attention(const KvCache& cache, int layer, const float* q, int q_heads, float scale, float* out, int splits,
                      int partition, float* partials, unsigned* arrivals, const StepMeta& meta, Stream stream);
// The same function over prefill tiles (kPrefillTile queries of one sequence share each key load). With
// `tensor_cores` and a bf16 cache, Q·Kᵀ and P·V are bf16 tensor-core products (f32 accumulation); else
// everything is f32 on the CUDA cores.
void prefill_attention(const KvCache& cache, int layer, const float* q, int q_heads, float scale, float* out,
                       const StepMeta& meta, bool tensor_cores, Stream stream);

}  // namespace engine::cuda
