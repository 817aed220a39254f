#pragma once

// Rows of weight blocks for the tests: the engine's quantization of given values, or random bytes, which every
// codebook index and sign bit accepts (so that decoders meet blocks no quantizer writes), with each block's
// super-scale set to a finite half so that the values are numbers.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/quant/quant.h"

namespace testing_support {

// Every weight type, in WeightType's order, for the tests that cover each.
inline constexpr engine::quant::WeightType kAllTypes[] = {
    engine::quant::WeightType::F32,     engine::quant::WeightType::F16,    engine::quant::WeightType::BF16,
    engine::quant::WeightType::Q8_0,    engine::quant::WeightType::Q4_0,   engine::quant::WeightType::Q4_K,
    engine::quant::WeightType::Q5_K,    engine::quant::WeightType::Q6_K,   engine::quant::WeightType::Q4_1,
    engine::quant::WeightType::Q5_0,    engine::quant::WeightType::Q5_1,   engine::quant::WeightType::Q3_K,
    engine::quant::WeightType::IQ4_NL,  engine::quant::WeightType::IQ4_XS, engine::quant::WeightType::Q2_K,
    engine::quant::WeightType::IQ2_XXS, engine::quant::WeightType::IQ2_XS, engine::quant::WeightType::IQ2_S,
    engine::quant::WeightType::IQ3_XXS, engine::quant::WeightType::IQ3_S,  engine::quant::WeightType::IQ1_S,
    engine::quant::WeightType::IQ1_M,   engine::quant::WeightType::MXFP4,  engine::quant::WeightType::F8_E4M3};
static_assert(sizeof(kAllTypes) / sizeof(kAllTypes[0]) == engine::quant::kWeightTypeCount,
              "every weight type is listed");

// `blocks` random blocks of `type` (a quantized type), each super-scale d with |d| in [scale / 2, scale) (MXFP4:
// its power-of-two scale, the largest not above such a d).
std::vector<std::byte> random_blocks(engine::quant::WeightType type, std::size_t blocks, std::uint32_t seed,
                                     float scale = 0.01f);

// `values` quantized by the engine's quantize_row where the type has a quantizer, else random blocks of as
// many elements (the values' magnitude then only sets the scale).
std::vector<std::byte> blocks_for(engine::quant::WeightType type, const std::vector<float>& values, std::uint32_t seed);
// Random blocks of `type` holding as many elements as `values`, scaled to their magnitude: every index and
// sign a block can hold, not only those a quantizer writes.
std::vector<std::byte> random_blocks_like(engine::quant::WeightType type, const std::vector<float>& values,
                                          std::uint32_t seed);

}  // namespace testing_support
