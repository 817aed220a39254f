#pragma once

// Which kernel table runs: the best SIMD level the CPU reports, or the one ENGINE_SIMD names (matmul.h
// declares the public side: simd_level(), supported_simd_levels()). Internal to engine/cpu: the products
// (matmul.cc) and attention (attention.cc) take their kernels from here.

#include <string_view>

#include "engine/cpu/kernels.h"

namespace engine::cpu {

// The table in use, chosen once, at the first call.
const kernels::Table& active_table();
// The table of `level`; std::invalid_argument when the CPU does not run it.
const kernels::Table& table_or_throw(std::string_view level);

}  // namespace engine::cpu
