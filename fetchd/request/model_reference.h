#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fetchd::request {

// What `--model` names. Local forms are probed first, so the network never shadows a path on disk.
struct ModelReference {
  enum class Kind { LocalDirectory, LocalGguf, HubRepository };

  Kind kind;
  std::string typed;                 // as the user typed it; the served model name
  std::filesystem::path local_path;  // local forms
  std::string repo_id;               // hub form: "org/repo"
  std::string quant;                 // hub form: the QUANT of "org/repo:QUANT", empty otherwise

  bool is_local() const { return kind != Kind::HubRepository; }
};

inline constexpr std::size_t kMaxRepoIdLength = 256;

// Exactly 40 lower-case hex digits: the form of a commit id in the hub's answers and in the cache's refs.
bool is_commit_hash(std::string_view text);

// Why `repo_id` is not a valid "org/repo" id, or nullopt when it is: exactly one '/', characters
// [A-Za-z0-9_.-], no special character leading, trailing or next to another, no "..", at most 256 chars.
std::optional<std::string> repo_id_problem(std::string_view repo_id);

// Classifies `typed`: an existing directory, an existing .gguf file, "org/repo" or "org/repo:QUANT" (the
// tag splits at the last colon). Throws FetchError(Usage) with a message that says what was expected.
ModelReference parse_model_reference(std::string_view typed);

}  // namespace fetchd::request
