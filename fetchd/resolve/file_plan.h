#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/safetensors_index.h"
#include "fetchd/hub/repo_listing.h"

namespace fetchd::resolve {

// Phase-1 files: small, fetched first, so a repository that is not a loadable model fails after
// kilobytes. Only those present at the repository root are fetched.
inline constexpr std::string_view kMetadataFiles[] = {
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "model.safetensors.index.json",
    "modules.json",  // sentence-transformers: how an embedding model pools (with its modules' config.json)
};
inline constexpr std::string_view kSafetensorsIndex = "model.safetensors.index.json";

const hub::ListingEntry* find_file(const std::vector<hub::ListingEntry>& files, std::string_view path);

// The phase-1 files present at the root of the listing, and the config.json of each sentence-transformers
// module folder ("1_Pooling/config.json": a number, '_', a name), which says how embeddings are pooled.
std::vector<const hub::ListingEntry*> metadata_files(const std::vector<hub::ListingEntry>& files);

// Phase 2 of a safetensors checkpoint: exactly the shards the index names (each must be listed), or,
// without an index, the root-level *.safetensors files. Refuses (FetchError Unsupported) a repository whose
// only weights are in formats the engine cannot load (pytorch_model*.bin, *.pt, *.h5, …), naming them.
std::vector<const hub::ListingEntry*> weight_files(const std::vector<hub::ListingEntry>& files,
                                                   const std::optional<engine::format::SafetensorsIndex>& index,
                                                   std::string_view repo_id);

// The .gguf file(s) to fetch: for `quant` the one file whose name carries that quantization token
// (case-insensitive; Q4_K_M matches x-Q4_K_M.gguf, not x-Q4_K_S.gguf), or all parts of one split GGUF
// (-00001-of-0000N); without `quant`, Q4_K_M, else Q8_0, else the only GGUF. Refuses (NotFound / Usage)
// with the list of candidates when nothing or several unrelated files match.
struct GgufChoice {
  std::vector<const hub::ListingEntry*> parts;  // the file to serve first
  std::string reason;                           // e.g. "picked Q4_K_M", for the log
};
GgufChoice choose_gguf(const std::vector<hub::ListingEntry>& files, std::string_view quant, std::string_view repo_id);

// True when the file name (without directories) carries `quant` as a whole token.
bool gguf_name_has_quant(std::string_view path, std::string_view quant);

}  // namespace fetchd::resolve
