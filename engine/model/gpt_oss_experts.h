#pragma once

// gpt-oss's Hugging Face expert tensors as the engine's matrices. transformers keeps every expert of a layer in one
// tensor, gate and up fused with their output features interleaved (gate on even, up on odd), and either in x · W
// orientation (gate_up_proj [experts, hidden, 2 x intermediate], down_proj [experts, intermediate, hidden]) or, as
// OpenAI publishes the models, in MXFP4: `_blocks` [experts, rows, cols / 32, 16] of two E2M1 codes a byte (the
// even element in the low nibble) and `_scales` [experts, rows, cols / 32] of E8M0 exponents, rows being output
// features. The engine's matrices are [output features, inputs] with ggml's MXFP4 blocks ({e, qs[16]}, element j
// in qs[j]'s low nibble and element j + 16 in its high one), so each expert's matrices are rebuilt once at load.

#include <cstddef>
#include <span>
#include <vector>

namespace engine::model {

// Rows first, first + step, … (count of them) of one expert's MXFP4 matrix of `cols` inputs (cols a multiple of
// 32), as ggml MXFP4 rows: step 2 takes gate's (first 0) or up's (first 1) rows out of the fused gate_up.
std::vector<std::byte> mxfp4_rows_as_ggml(std::span<const std::byte> blocks, std::span<const std::byte> scales,
                                          std::size_t cols, std::size_t first, std::size_t step, std::size_t count);

// Columns first, first + step, … (count of them) of one expert's `inputs` x `outputs` matrix in x · W orientation,
// elements of `element_bytes` each, transposed into `count` rows of `inputs` elements.
std::vector<std::byte> columns_as_rows(std::span<const std::byte> matrix, std::size_t element_bytes, std::size_t inputs,
                                       std::size_t outputs, std::size_t first, std::size_t step, std::size_t count);

}  // namespace engine::model
