#include "engine/format/safetensors.h"

#include <algorithm>
#include <array>
#include <utility>

#include "engine/format/format_error.h"
#include "engine/format/json.h"
#include "engine/format/little_endian.h"

namespace engine::format {

namespace {

struct DTypeInfo {
  SafetensorsDType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array kDTypes = {
    DTypeInfo{SafetensorsDType::Bool, "BOOL", 1},       DTypeInfo{SafetensorsDType::U8, "U8", 1},
    DTypeInfo{SafetensorsDType::I8, "I8", 1},           DTypeInfo{SafetensorsDType::F8_E5M2, "F8_E5M2", 1},
    DTypeInfo{SafetensorsDType::F8_E4M3, "F8_E4M3", 1}, DTypeInfo{SafetensorsDType::F8_E8M0, "F8_E8M0", 1},
    DTypeInfo{SafetensorsDType::I16, "I16", 2},         DTypeInfo{SafetensorsDType::U16, "U16", 2},
    DTypeInfo{SafetensorsDType::F16, "F16", 2},         DTypeInfo{SafetensorsDType::BF16, "BF16", 2},
    DTypeInfo{SafetensorsDType::I32, "I32", 4},         DTypeInfo{SafetensorsDType::U32, "U32", 4},
    DTypeInfo{SafetensorsDType::F32, "F32", 4},         DTypeInfo{SafetensorsDType::F64, "F64", 8},
    DTypeInfo{SafetensorsDType::I64, "I64", 8},         DTypeInfo{SafetensorsDType::U64, "U64", 8},
};

const DTypeInfo& info(SafetensorsDType dtype) {
  for (const auto& i : kDTypes) {
    if (i.dtype == dtype) return i;
  }
  throw std::logic_error("unlisted safetensors dtype");
}

std::string known_dtypes() {
  std::string out;
  for (const auto& i : kDTypes) {
    if (!out.empty()) out += ", ";
    out += i.name;
  }
  return out;
}

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view file_name) : file_(file_name) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(std::string(file_) + ": not a valid safetensors file: " + what);
  }

  SafetensorsTensor parse_tensor(const std::string& name, const rapidjson::Value& entry) const {
    const std::string where = "tensor '" + name + "'";
    if (!entry.IsObject()) fail(where + " is not a JSON object");
    SafetensorsTensor tensor;
    tensor.name = name;

    const auto dtype_it = entry.FindMember("dtype");
    if (dtype_it == entry.MemberEnd() || !dtype_it->value.IsString()) fail(where + " has no string 'dtype'");
    const std::string_view dtype_text(dtype_it->value.GetString(), dtype_it->value.GetStringLength());
    const auto dtype = parse_dtype(dtype_text);
    if (!dtype) {
      fail(where + " has dtype '" + std::string(dtype_text) +
           "', which this reader does not know (known: " + known_dtypes() + ")");
    }
    tensor.dtype = *dtype;

    const auto shape_it = entry.FindMember("shape");
    if (shape_it == entry.MemberEnd() || !shape_it->value.IsArray()) fail(where + " has no array 'shape'");
    std::uint64_t elements = 1;
    for (const auto& dim : shape_it->value.GetArray()) {
      if (!dim.IsUint64()) fail(where + " has a shape entry that is not a non-negative integer");
      tensor.shape.push_back(dim.GetUint64());
      if (__builtin_mul_overflow(elements, dim.GetUint64(), &elements)) fail(where + " has a shape that overflows");
    }

    const auto offsets_it = entry.FindMember("data_offsets");
    if (offsets_it == entry.MemberEnd() || !offsets_it->value.IsArray() || offsets_it->value.Size() != 2 ||
        !offsets_it->value[0].IsUint64() || !offsets_it->value[1].IsUint64()) {
      fail(where + " has no 'data_offsets' of two non-negative integers");
    }
    tensor.begin = offsets_it->value[0].GetUint64();
    tensor.end = offsets_it->value[1].GetUint64();
    if (tensor.end < tensor.begin) {
      fail(where + " has data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
           "] that end before they begin");
    }
    std::uint64_t expected = 0;
    if (__builtin_mul_overflow(elements, dtype_size(tensor.dtype), &expected)) fail(where + " is too large");
    if (expected != tensor.byte_size()) {
      fail(where + " has shape × dtype = " + std::to_string(expected) + " bytes but data_offsets span " +
           std::to_string(tensor.byte_size()) + " bytes");
    }
    return tensor;
  }

