#pragma once

// Device helpers that elementwise_kernels.cu and attention_kernels.cu share, for .cu files only. Internal
// linkage (an unnamed namespace): each unit gets its own copy, as when the kernels shared one file.

#include <cstddef>

#include "engine/backend/cuda/kernel_types.h"

namespace engine::cuda {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Elements from the start of a block to layer `layer`, kind (0 key, 1 value), head `head`, position 0.
__device__ __forceinline__ std::size_t cache_offset(const KvCache& c, int layer, int kind, int head) {
  return (((static_cast<std::size_t>(layer) * 2 + kind) * c.num_kv_heads + head) * c.block_size) * c.head_dim;
}

__device__ __forceinline__ std::size_t block_elements(const KvCache& c) {
  return static_cast<std::size_t>(c.num_layers) * 2 * c.num_kv_heads * c.block_size * c.head_dim;
}

}  // namespace
}  // namespace engine::cuda
