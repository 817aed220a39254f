#pragma once

// The weight storage types the engine computes with directly, and their scalar reference conversions.
// Block layouts are ggml's (GGUF files store them as is); the SIMD kernels in engine/cpu read the same
// bytes without expanding a whole tensor.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace engine::quant {

// The values index the CPU kernel tables (engine/cpu/kernels.h): new types go at the end.
enum class WeightType : std::uint8_t {
  F32,
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q4_K,
  Q5_K,
  Q6_K,
  Q4_1,
  Q5_0,
  Q5_1,
  Q3_K,
  IQ4_NL,
  IQ4_XS,
  Q2_K,
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  IQ3_XXS,
  IQ3_S,
  IQ1_S,
  IQ1_M,
  MXFP4,
  // FP8 E4M3 (the OCP 8-bit float: sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities, S.1111.111 is
  // NaN; largest 448), one byte per weight, as safetensors stores it (dtype F8_E4M3). A checkpoint's FP8 matrices
  // come with scales (BlockScales): a weight is its stored value times its block's scale. GGUF has no such type.
  F8_E4M3,
};
inline constexpr std::size_t kWeightTypeCount = 24;

std::string_view weight_type_name(WeightType type);  // "F32", "Q4_K", ... (ggml's spelling)
std::optional<WeightType> weight_type_from_name(std::string_view name);
// "F32, F16, BF16, Q8_0, …, Q5_1": every weight type the engine computes with, for messages that say what
// is served instead of a refused type.
std::string weight_type_names();
// The ggml type id (GGUF tensor info) of a weight type (nullopt for F8_E4M3, which GGUF does not store), and back
// (nullopt for ids the engine cannot use).
std::optional<std::uint32_t> ggml_type_id(WeightType type);
std::optional<WeightType> weight_type_from_ggml(std::uint32_t ggml_id);

std::size_t block_elements(WeightType type);  // 1 for the float types, 32 or 256 for the quantized ones
std::size_t block_bytes(WeightType type);
// Bytes of one row of `cols` elements; nullopt when cols is not a whole number of blocks.
std::optional<std::size_t> row_bytes(WeightType type, std::size_t cols);

// Scalar reference conversions of one row (`src.size()` / `dst.size()` elements, a whole number of
// blocks; throws std::invalid_argument otherwise). quantize_row rounds as ggml's reference quantizers
// do, so files written here read back like files written by llama.cpp's converter.
// Every type has a quantizer today; one added without a quantizer (has_quantizer false) throws
// std::invalid_argument naming the type.
void quantize_row(WeightType type, std::span<const float> src, std::span<std::byte> dst);
bool has_quantizer(WeightType type);
void dequantize_row(WeightType type, std::span<const std::byte> src, std::span<float> dst);

// Half and bfloat16 conversions (round to nearest even; NaN stays NaN).
float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float value);
float bf16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float value);
// FP8 E4M3 conversions: exact widening; narrowing rounds to nearest even and saturates at +-448 (as torch's cast
// of a clamped value, which is how FP8 checkpoints are written); NaN stays NaN.
float e4m3_to_f32(std::uint8_t bits);
std::uint8_t f32_to_e4m3(float value);

// The scales of a block-scaled matrix of `rows` x `cols` (FP8 checkpoints): element (r, c) is its stored value
// times values[(r / block_rows) * ceil(cols / block_cols) + c / block_cols]. Per-tensor scaling is one block of
// the whole matrix, per-channel (per-row) scaling blocks of one row; DeepSeek's and Qwen's FP8 checkpoints use
// blocks of 128 x 128. Empty `values`: the stored values are the weights.
struct BlockScales {
  std::span<const float> values;
  std::size_t block_rows = 0;
  std::size_t block_cols = 0;
  bool empty() const { return values.empty(); }
  // Scales per row of blocks: ceil(cols / block_cols).
  std::size_t blocks_per_row(std::size_t cols) const { return (cols + block_cols - 1) / block_cols; }
  // The scale of element (row, col).
  float at(std::size_t row, std::size_t col, std::size_t cols) const {
    return values[row / block_rows * blocks_per_row(cols) + col / block_cols];
  }
};
// The number of scales blocks of `scales`' size take over a matrix of rows x cols.
std::size_t block_scales_count(const BlockScales& scales, std::size_t rows, std::size_t cols);
// Whether `scales` fits a matrix of rows x cols (block sizes positive, one value per block); the message says
// what does not, for the caller to name the tensor.
std::optional<std::string> block_scales_mismatch(const BlockScales& scales, std::size_t rows, std::size_t cols);

}  // namespace engine::quant
