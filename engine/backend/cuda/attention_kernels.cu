#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "engine/backend/cuda/attention_kernels.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_helpers.h"
#include "engine/backend/cuda/launch.h"

namespace engine::cuda {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <typename T>
__device__ __forceinline__ float load_f32(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *p;
  } else {
    return __bfloat162float(*p);
  }
}

// N consecutive cache elements as floats, in 8- or 16-byte loads where N allows (the row and the lane's
// offset are multiples of N elements, so the addresses are aligned).
template <typename T, int N>
__device__ __forceinline__ void load_f32_row(const T* p, float (&out)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(p + i);
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
      out[i] = lo.x;
      out[i + 1] = lo.y;
      out[i + 2] = hi.x;
      out[i + 3] = hi.y;
    }
  } else if constexpr (std::is_same_v<T, float> && N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = load_f32(p + i);
  }
}

// ---- decode attention: one block of 4 warps per (token, G query heads, partition of the context) ----
// With G the group of query heads that share a kv head (grouped-query attention), each key and value is
// loaded once for all of them.

constexpr int kDecodeWarps = 4;

// Merges the `splits` partial softmaxes of one (token, head), `parts` (each its max, its sum and head_dim
// weighted values), into the head's output row with the block's threads. The parts were written by other
// blocks of the running kernel, so they are read past L1 (__ldcg), which may hold older lines.
__device__ void combine_partitions(const float* parts, int head_dim, int splits, float* out) {
  const int stride = head_dim + 2;
  float m = kNegInf;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, __ldcg(parts + s * stride));
  float l = 0;
  for (int s = 0; s < splits; ++s) {
    const float ms = __ldcg(parts + s * stride);
    if (ms != kNegInf) l += __ldcg(parts + s * stride + 1) * __expf(ms - m);
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0;
    for (int s = 0; s < splits; ++s) {
      const float ms = __ldcg(parts + s * stride);
      if (ms != kNegInf) o += __ldcg(parts + s * stride + 2 + d) * __expf(ms - m);
    }
    out[d] = o / l;
  }
}

template <typename T, int D, int G>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    decode_attention_kernel(KvCache cache, int layer, const float* q, int q_heads, float scale, float* out, int splits,
                            int partition, float* partials, unsigned* arrivals, StepMeta meta) {
  start_after_prior_kernels();
  constexpr int kPerLane = D / 32;
  // Positions a warp loads before it reduces, to keep loads in flight; fewer when there are more heads.
  constexpr int kUnroll = G >= 4 ? 4 : 8;
  const int t = blockIdx.x;
  const int h0 = blockIdx.y * G;
  const int split = blockIdx.z;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int kv_head = h0 / (q_heads / cache.num_kv_heads);
  const int length = meta.positions[t] + 1;
  const int begin = split * partition;
  const int end = min(length, begin + partition);
  const std::int32_t* table = meta.block_tables + static_cast<std::size_t>(meta.token_seq[t]) * meta.table_stride;
  const T* cache_data = static_cast<const T*>(cache.data);
  const std::size_t block_elems = block_elements(cache);
  const std::size_t key_offset = cache_offset(cache, layer, 0, kv_head) + lane * kPerLane;
  const std::size_t value_offset = cache_offset(cache, layer, 1, kv_head) + lane * kPerLane;

  float qv[G][kPerLane];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const float* q_row = q + (static_cast<std::size_t>(t) * q_heads + h0 + j) * D + lane * kPerLane;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) qv[j][i] = q_row[i] * scale;
  }

  float m[G], l[G], acc[G][kPerLane];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    m[j] = kNegInf;
    l[j] = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[j][i] = 0;
  }
  for (int p0 = begin + warp * kUnroll; p0 < end; p0 += kDecodeWarps * kUnroll) {
    float score[kUnroll][G];
    std::size_t row[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = min(p0 + u, end - 1);  // past the end: a repeat, masked below
      row[u] = table[p / cache.block_size] * block_elems + static_cast<std::size_t>(p % cache.block_size) * D;
      float key[kPerLane];
      load_f32_row(cache_data + row[u] + key_offset, key);
#pragma unroll
      for (int j = 0; j < G; ++j) {
        float s = 0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) s += qv[j][i] * key[i];
        score[u][j] = s;
      }
    }
    float block_max[G];
