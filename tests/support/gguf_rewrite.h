#pragma once

// A GGUF file copied with some tensors re-stored: for tests that need a file of a type no writer here
// produces (random blocks of a codebook type, a type the engine refuses).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/quant/quant.h"

namespace testing_support {

struct RestoredTensor {
  const engine::format::GgmlTypeInfo* type;
  std::vector<std::byte> data;
};

// Writes `src`'s metadata and tensors to `dst`, each tensor as `restore` returns it (its type and bytes; the
// dims stay), or as it was where `restore` returns nullopt. `restore` sees the tensor and its bytes.
void rewrite_gguf(const std::filesystem::path& src, const std::filesystem::path& dst,
                  const std::function<std::optional<RestoredTensor>(const engine::format::GgufTensor&,
                                                                    std::span<const std::byte>)>& restore);

// `src` (an F32 GGUF) with every matrix (2-D, rows of whole 256-element blocks) re-stored as random blocks
// of `type` scaled to its values (weight_blocks.h's random_blocks_like); returns how many were re-stored.
int write_random_block_copy(const std::filesystem::path& src, const std::filesystem::path& dst,
                            engine::quant::WeightType type, std::uint32_t seed);

}  // namespace testing_support
