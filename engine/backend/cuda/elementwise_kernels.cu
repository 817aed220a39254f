#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "engine/backend/cuda/device_helpers.h"
#include "engine/backend/cuda/elementwise_kernels.h"
#include "engine/backend/cuda/launch.h"

namespace engine::cuda {

namespace {

// Sum over the block (any multiple of 32 threads up to 1024); every thread gets the total.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    float s = lane < warps ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  const float result = total;
  __syncthreads();  // partial and total may be reused by a later call
  return result;
}

int norm_threads(int width) {
  return width >= 1024 ? 256 : width >= 256 ? 128 : 64;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, float* out, int width) {
  start_after_prior_kernels();
  const float* in = x + blockIdx.x * static_cast<std::size_t>(width);
  float* o = out + blockIdx.x * static_cast<std::size_t>(width);
  float sum = 0;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sum += in[i] * in[i];
  const float inv = rsqrtf(block_sum(sum) / static_cast<float>(width) + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x) o[i] = in[i] * inv * w[i];
}

template <typename T>
__device__ __forceinline__ void store_f32(T* p, float v) {
  if constexpr (std::is_same_v<T, float>) {
    *p = v;
  } else {
    *p = __float2bfloat16_rn(v);
  }
}

// Where layer `layer`'s key (kind 0) or value (kind 1) of kv head `head` goes for the token at `slot`.
template <typename T>
__device__ __forceinline__ T* cache_row(const KvCache& c, int layer, int kind, int head, int slot) {
  const int block = slot / c.block_size;
  const int offset = slot % c.block_size;
  return static_cast<T*>(c.data) + block * block_elements(c) + cache_offset(c, layer, kind, head) +
         static_cast<std::size_t>(offset) * c.head_dim;
}

template <typename T>
__global__ void store_kv_kernel(KvCache cache, int layer, const float* k, const float* v, const std::int32_t* slots) {
  start_after_prior_kernels();
  const int t = blockIdx.x;
  const int width = cache.num_kv_heads * cache.head_dim;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const int head = i / cache.head_dim;
    const int d = i % cache.head_dim;
    store_f32(cache_row<T>(cache, layer, 0, head, slots[t]) + d, k[static_cast<std::size_t>(t) * width + i]);
    store_f32(cache_row<T>(cache, layer, 1, head, slots[t]) + d, v[static_cast<std::size_t>(t) * width + i]);
  }
}

// One block per (token, head) of q, k and, when v is given, v; thread i owns the rotated pair of dimensions
// i. With v, each k head (normed and rotated) and each v head is also stored into the cache's layer at the
// token's slot, which saves the store its own kernel.
template <typename T>
__global__ void qk_norm_rope_kernel(float* q, float* k, const float* v, int q_heads, int k_heads, int head_dim,
                                    const float* q_norm, const float* k_norm, float eps, const double* inv_freq,
                                    bool interleaved, KvCache cache, int layer, StepMeta meta) {
  start_after_prior_kernels();
  const int t = blockIdx.x;
  const int head = blockIdx.y;
  if (head >= q_heads + k_heads) {  // a value head, stored as it is
    const int h = head - q_heads - k_heads;
    const float* from = v + (static_cast<std::size_t>(t) * k_heads + h) * head_dim;
    T* to = cache_row<T>(cache, layer, 1, h, meta.slots[t]);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) store_f32(to + i, from[i]);
    return;
  }
  const bool is_q = head < q_heads;
  const int heads = is_q ? q_heads : k_heads;
  float* x = (is_q ? q : k) + (static_cast<std::size_t>(t) * heads + (is_q ? head : head - q_heads)) * head_dim;
  const float* norm = is_q ? q_norm : k_norm;
  const int half = head_dim / 2;
  const int i = threadIdx.x;
  const bool active = i < half;  // the block is rounded up to whole warps
  const int a = active ? (interleaved ? 2 * i : i) : 0;
  const int b = active ? (interleaved ? 2 * i + 1 : i + half) : 0;
  float x0 = active ? x[a] : 0.0f;
  float x1 = active ? x[b] : 0.0f;
  if (norm != nullptr) {
    const float inv = rsqrtf(block_sum(x0 * x0 + x1 * x1) / static_cast<float>(head_dim) + eps);
    x0 = x0 * inv * norm[a];
    x1 = x1 * inv * norm[b];
  }
  if (!active) return;
  // The angle in double, as the CPU backend computes it: long positions keep their precision.
  double s, c;
  sincos(static_cast<double>(meta.positions[t]) * inv_freq[i], &s, &c);
  const float cf = static_cast<float>(c);
  const float sf = static_cast<float>(s);
  const float r0 = x0 * cf - x1 * sf;
  const float r1 = x1 * cf + x0 * sf;
  x[a] = r0;
  x[b] = r1;
  if (!is_q && v != nullptr) {
    T* to = cache_row<T>(cache, layer, 0, head - q_heads, meta.slots[t]);
    store_f32(to + a, r0);
    store_f32(to + b, r1);
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, std::size_t n) {
  start_after_prior_kernels();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + __expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* x, const float* y, std::size_t n) {
  start_after_prior_kernels();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void add_bias_kernel(float* out, const float* bias, std::size_t rows, std::size_t cols) {
  start_after_prior_kernels();
  const std::size_t n = rows * cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] += bias[i % cols];
  }
}