#pragma unroll
    for (int j = 0; j < G; ++j) block_max[j] = m[j];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < G; ++j) {
        score[u][j] = p0 + u < end ? warp_sum(score[u][j]) : kNegInf;  // warp-uniform condition
        block_max[j] = fmaxf(block_max[j], score[u][j]);
      }
    }
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const float correction = __expf(m[j] - block_max[j]);
      l[j] *= correction;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[j][i] *= correction;
      m[j] = block_max[j];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float value[kPerLane];
      load_f32_row(cache_data + row[u] + value_offset, value);
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const float p = __expf(score[u][j] - m[j]);  // 0 for masked positions
        l[j] += p;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[j][i] += p * value[i];
      }
    }
  }

  // Merge the warps' running softmaxes, head by head.
  __shared__ float warp_m[kDecodeWarps][G], warp_l[kDecodeWarps][G];
  __shared__ float warp_acc[kDecodeWarps][G][D];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (lane == 0) {
      warp_m[warp][j] = m[j];
      warp_l[warp][j] = l[j];
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) warp_acc[warp][j][lane * kPerLane + i] = acc[j][i];
  }
  __syncthreads();
  for (int item = threadIdx.x; item < G * D; item += blockDim.x) {
    const int j = item / D, d = item % D;
    float total_m = kNegInf;
    for (int w = 0; w < kDecodeWarps; ++w) total_m = fmaxf(total_m, warp_m[w][j]);
    float total_l = 0, o = 0;
    for (int w = 0; w < kDecodeWarps; ++w) {
      if (warp_m[w][j] == kNegInf) continue;
      const float weight = __expf(warp_m[w][j] - total_m);
      total_l += warp_l[w][j] * weight;
      o += warp_acc[w][j][d] * weight;
    }
    const std::size_t head = static_cast<std::size_t>(t) * q_heads + h0 + j;
    if (splits == 1) {
      out[head * D + d] = o / total_l;
    } else {
      float* part = partials + (head * splits + split) * (D + 2);
      part[2 + d] = o;
      if (d == 0) {
        part[0] = total_m;
        part[1] = total_l;
      }
    }
  }
  if (splits == 1) return;

  // The last of a (token, head group)'s partitions to finish merges them all: no second kernel. Its
  // partials are made visible before it counts itself, and the count is reset for the next launch.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* count = arrivals + static_cast<std::size_t>(t) * gridDim.y + blockIdx.y;
    last = atomicAdd(count, 1u) == static_cast<unsigned>(splits - 1);
    if (last) *count = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int j = 0; j < G; ++j) {
    const std::size_t head = static_cast<std::size_t>(t) * q_heads + h0 + j;
    combine_partitions(partials + head * splits * (D + 2), D, splits, out + head * D);
  }
}

// What a prefill block (blockIdx.x a tile, blockIdx.y a query head) reads: its tile's tokens and
// positions, its sequence's block table, and where its kv head's keys and values sit in a block.
struct PrefillTile {
  __device__ PrefillTile(const KvCache& cache, int layer, int q_heads, const StepMeta& meta)
      : head(static_cast<int>(blockIdx.y)),
        first(meta.tile_first[blockIdx.x]),
        count(meta.tile_count[blockIdx.x]),
        table(meta.block_tables + static_cast<std::size_t>(meta.token_seq[first]) * meta.table_stride),
        first_position(meta.positions[first]),
        last_position(first_position + count - 1),
        block_elems(block_elements(cache)),
        key_offset(cache_offset(cache, layer, 0, head / (q_heads / cache.num_kv_heads))),
        value_offset(cache_offset(cache, layer, 1, head / (q_heads / cache.num_kv_heads))) {}
  int head;
  int first;
  int count;
  const std::int32_t* table;
  int first_position;
  int last_position;
  std::size_t block_elems;
  std::size_t key_offset;
  std::size_t value_offset;
};

// ---- prefill attention: one block per (tile of up to 32 queries of one sequence, q head) ----
// 128 threads; thread (r = tid / 4, c = tid % 4) owns query row r: scores of keys c*8..c*8+7 of each key
// tile, and output dimensions c, c + 4, c + 8, ...

constexpr int kPrefillThreads = 128;
constexpr int kKeyTile = 32;

template <int D>
constexpr std::size_t prefill_shared_bytes() {
  return sizeof(float) * (3 * kPrefillTile * (D + 1) + kPrefillTile * (kKeyTile + 1));
}

