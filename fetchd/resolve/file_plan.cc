#include "fetchd/resolve/file_plan.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>

#include "fetchd/request/fetch_error.h"

namespace fetchd::resolve {

namespace {

bool is_root(std::string_view path) {
  return path.find('/') == std::string_view::npos;
}

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool iequal_at(std::string_view text, std::size_t at, std::string_view word) {
  if (at + word.size() > text.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(text[at + i])) != std::toupper(static_cast<unsigned char>(word[i]))) {
      return false;
    }
  }
  return true;
}

// Split GGUF parts: "{prefix}-00001-of-00003.gguf".
struct SplitName {
  std::string prefix;
  int part = 0;
  int total = 0;
};
std::optional<SplitName> split_name(std::string_view path) {
  static const std::regex pattern(R"(^(.*)-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);
  std::cmatch m;
  if (!std::regex_match(path.data(), path.data() + path.size(), m, pattern)) return std::nullopt;
  return SplitName{m[1].str(), std::stoi(m[2].str()), std::stoi(m[3].str())};
}

bool is_gguf(std::string_view path) {
  return path.size() > 5 && iequal_at(path, path.size() - 5, ".gguf");
}

std::string list_paths(const std::vector<const hub::ListingEntry*>& entries) {
  std::string out;
  for (const auto* e : entries) out += (out.empty() ? "" : ", ") + e->path;
  return out;
}

// Groups matching files into "one model": a single file, or every part of one split GGUF.
std::vector<std::vector<const hub::ListingEntry*>> group_models(const std::vector<const hub::ListingEntry*>& files) {
  std::map<std::string, std::vector<const hub::ListingEntry*>> splits;
  std::vector<std::vector<const hub::ListingEntry*>> models;
  for (const auto* f : files) {
    if (auto split = split_name(f->path)) {
      splits[split->prefix + "/" + std::to_string(split->total)].push_back(f);
    } else {
      models.push_back({f});
    }
  }
  for (auto& [key, parts] : splits) {
    std::sort(parts.begin(), parts.end(), [](auto* a, auto* b) { return a->path < b->path; });
    models.push_back(parts);
  }
  return models;
}

}  // namespace

