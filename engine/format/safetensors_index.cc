#include "engine/format/safetensors_index.h"

#include <cmath>
#include <set>

#include "engine/format/format_error.h"
#include "engine/format/json.h"
#include "engine/format/mapped_file.h"

namespace engine::format {

namespace {

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw FormatError(std::string(name) + ": not a valid safetensors index: " + what);
}

}  // namespace

bool is_safe_relative_path(std::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  if (path.find('\\') != std::string_view::npos || path.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = path.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

std::vector<std::string> SafetensorsIndex::shard_files() const {
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map) files.insert(file);
  return {files.begin(), files.end()};
}

SafetensorsIndex parse_safetensors_index(std::string_view json, std::string_view name) {
  if (json.size() > kMaxSafetensorsIndexBytes) {
    fail(name, "it has " + std::to_string(json.size()) + " bytes, over the limit of " +
                   std::to_string(kMaxSafetensorsIndexBytes));
  }
  std::size_t consumed = 0;
  std::string error;
  const auto doc = parse_json_prefix(json, consumed, error, DuplicateKeys::kKeepAll);
  if (!error.empty()) fail(name, "invalid JSON: " + error);
  if (const auto key = repeated_key(doc)) fail(name, "an object in it names '" + *key + "' twice");
  if (json.find_first_not_of(" \t\r\n", consumed) != std::string_view::npos) {
    fail(name, "text follows the JSON value at byte " + std::to_string(consumed));
  }
  if (!doc.IsObject()) fail(name, "the top level is not a JSON object");

  SafetensorsIndex index;
  const auto map_it = doc.FindMember("weight_map");
  if (map_it == doc.MemberEnd() || !map_it->value.IsObject()) fail(name, "no 'weight_map' object");
  for (const auto& member : map_it->value.GetObject()) {
    std::string tensor(member.name.GetString(), member.name.GetStringLength());
    if (!member.value.IsString()) fail(name, "weight_map['" + tensor + "'] is not a string");
    std::string file(member.value.GetString(), member.value.GetStringLength());
    if (!is_safe_relative_path(file)) {
      fail(name, "weight_map['" + tensor + "'] = '" + file + "' is not a safe relative path");
    }
    if (!file.ends_with(".safetensors")) {
      fail(name, "weight_map['" + tensor + "'] = '" + file + "' is not a .safetensors file");
    }
    index.weight_map.emplace(tensor, std::move(file));
  }

  const auto meta_it = doc.FindMember("metadata");
  if (meta_it != doc.MemberEnd() && !meta_it->value.IsNull()) {
    if (!meta_it->value.IsObject()) fail(name, "'metadata' is not a JSON object");
    const auto size_it = meta_it->value.FindMember("total_size");
    if (size_it != meta_it->value.MemberEnd()) {
      const auto& v = size_it->value;
      // Some writers emit the size as a float with an integral value (e.g. 16060522496.0).
      if (v.IsUint64()) {
        index.total_size = v.GetUint64();
      } else if (v.IsDouble() && v.GetDouble() >= 0 && v.GetDouble() < 0x1p63 &&
                 std::floor(v.GetDouble()) == v.GetDouble()) {
        index.total_size = static_cast<std::uint64_t>(v.GetDouble());
      } else {
        fail(name, "metadata.total_size is not a non-negative integer");
      }
    }
  }
  return index;
}

SafetensorsIndex read_safetensors_index(const std::filesystem::path& path) {
  const auto file = MappedFile::open(path);
  const auto bytes = file.bytes();
  return parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                 path.string());
}

}  // namespace engine::format
