#pragma once

// The float64 numpy reference model (tests/reference/reference_model.py) seen from C++: runs the script
// with the project's reference Python and reads its binary output. Every call starts one Python process.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model/pooling.h"

namespace testing_support {

// The interpreter (REFERENCE_PYTHON, Debian's python3 with numpy) and the script.
const std::filesystem::path& reference_python();
const std::filesystem::path& reference_model_script();

struct ReferenceLogits {
  std::size_t vocab_size = 0;
  // Per sequence: positions × vocab_size values, position-major.
  std::vector<std::vector<double>> sequences;

  std::span<const double> row(std::size_t sequence, std::size_t position) const {
    return std::span(sequences.at(sequence)).subspan(position * vocab_size, vocab_size);
  }
};

// Logits at every position of each sequence; `model` is a model directory or a .gguf file, run as a server
// started with `max_model_len` would (0: the model's max_position_embeddings; it picks LongRoPE's factors).
// Throws std::runtime_error with the script's output when it fails.
ReferenceLogits reference_logits(const std::filesystem::path& model,
                                 const std::vector<std::vector<std::int32_t>>& sequences,
                                 std::size_t max_model_len = 0);

// The final hidden states (after the last norm, before the output matrix) at every position of each sequence:
// `vocab_size` is then the hidden size.
ReferenceLogits reference_hidden_states(const std::filesystem::path& model,
                                        const std::vector<std::vector<std::int32_t>>& sequences);

// The embedding the reference's final hidden states of `tokens` give, pooled by `type` (the last position, the
// mean, or the first), cut to its first `dimensions` values (0: all), then L2-normalised: what an embedding
// model serves.
std::vector<double> reference_embedding(const std::filesystem::path& model, const std::vector<std::int32_t>& tokens,
                                        engine::model::PoolingType type, std::size_t dimensions = 0);

// `steps` greedy tokens after `prompt` (argmax of float64 logits, the whole sequence recomputed each step).
std::vector<std::int32_t> reference_greedy(const std::filesystem::path& model, const std::vector<std::int32_t>& prompt,
                                           int steps);

// Raw GGUF blocks of `type` ("Q4_K", "Q8_0", "F16", ...) dequantized in float64.
std::vector<double> reference_dequant(std::string_view type, std::span<const std::byte> blocks);

// `values` (whole blocks of 32) quantized to `type` ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1") by the script's
// rendering of ggml's reference quantizers, in float32 as ggml computes them.
std::vector<std::byte> reference_quantize(std::string_view type, std::span<const float> values);

}  // namespace testing_support
