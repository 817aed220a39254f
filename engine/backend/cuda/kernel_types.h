#pragma once

// What the activation and attention kernels are told about a step and the paged KV cache.

#include <cstdint>

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

}  // namespace engine::cuda
