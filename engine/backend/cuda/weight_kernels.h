#pragma once

// Kernels that read weights as the checkpoint stores them (F32, F16, BF16 and ggml's quantized blocks),
// decoding inside the kernel: the weights stay on the GPU in their stored form.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/quant/quant.h"

namespace engine::cuda {

// The most tokens weight_gemv takes in one launch; more go through a GEMM.
inline constexpr std::size_t kGemvMaxTokens = 8;

// y[t * ldy + r] = Σ_c W[r][c] · x[t * cols + c] (+ bias[r]) for r < rows, t < tokens ≤ kGemvMaxTokens.
// W is `rows` rows of row_bytes(type, cols) bytes each in device memory; x, y, bias (f32, may be null) too.
void weight_gemv(quant::WeightType type, const void* weight, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t tokens, const float* bias, float* y, std::size_t ldy, cudaStream_t stream);

// out[(r - row_begin) * cols + c] = W[r][c] as bf16, for rows [row_begin, row_begin + rows).
void dequantize_to_bf16(quant::WeightType type, const void* weight, std::size_t row_begin, std::size_t rows,
                        std::size_t cols, __nv_bfloat16* out, cudaStream_t stream);

// out[t * cols + c] = W[ids[t]][c] as f32 for t < count (ids in device memory, each < the weight's rows).
void gather_weight_rows(quant::WeightType type, const void* weight, std::size_t cols, const std::int32_t* ids,
                        std::size_t count, float* out, cudaStream_t stream);

}  // namespace engine::cuda
