#pragma once

#include <array>
#include <cstdint>

namespace fetchd::xet {

// The gear hash constants of Xet content-defined chunking, one per byte value (gear_table.cc).
extern const std::array<std::uint64_t, 256> kGearTable;

}  // namespace fetchd::xet