template <typename T, int D>
__global__ void __launch_bounds__(kPrefillThreads)
    prefill_attention_kernel(KvCache cache, int layer, const float* q, int q_heads, float scale, float* out,
                             StepMeta meta) {
  start_after_prior_kernels();
  extern __shared__ float shared[];
  float* qs = shared;                       // [32][D + 1]
  float* ks = qs + kPrefillTile * (D + 1);  // [32][D + 1]
  float* vs = ks + kKeyTile * (D + 1);      // [32][D + 1]
  float* ps = vs + kKeyTile * (D + 1);      // [32][33]
  const PrefillTile pt(cache, layer, q_heads, meta);
  const T* cache_data = static_cast<const T*>(cache.data);

  for (int i = threadIdx.x; i < kPrefillTile * D; i += kPrefillThreads) {
    const int r = i / D, d = i % D;
    qs[r * (D + 1) + d] =
        r < pt.count ? q[(static_cast<std::size_t>(pt.first + r) * q_heads + pt.head) * D + d] * scale : 0.0f;
  }
  const int r = threadIdx.x / 4;
  const int c = threadIdx.x % 4;
  const int my_position = pt.first_position + r;
  float m = kNegInf, l = 0;
  float acc[D / 4] = {};

  for (int k0 = 0; k0 <= pt.last_position; k0 += kKeyTile) {
    __syncthreads();  // the previous tile's keys, values and probabilities are no longer read
    for (int i = threadIdx.x; i < kKeyTile * D; i += kPrefillThreads) {
      const int j = i / D, d = i % D;
      const int p = min(k0 + j, pt.last_position);
      const std::size_t row =
          pt.table[p / cache.block_size] * pt.block_elems + static_cast<std::size_t>(p % cache.block_size) * D + d;
      ks[j * (D + 1) + d] = load_f32(cache_data + row + pt.key_offset);
      vs[j * (D + 1) + d] = load_f32(cache_data + row + pt.value_offset);
    }
    __syncthreads();
    float s[8];
    float tile_max = m;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int j = c * 8 + u;
      float dot = 0;
#pragma unroll 16
      for (int d = 0; d < D; ++d) dot += qs[r * (D + 1) + d] * ks[j * (D + 1) + d];
      s[u] = (k0 + j <= my_position && r < pt.count) ? dot : kNegInf;
      tile_max = fmaxf(tile_max, s[u]);
    }
    // The four threads of a row are adjacent lanes of one warp.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    float tile_sum = 0;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const float p = tile_max == kNegInf ? 0.0f : __expf(s[u] - tile_max);
      ps[r * (kKeyTile + 1) + c * 8 + u] = p;
      tile_sum += p;
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 2);
    const float correction = m == kNegInf ? 0.0f : __expf(m - tile_max);
    l = l * correction + tile_sum;
    m = tile_max;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < D / 4; ++i) acc[i] *= correction;
    for (int j = 0; j < kKeyTile; ++j) {
      const float p = ps[r * (kKeyTile + 1) + j];
#pragma unroll
      for (int i = 0; i < D / 4; ++i) acc[i] += p * vs[j * (D + 1) + c + 4 * i];
    }
  }
  if (r < pt.count) {
    float* o = out + (static_cast<std::size_t>(pt.first + r) * q_heads + pt.head) * D;
#pragma unroll
    for (int i = 0; i < D / 4; ++i) o[c + 4 * i] = acc[i] / l;
  }
}

// ---- prefill attention on the tensor cores (bf16 caches): one block of two warps per (tile of up to 32
// queries of one sequence, q head). Each warp owns 16 query rows: S = Q·Kᵀ and O += P·V are 16×16×16 bf16
// products with f32 accumulation (WMMA); the online softmax runs on S in shared memory, two lanes per row.

constexpr int kTcWarps = 2;
constexpr int kTcKeys = 64;  // keys per tile
constexpr int kTcRows = 16;  // query rows per warp

