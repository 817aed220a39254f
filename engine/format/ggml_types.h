#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace engine::format {

// Storage facts of one ggml tensor type: `block_size` elements are stored in `type_size` bytes.
struct GgmlTypeInfo {
  std::uint32_t id;
  std::string_view name;
  std::uint32_t block_size;
  std::uint32_t type_size;
};

// The type with this GGUF id, or nullptr for ids this reader does not know (retired or future types).
const GgmlTypeInfo* ggml_type_info(std::uint32_t id);
const GgmlTypeInfo* ggml_type_by_name(std::string_view name);

// Bytes needed by `elements` values of the type, or nullopt when `elements` is not a whole number of
// blocks or the size overflows.
std::optional<std::uint64_t> ggml_byte_size(const GgmlTypeInfo& type, std::uint64_t elements);

// "F32, F16, Q4_0, …": every known type name, for error messages.
std::string ggml_known_type_names();

}  // namespace engine::format