  std::map<std::string, std::string> parse_metadata(const rapidjson::Value& value) const {
    if (!value.IsObject()) fail("'__metadata__' is not a JSON object of strings");
    std::map<std::string, std::string> metadata;
    for (const auto& member : value.GetObject()) {
      std::string key(member.name.GetString(), member.name.GetStringLength());
      if (!member.value.IsString()) fail("'__metadata__' value for '" + key + "' is not a string");
      metadata.emplace(key, std::string(member.value.GetString(), member.value.GetStringLength()));
    }
    return metadata;
  }

 private:
  std::string_view file_;
};

}  // namespace

std::string_view dtype_name(SafetensorsDType dtype) {
  return info(dtype).name;
}
std::size_t dtype_size(SafetensorsDType dtype) {
  return info(dtype).size;
}

std::optional<SafetensorsDType> parse_dtype(std::string_view name) {
  for (const auto& i : kDTypes) {
    if (i.name == name) return i.dtype;
  }
  return std::nullopt;
}

SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view name) {
  const HeaderParser parser(name);
  const std::uint64_t file_size = file.size();
  if (file_size < 8)
    parser.fail("the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length");

  SafetensorsLayout layout;
  layout.header_length = load_le<std::uint64_t>(file.data());
  const std::uint64_t n = layout.header_length;
  if (n > kMaxSafetensorsHeaderBytes) {
    parser.fail("the header length is " + std::to_string(n) + " bytes, over the limit of " +
                std::to_string(kMaxSafetensorsHeaderBytes));
  }
  if (n > file_size - 8) {
    parser.fail("the header length is " + std::to_string(n) + " bytes but only " + std::to_string(file_size - 8) +
                " bytes follow it");
  }
  if (n < 2 || file[8] != std::byte{'{'}) parser.fail("the header does not start with '{'");

  // Parse exactly the N header bytes as UTF-8 JSON; only spaces may follow the closing brace.
  const std::string_view header(reinterpret_cast<const char*>(file.data() + 8), n);
  std::size_t consumed = 0;
  std::string error;
  // A repeated name is refused, as the safetensors format requires, not merged.
  const auto doc = parse_json_prefix(header, consumed, error, DuplicateKeys::kKeepAll);
  if (!error.empty()) parser.fail("the header is not valid UTF-8 JSON: " + error);
  if (const auto key = repeated_key(doc)) parser.fail("the header names '" + *key + "' twice");
  for (std::size_t i = consumed; i < n; ++i) {
    if (header[i] != ' ') parser.fail("byte " + std::to_string(i) + " after the header's JSON is not a space");
  }
  if (!doc.IsObject()) parser.fail("the header is not a JSON object");

  for (const auto& member : doc.GetObject()) {
    std::string key(member.name.GetString(), member.name.GetStringLength());
    if (key == "__metadata__") {
      layout.metadata = parser.parse_metadata(member.value);
    } else {
      layout.tensors.push_back(parser.parse_tensor(key, member.value));
    }
  }

  // Spans must tile the data section exactly: sorted by offset, each begins where the previous ended.
  std::sort(layout.tensors.begin(), layout.tensors.end(),
            [](const auto& a, const auto& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  std::uint64_t cursor = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const auto& tensor : layout.tensors) {
    if (tensor.begin < cursor) {
      parser.fail("tensor '" + tensor.name + "' [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                  ") overlaps tensor '" + previous->name + "' which ends at " + std::to_string(cursor));
    }
    if (tensor.begin > cursor) {
      parser.fail("bytes [" + std::to_string(cursor) + ", " + std::to_string(tensor.begin) +
                  ") of the data section belong to no tensor (a hole before '" + tensor.name + "')");
    }
    cursor = tensor.end;
    previous = &tensor;
  }
  const std::uint64_t expected_size = 8 + n + cursor;
  if (expected_size != file_size) {
    parser.fail("8 + header " + std::to_string(n) + " + data " + std::to_string(cursor) + " = " +
                std::to_string(expected_size) + " bytes, but the file has " + std::to_string(file_size) + " bytes (" +
                (file_size < expected_size ? "truncated" : "trailing bytes") + ")");
  }
  return layout;
}

SafetensorsFile::SafetensorsFile(MappedFile file, SafetensorsLayout layout)
    : file_(std::move(file)), layout_(std::move(layout)) {
  for (std::size_t i = 0; i < layout_.tensors.size(); ++i) by_name_.emplace(layout_.tensors[i].name, i);
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto file = MappedFile::open(path);
  auto layout = parse_safetensors(file.bytes(), path.string());
  return SafetensorsFile(std::move(file), std::move(layout));
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &layout_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const SafetensorsTensor& tensor) const {
  return file_.bytes().subspan(layout_.data_offset() + tensor.begin, tensor.byte_size());
}

}  // namespace engine::format
