#pragma once

// Embeddings from a decoder's final hidden states, as sentence-transformers and vLLM's pooling runner make
// them: one vector per prompt, pooled over its tokens (the last one, the mean, or the first), cut to the
// requested dimensions and L2-normalised when the model says so.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/gguf.h"

namespace engine::model {

enum class PoolingType { Last, Mean, Cls };
// vLLM's names: "LAST", "MEAN", "CLS".
std::string_view pooling_type_name(PoolingType type);

struct PoolingConfig {
  PoolingType type = PoolingType::Last;
  bool normalize = true;
};

// vLLM's default for a causal language model served for embeddings: the last token, normalised.
inline constexpr PoolingConfig kDefaultPooling{};

// A sentence-transformers modules.json (`name` for messages) with `read_module_file(path)` returning the text
// of a file it names relative to the model directory (the Pooling module's config.json). A Pooling module
// sets the type (its one true pooling_mode_* key), a Normalize module normalisation; modules that change the
// vector in ways the engine does not implement (Dense, LayerNorm, a pooling mode other than lasttoken,
// mean_tokens and cls_token, or several at once) are refused by name with a ConfigError.
PoolingConfig parse_sentence_transformers(std::string_view modules_json, std::string_view name,
                                          const std::function<std::string(const std::string&)>& read_module_file);
// The pooling a model directory's sentence-transformers files describe; nullopt without a modules.json.
std::optional<PoolingConfig> read_sentence_transformers(const std::filesystem::path& dir);
// A GGUF's "{arch}.pooling_type" (llama.cpp's: 1 mean, 2 cls, 3 last; normalised, as llama.cpp's embeddings
// are by default); nullopt when the file has none or says none. Rank pooling (4) is refused by name.
std::optional<PoolingConfig> gguf_pooling(const format::GgufLayout& gguf, std::string_view name);

// Whether an embedding may be cut short (`dimensions`): config.json's is_matryoshka, or its
// matryoshka_dimensions, the lengths it may be cut to (empty: any), as vLLM reads them.
struct Matryoshka {
  bool enabled = false;
  std::vector<std::size_t> dimensions;
};
Matryoshka parse_matryoshka(std::string_view config_json, std::string_view name);

// One sequence's embedding, built while its prompt is computed chunk by chunk: each step hands the final
// hidden states of the positions it computed.
class PooledState {
 public:
  PooledState(PoolingType type, std::size_t hidden_size);

  // The hidden states of positions [first, first + rows) (hidden_size floats each). Chunks come in order; one
  // starting at position 0 starts over (the sequence was preempted and is recomputed). Mean and first-token
  // pooling need every position from 0; last-token pooling may start anywhere (an earlier prefix cached).
  void add(std::size_t first, std::span<const float> rows);
  // The embedding of positions [0, prompt_tokens): pooled, cut to its first `dimensions` values (0: all), then
  // L2-normalised when `normalize` is set. Every position must have been added.
  std::vector<float> finish(std::size_t prompt_tokens, std::size_t dimensions, bool normalize) const;

 private:
  PoolingType type_;
  std::size_t hidden_size_;
  std::size_t positions_ = 0;   // added so far
  std::vector<double> pooled_;  // Mean: the sum; Last and Cls: the row
};

}  // namespace engine::model
