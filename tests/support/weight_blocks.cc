#include "tests/support/weight_blocks.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace testing_support {

using engine::quant::WeightType;

std::vector<std::byte> random_blocks(WeightType type, std::size_t blocks, std::uint32_t seed, float scale) {
  const std::size_t block_bytes = engine::quant::block_bytes(type);
  if (engine::quant::block_elements(type) == 1) {
    throw std::invalid_argument("random_blocks: " + std::string(engine::quant::weight_type_name(type)) +
                                " is not a block type");
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> magnitude(0.5f, 1.0f);
  std::vector<std::byte> out(blocks * block_bytes);
  for (auto& b : out) b = static_cast<std::byte>(byte(rng));
  for (std::size_t i = 0; i < blocks; ++i) {
    std::byte* block = out.data() + i * block_bytes;
    const float d = (byte(rng) % 2 == 0 ? 1.0f : -1.0f) * scale * magnitude(rng);
    const std::uint16_t bits = engine::quant::f32_to_f16(d);
    if (type == WeightType::MXFP4) {
      // MXFP4's E8M0 exponent byte: the doubled levels' scale 2^(e - 128) at most |d|.
      block[0] = static_cast<std::byte>(128 + static_cast<int>(std::floor(std::log2(std::fabs(d)))));
    } else if (type == WeightType::IQ1_M) {
      // IQ1_M keeps d in the top nibbles of its four scale words (bytes 48-55), nibble k in word k.
      for (int k = 0; k < 4; ++k) {
        std::byte& top = block[49 + 2 * k];
        top = static_cast<std::byte>((std::to_integer<unsigned>(top) & 0x0Fu) | (((bits >> (4 * k)) & 0xFu) << 4));
      }
    } else {
      // Every other block type this is used for starts with its f16 d.
      block[0] = static_cast<std::byte>(bits & 0xFF);
      block[1] = static_cast<std::byte>(bits >> 8);
    }
  }
  return out;
}

std::vector<std::byte> blocks_for(WeightType type, const std::vector<float>& values, std::uint32_t seed) {
  const auto bytes = engine::quant::row_bytes(type, values.size());
  if (!bytes) throw std::invalid_argument("blocks_for: not a whole number of blocks");
  if (engine::quant::has_quantizer(type)) {
    std::vector<std::byte> out(*bytes);
    engine::quant::quantize_row(type, values, out);
    return out;
  }
  return random_blocks_like(type, values, seed);
}

std::vector<std::byte> random_blocks_like(WeightType type, const std::vector<float>& values, std::uint32_t seed) {
  const auto bytes = engine::quant::row_bytes(type, values.size());
  if (!bytes) throw std::invalid_argument("random_blocks_like: not a whole number of blocks");
  float amax = 0;
  for (const float v : values) amax = std::max(amax, std::fabs(v));
  // Codebook magnitudes reach about 43 / 4 (IQ2), 62 / 2 (IQ3) or 15 (IQ1_S's odd scales) steps of d.
  const float scale = amax > 0 ? amax / 16.0f : 0.01f;
  return random_blocks(type, *bytes / engine::quant::block_bytes(type), seed, scale);
}

}  // namespace testing_support
