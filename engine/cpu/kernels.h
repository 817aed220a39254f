#pragma once

// The per-ISA kernel tables behind matmul.h. Each table lives in its own translation unit compiled for one
// instruction set; this header is the only thing they share, so it holds nothing that could be emitted as
// code (no inline functions, no templates): an inline function instantiated in an AVX-512 unit could be
// the copy the linker keeps for every caller.

#include <cstddef>
#include <cstdint>

namespace engine::cpu::kernels {

// Weight types by quant::WeightType's underlying value.
inline constexpr int kTypeCount = 24;

// Rows [0, rows) of a weight matrix starting at `w`, each `row_bytes` long with `cols` elements.
struct Rows {
  const std::byte* w;
  std::size_t row_bytes;
  std::size_t cols;
  std::size_t rows;
};

// out[n] = dot(row n, x) (+ bias[n]) for one token.
using GemvFn = void (*)(const Rows& rows, const float* x, float* out, const float* bias);
// out[t * out_stride + n] = dot(row n, x + t * cols) (+ bias[n]) for t < tokens. `scratch` holds at least
// gemm_scratch_floats(cols) floats; the result of every (row, token) equals GemvFn's bit for bit.
using GemmFn = void (*)(const Rows& rows, const float* x, std::size_t tokens, float* out, std::size_t out_stride,
                        const float* bias, float* scratch);
// GemmFn for a few tokens (batched decode), without scratch: the weights are decoded in registers and
// streamed once per row tile, each decoded group multiplied into several tokens' accumulators.
using GemvBatchFn = void (*)(const Rows& rows, const float* x, std::size_t tokens, float* out, std::size_t out_stride,
                             const float* bias);
// All rows as f32, `cols` values each, back to back.
using DequantFn = void (*)(const Rows& rows, float* out);
// The sum of n floats read with the widest loads (the memory bandwidth probe).
using SumFn = float (*)(const float* data, std::size_t n);
using ScratchFn = std::size_t (*)(std::size_t cols);
// Levels with integer dot products: one token's `cols` activations (a whole number of blocks of 32)
// quantized to integers held in int8 bytes, into quantized_token_bytes(cols) bytes, in the level's own layout.
using QuantizeFn = void (*)(const float* x, std::size_t cols, std::byte* out);
// A level whose products also read the quantized tokens regrouped (amx: 16 tokens at a time in tile order):
// the bytes that takes for `tokens` tokens of `cols`, and the regrouping of tokens [16 * first, 16 * last) (of
// `tokens`, quantized_token_bytes(cols) apart at x) into `packed`, which matmul places right after the tokens.
using PackedBytesFn = std::size_t (*)(std::size_t tokens, std::size_t cols);
using PackFn = void (*)(const std::byte* x, std::size_t cols, std::size_t tokens, std::size_t first, std::size_t last,
                        std::byte* packed);
// out[t * out_stride + n] = dot(row n, token t) (+ bias[n]) for t < tokens, over tokens quantized by the
// table's QuantizeFn, quantized_token_bytes(cols) apart (followed by their PackFn regrouping where the table
// has one); any token count, the same bits for each token.
using Int8MatmulFn = void (*)(const Rows& rows, const std::byte* x, std::size_t tokens, float* out,
                              std::size_t out_stride, const float* bias);
// Weights repacked once, at load, into the layout a level's int8 kernels read (tiles of Table::row_tile rows,
// the last one padded with zero rows). A repacking keeps each tile's size and place: tile i of `rows` takes
// the row_tile * row_bytes bytes at i * row_tile * row_bytes of `out`. RepackFn writes tiles [first, last).
using RepackFn = void (*)(const Rows& rows, std::size_t first, std::size_t last, std::byte* out);

// Keys per attention tile: the online softmax takes keys in tiles of this many positions, aligned to
// multiples of it, so a query's order of operations depends on its position alone (attention.h).
inline constexpr std::size_t kAttentionKeyTile = 32;

// One piece of causal attention: `queries` consecutive positions of one sequence from `first_position` on,
// each with the `group` q heads that share one kv head, against that kv head's cached keys and values at
// positions [0, position]. Row r is query r / group, q head r % group.
struct AttentionTask {
  int kv_type;  // element type of the cache: kF32, kF16 or kBF16 (quant::WeightType values)
  std::size_t head_dim;
  std::size_t block_size;  // positions per cache block
  std::size_t block_bytes;
  const std::byte* cache;  // block 0
  // Within a block, where this layer and kv head's keys ([head_dim][block_size], transposed) and values
  // ([block_size][head_dim]) start.
  std::size_t key_offset;
  std::size_t value_offset;
  const std::int32_t* block_table;  // the sequence's, covering every position attended to
  std::size_t first_position;
  std::size_t queries;
  std::size_t group;
  const float* q;  // query i, head h at q + i * q_stride + h * head_dim
  std::size_t q_stride;
  float* out;  // laid out as q
  std::size_t out_stride;
  float scale;
  std::size_t window = 0;  // a query sees its own and the window - 1 positions before; 0: every earlier one
  float softcap = 0;       // scores become softcap * tanh(score / softcap); 0: left as they are
  // Attention sinks (gpt-oss): the `group` q heads' logits, each in its head's softmax as a key whose value is 0
  // (the softmax starts from m = sink, l = 1); null: none.
  const float* sinks = nullptr;
};
using AttentionFn = void (*)(const AttentionTask& task, std::byte* scratch);
// Bytes of scratch (64-byte aligned) AttentionFn needs for `rows` rows of `head_dim`.
using AttentionScratchFn = std::size_t (*)(std::size_t head_dim, std::size_t rows);
// out[i] = act(gate[i]) * up[i] for i < n (a gated feed-forward's activation: SwiGLU's silu, GeGLU's
// tanh-approximated GELU; out may be gate or up).
using GatedMulFn = void (*)(const float* gate, const float* up, std::size_t n, float* out);
// gpt-oss's clamped SwiGLU: out[i] = (clamp(up[i], -limit, limit) + 1) · g · sigmoid(alpha · g) with
// g = min(gate[i], limit), for i < n (out may be gate or up).
using ClampedGatedMulFn = void (*)(const float* gate, const float* up, std::size_t n, float alpha, float limit,
                                   float* out);

struct Table {
  const char* name;
  GemvFn gemv[kTypeCount];
  GemvBatchFn gemv_batch[kTypeCount];
  GemmFn gemm[kTypeCount];
  DequantFn dequantize[kTypeCount];
  SumFn sum;
  ScratchFn gemm_scratch_floats;
  std::size_t row_tile;                      // rows decoded together by gemm (work is best split in multiples of it)
  std::size_t batch_max_tokens[kTypeCount];  // by type: gemv_batch for 2 .. batch_max_tokens tokens, gemm above
  // By type: where not null, that type's products take int8 activations (and not gemv / gemv_batch / gemm).
  Int8MatmulFn int8_matmul[kTypeCount] = {};
  QuantizeFn quantize_activations = nullptr;
  ScratchFn quantized_token_bytes = nullptr;
  AttentionFn attention = nullptr;
  AttentionScratchFn attention_scratch_bytes = nullptr;
  GatedMulFn silu_mul = nullptr;
  GatedMulFn gelu_tanh_mul = nullptr;
  ClampedGatedMulFn clamped_swiglu_mul = nullptr;
  PackedBytesFn packed_activation_bytes = nullptr;  // both null where the products read the tokens as quantized
  PackFn pack_activations = nullptr;
  // By type: where not null, weights repacked by repack_weights, multiplied by int8_matmul_repacked (Rows.w at
  // the repacking of a tile's first row; the bits of int8_matmul).
  RepackFn repack_weights[kTypeCount] = {};
  Int8MatmulFn int8_matmul_repacked[kTypeCount] = {};
};

const Table& portable_table();
#if defined(ENGINE_CPU_X86)
const Table& avx2_table();
// avx2_table() with the quantized weight types multiplied by vpmaddwd against int16 activations, with
// avx512vnni_table()'s numerics.
const Table& avx2int16_table();
const Table& avx512_table();
// avx512_table() under the level's name (BF16 weights keep f32 activations: kernels_avx512bf16.cc says why).
const Table& avx512bf16_table();
// avx512bf16_table() with the quantized weight types multiplied by vpdpbusd against int8 activations.
const Table& avx512vnni_table();
// avx512vnni_table() with the quantized weight types' products of 16 tokens and more on AMX-INT8 tiles, to the
// same bits. Only where the CPU has AMX-INT8 and Linux has granted the process its tile state.
const Table& amx_table();
#endif

}  // namespace engine::cpu::kernels
