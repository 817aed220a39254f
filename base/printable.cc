#include "base/printable.h"

#include <cstddef>
#include <cstdint>

namespace base {

namespace {

// The length of the UTF-8 sequence at text[at] when it is well formed (shortest form, no surrogates, at
// most U+10FFFF) and not a control character; 0 otherwise.
std::size_t printable_sequence(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(at);
  if (lead < 0x20 || lead == 0x7f) return 0;
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint32_t cp = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, cp = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, cp = lead & 0x0fu;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, cp = lead & 0x07u;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (byte(at + i) & 0x3fu);
  }
  const bool overlong = (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
  const bool c1 = cp >= 0x80 && cp <= 0x9f;
  if (overlong || surrogate || c1 || cp > 0x10ffff) return 0;
  return length;
}

}  // namespace

bool has_control_characters(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = printable_sequence(text, at);
    if (length == 0) return true;
    at += length;
  }
  return false;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    if (const std::size_t length = printable_sequence(text, at); length > 0) {
      out.append(text.substr(at, length));
      at += length;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[at++]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace base