template <typename T>
__global__ void convert_kernel(const float* x, T* out, std::size_t n) {
  start_after_prior_kernels();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __half>) {
      out[i] = __float2half_rn(x[i]);
    } else {
      out[i] = __float2bfloat16_rn(x[i]);
    }
  }
}

__global__ void gather_rows_kernel(const float* x, std::size_t cols, float* out, const std::int32_t* rows) {
  start_after_prior_kernels();
  const float* in = x + static_cast<std::size_t>(rows[blockIdx.x]) * cols;
  float* o = out + blockIdx.x * cols;
  for (std::size_t i = threadIdx.x; i < cols; i += blockDim.x) o[i] = in[i];
}

unsigned elementwise_blocks(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 4096));
}

}  // namespace

void rms_norm(const float* x, const float* w, float eps, float* out, std::size_t segments, int width, Stream stream) {
  if (segments == 0) return;
  launch(rms_norm_kernel, static_cast<unsigned>(segments), norm_threads(width), 0, stream, x, w, eps, out, width);
}

void qk_norm_rope(float* q, float* k, const float* v, int q_heads, int k_heads, int head_dim, const float* q_norm,
                  const float* k_norm, float eps, const double* inv_freq, bool interleaved, const KvCache& cache,
                  int layer, const StepMeta& meta, Stream stream) {
  if (meta.num_tokens == 0) return;
  if (head_dim % 2 != 0 || head_dim > 2048) {
    throw std::invalid_argument("qk_norm_rope: head_dim " + std::to_string(head_dim) + " is not supported");
  }
  const int stored_heads = v != nullptr ? k_heads : 0;
  const dim3 grid(static_cast<unsigned>(meta.num_tokens), static_cast<unsigned>(q_heads + k_heads + stored_heads));
  const unsigned threads = static_cast<unsigned>((head_dim / 2 + 31) / 32 * 32);
  const auto kernel = cache.bf16 ? qk_norm_rope_kernel<__nv_bfloat16> : qk_norm_rope_kernel<float>;
  launch(kernel, grid, threads, 0, stream, q, k, v, q_heads, k_heads, head_dim, q_norm, k_norm, eps, inv_freq,
         interleaved, cache, layer, meta);
}

void store_kv(const KvCache& cache, int layer, const float* k, const float* v, const StepMeta& meta, Stream stream) {
  if (meta.num_tokens == 0) return;
  const auto kernel = cache.bf16 ? store_kv_kernel<__nv_bfloat16> : store_kv_kernel<float>;
  launch(kernel, static_cast<unsigned>(meta.num_tokens), 128, 0, stream, cache, layer, k, v, meta.slots);
}

void silu_mul(const float* gate, const float* up, float* out, std::size_t n, Stream stream) {
  if (n == 0) return;
  launch(silu_mul_kernel, elementwise_blocks(n), 256, 0, stream, gate, up, out, n);
}

void add_inplace(float* x, const float* y, std::size_t n, Stream stream) {
  if (n == 0) return;
  launch(add_kernel, elementwise_blocks(n), 256, 0, stream, x, y, n);
}

void add_bias(float* out, const float* bias, std::size_t rows, std::size_t cols, Stream stream) {
  if (rows * cols == 0) return;
  launch(add_bias_kernel, elementwise_blocks(rows * cols), 256, 0, stream, out, bias, rows, cols);
}

void gather_logit_rows(const float* x, std::size_t cols, float* out, const StepMeta& meta, Stream stream) {
  if (meta.num_logit_rows == 0) return;
  launch(gather_rows_kernel, static_cast<unsigned>(meta.num_logit_rows), 256, 0, stream, x, cols, out, meta.logit_rows);
}

void to_bf16(const float* x, void* out, std::size_t n, Stream stream) {
  if (n == 0) return;
  launch(convert_kernel<__nv_bfloat16>, elementwise_blocks(n), 256, 0, stream, x, static_cast<__nv_bfloat16*>(out), n);
}

void to_f16(const float* x, void* out, std::size_t n, Stream stream) {
  if (n == 0) return;
  launch(convert_kernel<__half>, elementwise_blocks(n), 256, 0, stream, x, static_cast<__half*>(out), n);
}

}  // namespace engine::cuda
