#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fetchd::verify {

// The verdict on one stored file (a blob, or a real file in a snapshot).
struct FileReport {
  std::filesystem::path path;
  std::string repo_id;
  std::vector<std::string> used_by;  // snapshot paths ("{commit}/{path}") that name it
  std::string proven_by;             // e.g. "sha256+safetensors-layout"; empty when nothing could be checked
  std::string problem;               // empty when the file proved itself
  bool removed = false;
  bool ok() const { return problem.empty(); }
};

struct VerifyOptions {
  std::optional<std::string> repo_id;  // only this repository; all of them otherwise
  bool remove_failures = false;        // delete files that fail, and the snapshot entries naming them
};

// Re-proves every stored file of the cache from its bytes: the content hash its listing (recorded by fetchd)
// or its blob name gives — SHA-256, git blob SHA-1, or the Xet hash through content-defined chunking — and,
// for .safetensors and .gguf files, their layout. Each file is read once. `on_file` sees every verdict as it
// is reached. Returns all of them.
std::vector<FileReport> verify_cache(const std::filesystem::path& cache_dir, const VerifyOptions& options,
                                     const std::function<void(const FileReport&)>& on_file = {});

}  // namespace fetchd::verify
