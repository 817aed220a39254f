#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/mapped_file.h"

namespace engine::format {

// GGUF metadata value types, numbered as in the file.
enum class GgufType : std::uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

std::string_view gguf_type_name(GgufType type);
// Bytes of one scalar of a fixed-size type; 0 for String and Array.
std::size_t gguf_scalar_size(GgufType type);

// One metadata value: a scalar, or an array of scalars, strings or arrays. Numeric arrays keep their raw
// little-endian bytes, so a vocabulary of 150k scores costs 600 KB, not 150k objects.
class GgufValue {
 public:
  struct NumericArray {
    GgufType element_type;
    std::vector<std::byte> raw;
  };
  struct NestedArray {
    std::vector<GgufValue> items;  // every item is an Array
  };

  static GgufValue scalar_u64(GgufType type, std::uint64_t bits);  // any integer, bool or float type's bits
  static GgufValue string(std::string text);
  static GgufValue numeric_array(GgufType element_type, std::vector<std::byte> raw);
  static GgufValue string_array(std::vector<std::string> items);
  static GgufValue nested_array(std::vector<GgufValue> items);

  template <typename T>
  static GgufValue scalar(T value);  // chooses the GGUF type from T
  template <typename T>
  static GgufValue array(std::span<const T> values);  // numeric arrays from T

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::Array; }
  // The element type of an array (Array for nested arrays).
  GgufType element_type() const;
  std::size_t size() const;  // elements of an array; 1 for a scalar

  // Scalars. Each returns nullopt when the value is not of a matching kind or does not fit.
  std::optional<std::uint64_t> as_uint() const;  // unsigned, or non-negative signed, integers
  std::optional<std::int64_t> as_int() const;    // any integer that fits
  std::optional<double> as_float() const;        // float types and integers
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;

  // Arrays.
  const std::vector<std::string>* strings() const;
  const std::vector<GgufValue>* nested() const;
  // Element i of a numeric array as a scalar value.
  GgufValue element(std::size_t i) const;
  // The numeric array converted element-wise; nullopt when any element is not representable.
  std::optional<std::vector<double>> floats() const;
  std::optional<std::vector<std::int64_t>> ints() const;

  // Raw little-endian bytes of a fixed-size scalar (for writers).
  std::uint64_t scalar_bits() const { return std::get<std::uint64_t>(data_); }
  const std::vector<std::byte>* numeric_raw() const;

 private:
  GgufValue(GgufType type,
            std::variant<std::uint64_t, std::string, NumericArray, std::vector<std::string>, NestedArray> data)
      : type_(type), data_(std::move(data)) {}

  GgufType type_;
  // Fixed-size scalars are kept as their bit pattern, zero-extended to 64 bits.
  std::variant<std::uint64_t, std::string, NumericArray, std::vector<std::string>, NestedArray> data_;
};

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // innermost (contiguous) first, as GGUF stores them
  const GgmlTypeInfo* type = nullptr;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t size = 0;    // bytes

  std::uint64_t elements() const;
};

// The parsed and validated layout of a GGUF file.
struct GgufLayout {
  std::uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensor> tensors;                          // in file order
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;  // absolute offset of the data section

  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;
};

// Limits that keep a hostile file from making the reader allocate or recurse without bound.
struct GgufLimits {
  std::uint64_t max_string_bytes = 64u << 20;
  std::uint64_t max_metadata_bytes = 1u << 30;  // decoded metadata held in memory
  std::uint32_t max_array_depth = 8;
  std::uint32_t max_dims = 4;
};

// Parses and validates a GGUF v2/v3 file image: header, every metadata value, tensor infos, alignment,
// and every tensor's span (type block size × dims) inside the file, aligned and not overlapping; the
// file may end at most one alignment pad after the last tensor's data. Throws FormatError naming `name`.
GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view name, const GgufLimits& limits = {});

// A mapped, validated GGUF file whose tensor data is read in place.
class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);

  const GgufLayout& layout() const { return layout_; }
  std::span<const std::byte> data(const GgufTensor& tensor) const;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  GgufFile(MappedFile file, GgufLayout layout) : file_(std::move(file)), layout_(std::move(layout)) {}

  MappedFile file_;
  GgufLayout layout_;
};

// ---- templates ----------------------------------------------------------------------------------------

namespace detail {
template <typename T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return GgufType::Bool;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return GgufType::UInt8;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return GgufType::Int8;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return GgufType::UInt16;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return GgufType::Int16;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return GgufType::UInt32;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return GgufType::Int32;
  else if constexpr (std::is_same_v<T, float>)
    return GgufType::Float32;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return GgufType::UInt64;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return GgufType::Int64;
  else if constexpr (std::is_same_v<T, double>)
    return GgufType::Float64;
  else
    static_assert(sizeof(T) == 0, "not a GGUF scalar type");
}
}  // namespace detail

template <typename T>
GgufValue GgufValue::scalar(T value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return scalar_u64(detail::gguf_type_of<T>(), bits);
}

template <typename T>
GgufValue GgufValue::array(std::span<const T> values) {
  std::vector<std::byte> raw(values.size_bytes());
  if (!raw.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  return numeric_array(detail::gguf_type_of<T>(), std::move(raw));
}

}  // namespace engine::format