template <int D>
struct TcLayout {
  static constexpr int kQkvStride = D + 8;          // bf16 elements per row of Q, K, V (ldm: a multiple of 8)
  static constexpr int kScoreStride = kTcKeys + 4;  // floats per row of S
  static constexpr int kProbStride = kTcKeys + 8;   // bf16 per row of P
  static constexpr int kOutStride = D + 4;          // floats per row of O
  static constexpr std::size_t round(std::size_t bytes) { return (bytes + 127) / 128 * 128; }
  static constexpr std::size_t kQ = 0;
  static constexpr std::size_t kK = kQ + round(sizeof(__nv_bfloat16) * kPrefillTile * kQkvStride);
  static constexpr std::size_t kV = kK + round(sizeof(__nv_bfloat16) * kTcKeys * kQkvStride);
  static constexpr std::size_t kWarpBase = kV + round(sizeof(__nv_bfloat16) * kTcKeys * kQkvStride);
  static constexpr std::size_t kS = 0;  // within a warp's part
  static constexpr std::size_t kP = kS + round(sizeof(float) * kTcRows * kScoreStride);
  static constexpr std::size_t kO = kP + round(sizeof(__nv_bfloat16) * kTcRows * kProbStride);
  static constexpr std::size_t kWarpBytes = kO + round(sizeof(float) * kTcRows * kOutStride);
  static constexpr std::size_t kBytes = kWarpBase + kTcWarps * kWarpBytes;
};

template <int D>
__global__ void __launch_bounds__(kTcWarps * 32)
    prefill_attention_tc_kernel(KvCache cache, int layer, const float* q, int q_heads, float scale, float* out,
                                StepMeta meta) {
  start_after_prior_kernels();
  namespace wmma = nvcuda::wmma;
  using L = TcLayout<D>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(shared_bytes + L::kQ);
  auto* ks = reinterpret_cast<__nv_bfloat16*>(shared_bytes + L::kK);
  auto* vs = reinterpret_cast<__nv_bfloat16*>(shared_bytes + L::kV);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  unsigned char* mine = shared_bytes + L::kWarpBase + warp * L::kWarpBytes;
  auto* ss = reinterpret_cast<float*>(mine + L::kS);
  auto* ps = reinterpret_cast<__nv_bfloat16*>(mine + L::kP);
  auto* os = reinterpret_cast<float*>(mine + L::kO);

  const PrefillTile pt(cache, layer, q_heads, meta);
  const auto* cache_data = static_cast<const __nv_bfloat16*>(cache.data);

  for (int i = threadIdx.x; i < kPrefillTile * D; i += kTcWarps * 32) {
    const int r = i / D, d = i % D;
    const float x =
        r < pt.count ? q[(static_cast<std::size_t>(pt.first + r) * q_heads + pt.head) * D + d] * scale : 0.0f;
    qs[r * L::kQkvStride + d] = __float2bfloat16_rn(x);
  }
  for (int i = lane; i < kTcRows * D; i += 32) os[(i / D) * L::kOutStride + i % D] = 0.0f;

  // Lanes 2r and 2r + 1 own row r of the warp's 16: half of its keys each, and half of its output dims.
  const int row = lane / 2;
  const int half = lane % 2;
  const int query = warp * kTcRows + row;
  const int my_position = pt.first_position + query;
  float m = kNegInf, l = 0.0f;

  for (int k0 = 0; k0 <= pt.last_position; k0 += kTcKeys) {
    __syncthreads();  // the previous tile's keys and values are no longer read
    // 16-byte copies: D bf16 of a position are contiguous in the cache.
    constexpr int kChunks = D / 8;
    for (int i = threadIdx.x; i < kTcKeys * kChunks; i += kTcWarps * 32) {
      const int j = i / kChunks, c = i % kChunks;
      const int p = min(k0 + j, pt.last_position);
      const std::size_t at =
          pt.table[p / cache.block_size] * pt.block_elems + static_cast<std::size_t>(p % cache.block_size) * D + c * 8;
      *reinterpret_cast<uint4*>(ks + j * L::kQkvStride + c * 8) =
          *reinterpret_cast<const uint4*>(cache_data + at + pt.key_offset);
      *reinterpret_cast<uint4*>(vs + j * L::kQkvStride + c * 8) =
          *reinterpret_cast<const uint4*>(cache_data + at + pt.value_offset);
    }
    __syncthreads();

    // S (16 × 64) = Q_warp (16 × D) · Kᵀ.
    for (int n = 0; n < kTcKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, qs + warp * kTcRows * L::kQkvStride + kk * 16, L::kQkvStride);
        wmma::load_matrix_sync(b, ks + n * 16 * L::kQkvStride + kk * 16, L::kQkvStride);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(ss + n * 16, acc, L::kScoreStride, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of this row's 64 scores (two lanes, 32 each); P in bf16 for the next product.
    float tile_max = kNegInf;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bool visible = query < pt.count && k0 + c <= my_position;
      if (visible) tile_max = fmaxf(tile_max, ss[row * L::kScoreStride + c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float new_m = fmaxf(m, tile_max);
    float tile_sum = 0.0f;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bool visible = query < pt.count && k0 + c <= my_position;
      const float p = visible && new_m != kNegInf ? __expf(ss[row * L::kScoreStride + c] - new_m) : 0.0f;
      ps[row * L::kProbStride + c] = __float2bfloat16_rn(p);
      tile_sum += p;
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    const float correction = m == kNegInf ? 0.0f : __expf(m - new_m);
    l = l * correction + tile_sum;
    m = new_m;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) os[row * L::kOutStride + d] *= correction;
    __syncwarp();

    // O_warp (16 × D) += P (16 × 64) · V (64 × D).
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + n * 16, L::kOutStride, wmma::mem_row_major);
      for (int kk = 0; kk < kTcKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, ps + kk * 16, L::kProbStride);
        wmma::load_matrix_sync(b, vs + kk * 16 * L::kQkvStride + n * 16, L::kQkvStride);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(os + n * 16, acc, L::kOutStride, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (query < pt.count) {
    float* o = out + (static_cast<std::size_t>(pt.first + query) * q_heads + pt.head) * D;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) o[d] = os[row * L::kOutStride + d] / l;
  }
}

// Calls fn with the head dimension as a compile-time constant.
template <typename Fn>
void with_head_dim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 96: return fn(std::integral_constant<int, 96>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    case 256: return fn(std::integral_constant<int, 256>{});
    default:
      throw std::invalid_argument("the CUDA attention kernels take head_dim 32, 64, 96, 128 or 256, not " +
                                  std::to_string(head_dim) + "; run this model with --device cpu");
  }
}

}  // namespace

