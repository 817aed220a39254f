#include "engine/grammar/utf8_ranges.h"

#include <string>

#include "base/utf8.h"

namespace engine::grammar {
namespace {

// Encodings are 1..4 bytes; code points of one length lie in one of these spans.
constexpr char32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

void split(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  for (const char32_t end : kLengthEnds) {
    if (lo <= end && hi > end) {
      split(lo, end, out);
      split(end + 1, hi, out);
      return;
    }
  }
  // lo and hi encode to the same length. Split until every continuation byte either spans its full range
  // (80-BF) or is fixed, so that the byte ranges' product is exactly [lo, hi].
  std::string lo_bytes, hi_bytes;
  base::append_utf8(lo_bytes, lo);
  base::append_utf8(hi_bytes, hi);
  const std::size_t length = lo_bytes.size();
  for (std::size_t i = 1; i < length; ++i) {
    const char32_t mask = (char32_t{1} << (6 * i)) - 1;  // the low i continuation bytes' bits
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        split(lo, lo | mask, out);
        split((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        split(lo, (hi & ~mask) - 1, out);
        split(hi & ~mask, hi, out);
        return;
      }
    }
  }
  Utf8Sequence sequence;
  sequence.length = static_cast<std::uint8_t>(length);
  for (std::size_t i = 0; i < length; ++i) {
    sequence.bytes[i] = {static_cast<std::uint8_t>(lo_bytes[i]), static_cast<std::uint8_t>(hi_bytes[i])};
  }
  out.push_back(sequence);
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  for (const auto& range : ranges) split(range.lo, range.hi, out);
  return out;
}

}  // namespace engine::grammar
