#pragma once

// The error both parser registries give for a name they do not know.

#include <span>
#include <stdexcept>
#include <string_view>

namespace serverd::parsers {

// "unknown KIND 'NAME': choose one of A, B, C" (the name escaped for printing).
std::invalid_argument unknown_parser(std::string_view kind, std::string_view name,
                                     std::span<const std::string_view> known);

}  // namespace serverd::parsers
