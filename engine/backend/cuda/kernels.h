#pragma once

// Launchers for the CUDA backend's activation kernels (norms, rotary embedding, attention, element-wise
// ops). Activations are f32; the KV cache is f32 or bf16. Every launcher checks its launch; launched on an
// overlapping Stream, each kernel waits for the one before it (launch.h).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/launch.h"

namespace engine::cuda {

// Where the step's tokens and sequences are, in device memory (one upload per step).
struct StepMeta {
  const std::int32_t* tokens = nullptr;        // [num_tokens]
  const std::int32_t* positions = nullptr;     // [num_tokens]
  const std::int32_t* slots = nullptr;         // [num_tokens] physical block * block_size + offset
  const std::int32_t* token_seq = nullptr;     // [num_tokens] the token's sequence
  const std::int32_t* block_tables = nullptr;  // [num_seqs * table_stride]
  const std::int32_t* logit_rows = nullptr;    // [num_logit_rows]
  const std::int32_t* tile_first = nullptr;    // [num_tiles] first token of a prefill tile
  const std::int32_t* tile_count = nullptr;    // [num_tiles] tokens in it (one sequence's, consecutive)
  int num_tokens = 0;
  int num_seqs = 0;
  int num_logit_rows = 0;
  int num_tiles = 0;
  int table_stride = 0;
};

// The paged cache: per block [layer][key, value][kv head][position in block][head_dim].
struct KvCache {
  void* data = nullptr;
  bool bf16 = false;
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
};

inline constexpr int kPrefillTile = 32;  // queries per prefill attention tile

bool attention_head_dim_supported(int head_dim);

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

void silu_mul(const float* gate, const float* up, float* out, std::size_t n, Stream stream);
void add_inplace(float* x, const float* y, std::size_t n, Stream stream);
// out[r] += bias for every row of `cols`.
void add_bias(float* out, const float* bias, std::size_t rows, std::size_t cols, Stream stream);
void gather_logit_rows(const float* x, std::size_t cols, float* out, const StepMeta& meta, Stream stream);
// f32 to bf16 or f16, element-wise (the GEMM's activation operand).
void to_bf16(const float* x, void* out, std::size_t n, Stream stream);
void to_f16(const float* x, void* out, std::size_t n, Stream stream);

}  // namespace engine::cuda
