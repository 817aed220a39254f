#pragma once

#include <filesystem>
#include <string_view>

namespace fetchd::proof {

enum class FormatProof { None, Safetensors, Gguf };

// Proves a finished weight file by its own layout when its name says it is one: a .safetensors file by
// 8 + header + data == file size (and the rest of the reader's checks), a .gguf by every tensor span
// lying inside the file. Other files get FormatProof::None. Throws FetchError(Integrity) naming
// `repo_path` and the reader's finding.
FormatProof prove_format(const std::filesystem::path& file, std::string_view repo_path);

}  // namespace fetchd::proof