bool attention_head_dim_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

void decode_attention(const KvCache& cache, int layer, const float* q, int q_heads, float scale, float* out, int splits,
                      int partition, float* partials, unsigned* arrivals, const StepMeta& meta, Stream stream) {
  if (meta.num_tokens == 0) return;
  const int group = q_heads / cache.num_kv_heads;
  with_head_dim(cache.head_dim, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    auto launch_group = [&](auto group_tag) {
      constexpr int G = decltype(group_tag)::value;
      const dim3 grid(static_cast<unsigned>(meta.num_tokens), static_cast<unsigned>(q_heads / G),
                      static_cast<unsigned>(splits));
      const auto kernel =
          cache.bf16 ? decode_attention_kernel<__nv_bfloat16, D, G> : decode_attention_kernel<float, D, G>;
      launch(kernel, grid, kDecodeWarps * 32, 0, stream, cache, layer, q, q_heads, scale, out, splits, partition,
             partials, arrivals, meta);
    };
    // A whole group per block where it is a small power of two; other groupings one head per block.
    switch (group) {
      case 2: return launch_group(std::integral_constant<int, 2>{});
      case 4: return launch_group(std::integral_constant<int, 4>{});
      case 8: return launch_group(std::integral_constant<int, 8>{});
      default: return launch_group(std::integral_constant<int, 1>{});
    }
  });
}

void prefill_attention(const KvCache& cache, int layer, const float* q, int q_heads, float scale, float* out,
                       const StepMeta& meta, bool tensor_cores, Stream stream) {
  if (meta.num_tiles == 0) return;
  const dim3 grid(static_cast<unsigned>(meta.num_tiles), static_cast<unsigned>(q_heads));
  if (tensor_cores && cache.bf16 && cache.head_dim % 16 == 0) {
    with_head_dim(cache.head_dim, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      if constexpr (D % 16 == 0) {
        constexpr std::size_t shared = TcLayout<D>::kBytes;
        CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
        launch(prefill_attention_tc_kernel<D>, grid, kTcWarps * 32, shared, stream, cache, layer, q, q_heads, scale,
               out, meta);
      }
    });
    return;
  }
  with_head_dim(cache.head_dim, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    constexpr std::size_t shared = prefill_shared_bytes<D>();
    auto launch_typed = [&](auto kernel) {
      // Above 48 KiB a kernel must ask for its shared memory; asking again is cheap.
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
      launch(kernel, grid, kPrefillThreads, shared, stream, cache, layer, q, q_heads, scale, out, meta);
    };
    if (cache.bf16) {
      launch_typed(prefill_attention_kernel<__nv_bfloat16, D>);
    } else {
      launch_typed(prefill_attention_kernel<float, D>);
    }
  });
}

}  // namespace engine::cuda
