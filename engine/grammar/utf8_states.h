#pragma once

// A UTF-8 decoder's state between bytes: at a character boundary, or inside a character with one, two or
// three continuation bytes to go (the first of them narrowed after E0, ED, F0 and F4, which exclude overlong
// forms, surrogates and code points above U+10FFFF). The mask cache uses it on both sides of a walk: which
// states a trie subtree's bytes are valid text from, and how far a position reads any valid text.

#include <cstdint>

namespace engine::grammar {

enum Utf8State : std::uint8_t {
  kUtf8Boundary,
  kUtf8Need1,
  kUtf8Need2,
  kUtf8Need2AfterE0,  // next byte A0-BF
  kUtf8Need2AfterED,  // next byte 80-9F
  kUtf8Need3,
  kUtf8Need3AfterF0,  // next byte 90-BF
  kUtf8Need3AfterF4,  // next byte 80-8F
  kUtf8States,
};
inline constexpr std::uint8_t kUtf8Invalid = 0xFF;

// The state after `byte` read in `state`, or kUtf8Invalid when no valid UTF-8 continues that way.
constexpr std::uint8_t utf8_next(std::uint8_t state, std::uint8_t byte) {
  const bool continuation = byte >= 0x80 && byte <= 0xBF;
  switch (state) {
    case kUtf8Boundary:
      if (byte < 0x80) return kUtf8Boundary;
      if (byte >= 0xC2 && byte <= 0xDF) return kUtf8Need1;
      if (byte == 0xE0) return kUtf8Need2AfterE0;
      if (byte == 0xED) return kUtf8Need2AfterED;
      if (byte >= 0xE1 && byte <= 0xEF) return kUtf8Need2;
      if (byte == 0xF0) return kUtf8Need3AfterF0;
      if (byte == 0xF4) return kUtf8Need3AfterF4;
      if (byte >= 0xF1 && byte <= 0xF3) return kUtf8Need3;
      return kUtf8Invalid;
    case kUtf8Need1: return continuation ? std::uint8_t{kUtf8Boundary} : kUtf8Invalid;
    case kUtf8Need2: return continuation ? std::uint8_t{kUtf8Need1} : kUtf8Invalid;
    case kUtf8Need2AfterE0: return byte >= 0xA0 && byte <= 0xBF ? std::uint8_t{kUtf8Need1} : kUtf8Invalid;
    case kUtf8Need2AfterED: return byte >= 0x80 && byte <= 0x9F ? std::uint8_t{kUtf8Need1} : kUtf8Invalid;
    case kUtf8Need3: return continuation ? std::uint8_t{kUtf8Need2} : kUtf8Invalid;
    case kUtf8Need3AfterF0: return byte >= 0x90 && byte <= 0xBF ? std::uint8_t{kUtf8Need2} : kUtf8Invalid;
    case kUtf8Need3AfterF4: return byte >= 0x80 && byte <= 0x8F ? std::uint8_t{kUtf8Need2} : kUtf8Invalid;
    default: return kUtf8Invalid;
  }
}

}  // namespace engine::grammar
