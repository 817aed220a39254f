#include "engine/model/gpt_oss_experts.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace engine::model {

namespace {

constexpr std::size_t kBlockValues = 32;  // MXFP4's block: 32 E2M1 values, one E8M0 scale
constexpr std::size_t kBlockBytes = 1 + kBlockValues / 2;

}  // namespace

std::vector<std::byte> mxfp4_rows_as_ggml(std::span<const std::byte> blocks, std::span<const std::byte> scales,
                                          std::size_t cols, std::size_t first, std::size_t step, std::size_t count) {
  const std::size_t per_row = cols / kBlockValues;
  const std::size_t rows = count == 0 ? 0 : first + (count - 1) * step + 1;
  if (cols % kBlockValues != 0 || blocks.size() < rows * per_row * (kBlockValues / 2) || scales.size() < rows * per_row)
    throw std::invalid_argument("mxfp4_rows_as_ggml: " + std::to_string(rows) + " rows of " + std::to_string(cols) +
                                " values do not fit the blocks and scales given");
  std::vector<std::byte> out(count * per_row * kBlockBytes);
  std::byte* to = out.data();
  for (std::size_t r = 0; r < count; ++r) {
    const std::size_t row = first + r * step;
    for (std::size_t b = 0; b < per_row; ++b, to += kBlockBytes) {
      const std::byte* codes = blocks.data() + (row * per_row + b) * (kBlockValues / 2);
      to[0] = scales[row * per_row + b];
      // Element i's code: byte i / 2, low nibble for even i. ggml pairs element j with element j + 16.
      const auto code = [&](std::size_t i) { return (std::to_integer<unsigned>(codes[i / 2]) >> (4 * (i % 2))) & 15u; };
      for (std::size_t j = 0; j < kBlockValues / 2; ++j)
        to[1 + j] = static_cast<std::byte>(code(j) | code(j + kBlockValues / 2) << 4);
    }
  }
  return out;
}

std::vector<std::byte> columns_as_rows(std::span<const std::byte> matrix, std::size_t element_bytes, std::size_t inputs,
                                       std::size_t outputs, std::size_t first, std::size_t step, std::size_t count) {
  if (matrix.size() < inputs * outputs * element_bytes || (count != 0 && first + (count - 1) * step >= outputs))
    throw std::invalid_argument("columns_as_rows: " + std::to_string(count) + " columns from " + std::to_string(first) +
                                " by " + std::to_string(step) + " do not fit a " + std::to_string(inputs) + " x " +
                                std::to_string(outputs) + " matrix");
  std::vector<std::byte> out(count * inputs * element_bytes);
  for (std::size_t r = 0; r < count; ++r) {
    const std::size_t column = first + r * step;
    for (std::size_t i = 0; i < inputs; ++i) {
      std::memcpy(out.data() + (r * inputs + i) * element_bytes, matrix.data() + (i * outputs + column) * element_bytes,
                  element_bytes);
    }
  }
  return out;
}

}  // namespace engine::model
