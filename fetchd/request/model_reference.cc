#include "fetchd/request/model_reference.h"

#include <system_error>

#include "fetchd/request/fetch_error.h"

namespace fetchd::request {

namespace {

bool is_special(char c) {
  return c == '-' || c == '_' || c == '.';
}
bool is_plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::optional<std::string> part_problem(std::string_view part, std::string_view which) {
  if (part.empty()) return std::string("the ") + std::string(which) + " is empty";
  for (std::size_t i = 0; i < part.size(); ++i) {
    const char c = part[i];
    if (!is_plain(c) && !is_special(c)) {
      return std::string("the ") + std::string(which) + " has the character '" + std::string(1, c) +
             "'; only letters, digits, '-', '_' and '.' are allowed";
    }
    if (is_special(c) && (i == 0 || i + 1 == part.size())) {
      return std::string("the ") + std::string(which) + " starts or ends with '" + std::string(1, c) + "'";
    }
    if (is_special(c) && is_special(part[i + 1])) {
      return std::string("the ") + std::string(which) + " has '" + std::string(part.substr(i, 2)) +
             "'; special characters may not follow each other";
    }
  }
  return std::nullopt;
}

bool is_quant_tag(std::string_view tag) {
  if (tag.empty()) return false;
  for (const char c : tag) {
    if (!is_plain(c) && c != '_' && c != '-') return false;
  }
  return true;
}

[[noreturn]] void refuse(std::string_view typed, const std::string& why) {
  throw FetchError(ErrorKind::Usage, "--model '" + std::string(typed) +
                                         "' is not an existing directory, an existing .gguf file, or a repository "
                                         "id of the form org/repo or org/repo:QUANT: " +
                                         why);
}

}  // namespace

bool is_commit_hash(std::string_view text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<std::string> repo_id_problem(std::string_view repo_id) {
  if (repo_id.size() > kMaxRepoIdLength) {
    return "it has " + std::to_string(repo_id.size()) + " characters, more than " + std::to_string(kMaxRepoIdLength);
  }
  const auto slash = repo_id.find('/');
  if (slash == std::string_view::npos) return std::string("it has no '/' between organisation and name");
  if (repo_id.find('/', slash + 1) != std::string_view::npos) return std::string("it has more than one '/'");
  if (auto p = part_problem(repo_id.substr(0, slash), "organisation")) return p;
  return part_problem(repo_id.substr(slash + 1), "repository name");
}

ModelReference parse_model_reference(std::string_view typed) {
  if (typed.empty()) throw FetchError(ErrorKind::Usage, "--model is empty; name a directory, a .gguf file or org/repo");
  ModelReference ref;
  ref.kind = ModelReference::Kind::HubRepository;
  ref.typed = std::string(typed);

  std::error_code ec;
  const std::filesystem::path path(typed);
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) {
    ref.kind = ModelReference::Kind::LocalDirectory;
    ref.local_path = path;
    return ref;
  }
  if (std::filesystem::is_regular_file(status)) {
    if (path.extension() == ".gguf") {
      ref.kind = ModelReference::Kind::LocalGguf;
      ref.local_path = path;
      return ref;
    }
    refuse(typed,
           "it is a file, but only .gguf files are served directly (pass the directory that holds a "
           "safetensors checkpoint)");
  }
  const bool looks_like_path = typed.starts_with("/") || typed.starts_with("./") || typed.starts_with("../") ||
                               typed.starts_with("~") || typed.ends_with(".gguf");
  if (looks_like_path) refuse(typed, "no such file or directory");
  if (typed.find('@') != std::string_view::npos) {
    refuse(typed, "'@' is not part of a repository id; pass the revision with --revision");
  }

  std::string_view repo = typed;
  const auto colon = typed.rfind(':');
  if (colon != std::string_view::npos) {
    const auto tag = typed.substr(colon + 1);
    if (!is_quant_tag(tag)) {
      refuse(typed, "the text after ':' should be a quantization tag such as Q4_K_M, not '" + std::string(tag) + "'");
    }
    ref.quant = std::string(tag);
    repo = typed.substr(0, colon);
  }
  if (auto problem = repo_id_problem(repo)) refuse(typed, *problem);
  ref.repo_id = std::string(repo);
  return ref;
}

}  // namespace fetchd::request
