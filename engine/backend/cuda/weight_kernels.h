#pragma once

// Kernels that read weights as the checkpoint stores them (F32, F16, BF16 and ggml's quantized blocks),
// decoding inside the kernel: the weights stay on the GPU in their stored form.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend/cuda/launch.h"
#include "engine/quant/quant.h"

namespace engine::cuda {

// Whether these kernels read weights of `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; not yet Q4_1, Q5_0,
// Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4, F8_E4M3,
// which the CPU backend runs). The backend refuses the others by name at load.
bool weight_type_supported(quant::WeightType type);

// The most tokens weight_gemv takes in one launch; more go through a GEMM.
inline constexpr std::size_t kGemvMaxTokens = 8;

// The most weights weight_gemv_group multiplies in one launch (q, k and v).
inline constexpr std::size_t kMaxGemvOutputs = 3;

// y[t * ldy + r] = Σ_c W[r][c] · x[t * cols + c] (+ bias[r]) for r < rows, t < tokens ≤ kGemvMaxTokens.
// W is `rows` rows of row_bytes(type, cols) bytes each in device memory; x, y, bias (f32, may be null) too.
void weight_gemv(quant::WeightType type, const void* weight, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t tokens, const float* bias, float* y, std::size_t ldy, Stream stream);

// One weight of a grouped GEMV and where its products go, as weight_gemv takes them; with `accumulate`
// they are added to y (a residual add) instead of replacing it.
struct GemvOutput {
  const void* weight = nullptr;
  std::size_t rows = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  std::size_t ldy = 0;
  bool accumulate = false;
};

// The GEMV's input, t < tokens rows of cols floats, made as it is read: x; or with `up`, silu(x) * up
// element-wise (SwiGLU's product, as silu_mul computes it); or with `norm` (cols floats), rms_norm(x) * norm
// row by row with eps (a sub-block's norm; each block reduces each row's squares once).
struct GemvInput {
  const float* x = nullptr;
  const float* up = nullptr;
  const float* norm = nullptr;
  float eps = 0.0f;
};

// weight_gemv for up to kMaxGemvOutputs weights of one type and column count over one input, in one launch.
void weight_gemv_group(quant::WeightType type, std::span<const GemvOutput> outputs, std::size_t cols, GemvInput input,
                       std::size_t tokens, Stream stream);

// out[(r - row_begin) * cols + c] = W[r][c] as bf16, for rows [row_begin, row_begin + rows).
void dequantize_to_bf16(quant::WeightType type, const void* weight, std::size_t row_begin, std::size_t rows,
                        std::size_t cols, __nv_bfloat16* out, Stream stream);

// out[t * cols + c] = W[ids[t]][c] as f32 for t < count (ids in device memory, each < the weight's rows).
void gather_weight_rows(quant::WeightType type, const void* weight, std::size_t cols, const std::int32_t* ids,
                        std::size_t count, float* out, Stream stream);

}  // namespace engine::cuda
