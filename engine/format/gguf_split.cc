#include "engine/format/gguf_split.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <stdexcept>

#include "engine/format/format_error.h"
#include "engine/format/gguf_writer.h"

namespace engine::format {
namespace {

constexpr std::string_view kSplitNo = "split.no";
constexpr std::string_view kSplitCount = "split.count";
constexpr std::string_view kSplitTensors = "split.tensors.count";

std::optional<std::uint64_t> uint_key(const GgufFile& file, std::string_view key) {
  const auto* value = file.layout().find(key);
  if (value == nullptr) return std::nullopt;
  const auto n = value->as_uint();
  if (!n) throw FormatError(file.path().string() + ": " + std::string(key) + " is not a non-negative integer");
  return n;
}

// "{prefix}-00001-of-00003.gguf": its prefix, number and count.
struct SplitName {
  std::string prefix;
  std::uint64_t number = 0;
  std::uint64_t count = 0;
};

std::optional<SplitName> split_name(const std::filesystem::path& path) {
  static const std::regex pattern(R"(^(.*)-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);
  const std::string text = path.string();
  std::smatch m;
  if (!std::regex_match(text, m, pattern)) return std::nullopt;
  return SplitName{m[1].str(), std::stoull(m[2].str()), std::stoull(m[3].str())};
}

}  // namespace

std::string gguf_split_part_name(std::string_view prefix, std::uint32_t number, std::uint32_t count) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%05u-of-%05u.gguf", number, count);
  return std::string(prefix) + suffix;
}

GgufParts GgufParts::open(const std::filesystem::path& path) {
  std::vector<GgufFile> parts;
  parts.push_back(GgufFile::open(path));
  const auto count = uint_key(parts.front(), kSplitCount).value_or(1);
  const auto number = uint_key(parts.front(), kSplitNo).value_or(0);
  if (count == 0 || number >= count) {
    throw FormatError(path.string() + ": split.no " + std::to_string(number) + " is not a part of split.count " +
                      std::to_string(count));
  }
  const auto name = split_name(path);
  if (number != 0) {
    const std::string first =
        name ? gguf_split_part_name(name->prefix, 1, static_cast<std::uint32_t>(count)) : "its first part";
    throw FormatError(path.string() + " is part " + std::to_string(number + 1) + " of a GGUF split into " +
                      std::to_string(count) + ": open the first part, " + first + ", which brings in the rest");
  }
  if (count > 1 && (!name || name->number != 1 || name->count != count)) {
    throw FormatError(path.string() + ": split.count is " + std::to_string(count) +
                      " but the file is not named {prefix}" +
                      gguf_split_part_name("", 1, static_cast<std::uint32_t>(count)) +
                      ", so its other parts cannot be found; keep the names gguf-split gave the parts");
  }
  for (std::uint64_t i = 1; i < count; ++i) {
    const std::filesystem::path part =
        gguf_split_part_name(name->prefix, static_cast<std::uint32_t>(i + 1), static_cast<std::uint32_t>(count));
    std::error_code ec;
    if (!std::filesystem::is_regular_file(part, ec)) {
      throw FormatError(path.string() + " is split into " + std::to_string(count) + " parts and part " +
                        std::to_string(i + 1) + ", " + part.string() +
                        ", is missing: fetch every part (fetchd pull takes them all) into the same directory");
    }
    parts.push_back(GgufFile::open(part));
    const auto part_count = uint_key(parts.back(), kSplitCount);
    const auto part_number = uint_key(parts.back(), kSplitNo);
    if (part_count != count || part_number != i) {
      throw FormatError(part.string() + " says it is part " +
                        (part_number ? std::to_string(*part_number + 1) : std::string("(no split.no)")) + " of " +
                        (part_count ? std::to_string(*part_count) : std::string("(no split.count)")) + ", not part " +
                        std::to_string(i + 1) + " of " + std::to_string(count) + " as " + path.string() +
                        " names it: the parts come from different splits; fetch them again");
    }
  }
  return GgufParts(std::move(parts));
}

GgufParts::GgufParts(std::vector<GgufFile> parts) : parts_(std::move(parts)) {
  for (std::size_t p = 0; p < parts_.size(); ++p) {
    const auto& tensors = parts_[p].layout().tensors;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto [it, fresh] = where_.emplace(tensors[t].name, std::pair{p, t});
      if (!fresh) {
        throw FormatError("tensor " + tensors[t].name + " is in both " + parts_[it->second.first].path().string() +
                          " and " + parts_[p].path().string() + ": the parts come from different splits");
      }
    }
  }
  if (const auto expected = uint_key(parts_.front(), kSplitTensors); expected && *expected != where_.size()) {
    throw FormatError(parts_.front().path().string() + ": split.tensors.count is " + std::to_string(*expected) +
                      " but the " + std::to_string(parts_.size()) + " parts hold " + std::to_string(where_.size()) +
                      " tensors");
  }
}

std::optional<GgufParts::Tensor> GgufParts::find_tensor(std::string_view name) const {
  const auto it = where_.find(std::string(name));
  if (it == where_.end()) return std::nullopt;
  const auto& file = parts_[it->second.first];
  const auto& info = file.layout().tensors[it->second.second];
  return Tensor{&info, file.data(info), &file.path()};
}

std::vector<std::filesystem::path> write_gguf_split(const GgufFile& whole, const std::filesystem::path& prefix,
                                                    std::size_t max_tensors) {
  if (max_tensors == 0) throw std::invalid_argument("a GGUF split needs at least one tensor per part");
  const auto& layout = whole.layout();
  const std::size_t count = std::max<std::size_t>(1, (layout.tensors.size() + max_tensors - 1) / max_tensors);
  std::vector<std::filesystem::path> paths;
  for (std::size_t i = 0; i < count; ++i) {
    GgufWriter writer(layout.version, static_cast<std::uint32_t>(layout.alignment));
    writer.add_metadata(std::string(kSplitNo), GgufValue::scalar<std::uint16_t>(static_cast<std::uint16_t>(i)));
    writer.add_metadata(std::string(kSplitCount), GgufValue::scalar<std::uint16_t>(static_cast<std::uint16_t>(count)));
    writer.add_metadata(std::string(kSplitTensors),
                        GgufValue::scalar<std::int32_t>(static_cast<std::int32_t>(layout.tensors.size())));
    if (i == 0) {
      for (const auto& [key, value] : layout.metadata) {
        if (key != "general.alignment" && !key.starts_with("split.")) writer.add_metadata(key, value);
      }
    }
    const std::size_t end = std::min(layout.tensors.size(), (i + 1) * max_tensors);
    for (std::size_t t = i * max_tensors; t < end; ++t) {
      const auto& tensor = layout.tensors[t];
      const auto bytes = whole.data(tensor);
      writer.add_tensor(tensor.name, tensor.dims, *tensor.type, std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
    paths.emplace_back(
        gguf_split_part_name(prefix.string(), static_cast<std::uint32_t>(i + 1), static_cast<std::uint32_t>(count)));
    writer.write(paths.back());
  }
  return paths;
}

}  // namespace engine::format