const hub::ListingEntry* find_file(const std::vector<hub::ListingEntry>& files, std::string_view path) {
  for (const auto& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

namespace {

// "1_Pooling/config.json": a sentence-transformers module's folder (its index, '_', its name) and config.
bool is_module_config(std::string_view path) {
  const auto slash = path.find('/');
  if (slash == std::string_view::npos || path.substr(slash + 1) != "config.json") return false;
  const std::string_view folder = path.substr(0, slash);
  const auto underscore = folder.find('_');
  if (underscore == 0 || underscore == std::string_view::npos || underscore + 1 == folder.size()) return false;
  return std::all_of(folder.begin(), folder.begin() + static_cast<std::ptrdiff_t>(underscore),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<const hub::ListingEntry*> metadata_files(const std::vector<hub::ListingEntry>& files) {
  std::vector<const hub::ListingEntry*> out;
  for (const auto name : kMetadataFiles) {
    if (const auto* f = find_file(files, name)) out.push_back(f);
  }
  if (find_file(files, "modules.json") != nullptr) {
    for (const auto& f : files) {
      if (is_module_config(f.path)) out.push_back(&f);
    }
  }
  return out;
}

std::vector<const hub::ListingEntry*> weight_files(const std::vector<hub::ListingEntry>& files,
                                                   const std::optional<engine::format::SafetensorsIndex>& index,
                                                   std::string_view repo_id) {
  std::vector<const hub::ListingEntry*> out;
  if (index) {
    for (const auto& shard : index->shard_files()) {
      const auto* f = find_file(files, shard);
      if (f == nullptr) {
        throw FetchError(ErrorKind::Integrity, "model.safetensors.index.json of '" + std::string(repo_id) +
                                                   "' names the shard '" + shard +
                                                   "', which the repository listing does not hold");
      }
      out.push_back(f);
    }
    if (out.empty()) {
      throw FetchError(ErrorKind::Unsupported,
                       "model.safetensors.index.json of '" + std::string(repo_id) + "' maps no tensor to any shard");
    }
    return out;
  }
  for (const auto& f : files) {
    if (is_root(f.path) && f.path.ends_with(".safetensors")) out.push_back(&f);
  }
  if (!out.empty()) return out;

  std::vector<const hub::ListingEntry*> unloadable;
  for (const auto& f : files) {
    if (!is_root(f.path)) continue;
    for (const auto ext : {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz"}) {
      if (f.path.ends_with(ext)) unloadable.push_back(&f);
    }
  }
  if (!unloadable.empty()) {
    throw FetchError(ErrorKind::Unsupported,
                     "repository '" + std::string(repo_id) + "' publishes its weights only as " +
                         list_paths(unloadable) +
                         ", which this engine cannot load (it loads safetensors and GGUF). Nothing beyond the "
                         "configuration was downloaded. Use a repository that ships *.safetensors or a GGUF.");
  }
  throw FetchError(ErrorKind::Unsupported, "repository '" + std::string(repo_id) +
                                               "' has a config.json but no weight files (*.safetensors) at its root");
}

bool gguf_name_has_quant(std::string_view path, std::string_view quant) {
  const auto name = base_name(path);
  if (quant.empty() || !is_gguf(name)) return false;
  const auto is_left_edge = [&](std::size_t at) {
    return at == 0 || name[at - 1] == '-' || name[at - 1] == '.' || name[at - 1] == '_';
  };
  const auto is_right_edge = [&](std::size_t end) {
    return end >= name.size() || name[end] == '-' || name[end] == '.';
  };
  for (std::size_t at = 0; at + quant.size() <= name.size(); ++at) {
    if (is_left_edge(at) && iequal_at(name, at, quant) && is_right_edge(at + quant.size())) return true;
  }
  return false;
}

GgufChoice choose_gguf(const std::vector<hub::ListingEntry>& files, std::string_view quant, std::string_view repo_id) {
  std::vector<const hub::ListingEntry*> ggufs;
  for (const auto& f : files) {
    // Multimodal projectors ship beside the model with the same quant tags; they are never the model.
    if (is_gguf(f.path) && base_name(f.path).find("mmproj") == std::string_view::npos) ggufs.push_back(&f);
  }
  const std::string repo(repo_id);
  if (ggufs.empty()) {
    throw FetchError(ErrorKind::NotFound, "repository '" + repo + "' holds no .gguf file" +
                                              (quant.empty() ? "" : " for :" + std::string(quant)));
  }

  const auto pick = [&](std::string_view q) {
    std::vector<const hub::ListingEntry*> matching;
    for (const auto* f : ggufs) {
      if (gguf_name_has_quant(f->path, q)) matching.push_back(f);
    }
    return group_models(matching);
  };
  const auto single = [&](std::vector<std::vector<const hub::ListingEntry*>> models, std::string_view q) {
    if (models.size() > 1) {
      std::vector<const hub::ListingEntry*> all;
      for (const auto& m : models) all.insert(all.end(), m.begin(), m.end());
      throw FetchError(ErrorKind::Usage, "repository '" + repo + "' has several files for " + std::string(q) + ": " +
                                             list_paths(all) + ". Pass a local path to the one you want.");
    }
    return models.front();
  };
  const auto complete = [&](std::vector<const hub::ListingEntry*> parts) {
    if (auto split = split_name(parts.front()->path); split && static_cast<int>(parts.size()) != split->total) {
      throw FetchError(ErrorKind::Integrity, "repository '" + repo + "' lists " + std::to_string(parts.size()) +
                                                 " of the " + std::to_string(split->total) + " parts of " +
                                                 parts.front()->path);
    }
    return parts;
  };

  if (!quant.empty()) {
    auto models = pick(quant);
    if (models.empty()) {
      throw FetchError(ErrorKind::NotFound, "repository '" + repo + "' has no GGUF for '" + std::string(quant) +
                                                "'. It has: " + list_paths(ggufs));
    }
    return {complete(single(std::move(models), quant)), "quantization " + std::string(quant)};
  }
  for (const std::string_view preferred : {"Q4_K_M", "Q8_0"}) {
    if (auto models = pick(preferred); !models.empty()) {
      return {complete(single(std::move(models), preferred)),
              "picked " + std::string(preferred) + " (no :QUANT given)"};
    }
  }
  const auto models = group_models(ggufs);
  if (models.size() == 1) return {complete(models.front()), "the repository's only GGUF"};
  throw FetchError(ErrorKind::Usage, "repository '" + repo + "' has several GGUF files and none is Q4_K_M or Q8_0: " +
                                         list_paths(ggufs) + ". Name one with " + repo + ":QUANT.");
}

}  // namespace fetchd::resolve
