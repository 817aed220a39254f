#include "engine/format/ggml_types.h"

#include <array>

namespace engine::format {

namespace {

constexpr std::uint32_t kQK = 256;  // super-block size of the K and IQ families

// Block layouts as ggml stores them; sizes are the sum of each block's fields.
constexpr std::array kTypes = {
    GgmlTypeInfo{0, "F32", 1, 4},
    GgmlTypeInfo{1, "F16", 1, 2},
    GgmlTypeInfo{2, "Q4_0", 32, 2 + 16},
    GgmlTypeInfo{3, "Q4_1", 32, 2 + 2 + 16},
    GgmlTypeInfo{6, "Q5_0", 32, 2 + 4 + 16},
    GgmlTypeInfo{7, "Q5_1", 32, 2 + 2 + 4 + 16},
    GgmlTypeInfo{8, "Q8_0", 32, 2 + 32},
    GgmlTypeInfo{9, "Q8_1", 32, 4 + 4 + 32},
    GgmlTypeInfo{10, "Q2_K", kQK, 2 + 2 + kQK / 16 + kQK / 4},
    GgmlTypeInfo{11, "Q3_K", kQK, 2 + kQK / 4 + kQK / 8 + 12},
    GgmlTypeInfo{12, "Q4_K", kQK, 2 + 2 + 12 + kQK / 2},
    GgmlTypeInfo{13, "Q5_K", kQK, 2 + 2 + 12 + kQK / 8 + kQK / 2},
    GgmlTypeInfo{14, "Q6_K", kQK, kQK / 2 + kQK / 4 + kQK / 16 + 2},
    GgmlTypeInfo{15, "Q8_K", kQK, 4 + kQK + kQK / 16 * 2},
    GgmlTypeInfo{16, "IQ2_XXS", kQK, 2 + kQK / 4},
    GgmlTypeInfo{17, "IQ2_XS", kQK, 2 + kQK / 4 + kQK / 32},
    GgmlTypeInfo{18, "IQ3_XXS", kQK, 2 + 3 * kQK / 8},
    GgmlTypeInfo{19, "IQ1_S", kQK, 2 + kQK / 8 + kQK / 16},
    GgmlTypeInfo{20, "IQ4_NL", 32, 2 + 16},
    GgmlTypeInfo{21, "IQ3_S", kQK, 2 + kQK / 4 + kQK / 32 + kQK / 8 + 4},
    GgmlTypeInfo{22, "IQ2_S", kQK, 2 + kQK / 4 + kQK / 16},
    GgmlTypeInfo{23, "IQ4_XS", kQK, 2 + 2 + kQK / 64 + kQK / 2},
    GgmlTypeInfo{24, "I8", 1, 1},
    GgmlTypeInfo{25, "I16", 1, 2},
    GgmlTypeInfo{26, "I32", 1, 4},
    GgmlTypeInfo{27, "I64", 1, 8},
    GgmlTypeInfo{28, "F64", 1, 8},
    GgmlTypeInfo{29, "IQ1_M", kQK, kQK / 8 + kQK / 16 + kQK / 32},
    GgmlTypeInfo{30, "BF16", 1, 2},
    GgmlTypeInfo{34, "TQ1_0", kQK, 2 + 4 * 13},
    GgmlTypeInfo{35, "TQ2_0", kQK, 2 + 64},
    GgmlTypeInfo{39, "MXFP4", 32, 1 + 16},
    GgmlTypeInfo{40, "NVFP4", 64, 4 + 32},
    GgmlTypeInfo{41, "Q1_0", 128, 2 + 16},
    GgmlTypeInfo{42, "Q2_0", 64, 2 + 16},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(std::uint32_t id) {
  for (const auto& type : kTypes) {
    if (type.id == id) return &type;
  }
  return nullptr;
}

const GgmlTypeInfo* ggml_type_by_name(std::string_view name) {
  for (const auto& type : kTypes) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

std::optional<std::uint64_t> ggml_byte_size(const GgmlTypeInfo& type, std::uint64_t elements) {
  if (elements % type.block_size != 0) return std::nullopt;
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / type.block_size, std::uint64_t{type.type_size}, &bytes)) return std::nullopt;
  return bytes;
}

std::string ggml_known_type_names() {
  std::string names;
  for (const auto& type : kTypes) {
    if (!names.empty()) names += ", ";
    names += type.name;
  }
  return names;
}

}  // namespace engine::format
