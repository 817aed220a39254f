#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fetchd::transfer {

// `text` as an unsigned decimal number when it is one and nothing else: no sign, spaces or trailing
// characters, and no overflow; nullopt otherwise (also for an empty text). Sizes and offsets in headers
// (X-Linked-Size, Content-Range, X-Xet-Token-Expiration) are read with it.
inline std::optional<std::uint64_t> parse_u64(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace fetchd::transfer
