#include "fetchd/proof/format_proof.h"

#include "engine/format/format_error.h"
#include "engine/format/gguf.h"
#include "engine/format/safetensors.h"
#include "fetchd/request/fetch_error.h"

namespace fetchd::proof {

FormatProof prove_format(const std::filesystem::path& file, std::string_view repo_path) {
  try {
    if (repo_path.ends_with(".safetensors")) {
      engine::format::SafetensorsFile::open(file);
      return FormatProof::Safetensors;
    }
    if (repo_path.ends_with(".gguf")) {
      engine::format::GgufFile::open(file);
      return FormatProof::Gguf;
    }
  } catch (const engine::format::FormatError& e) {
    throw FetchError(ErrorKind::Integrity,
                     "'" + std::string(repo_path) + "' failed its layout proof and was not kept: " + e.what());
  }
  return FormatProof::None;
}

}  // namespace fetchd::proof
