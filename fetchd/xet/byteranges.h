#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fetchd::xet {

// An inclusive byte range, as HTTP writes them ("bytes=S-E").
struct ByteRange {
  std::uint64_t start = 0;
  std::uint64_t end = 0;  // inclusive
  std::uint64_t length() const { return end - start + 1; }
  bool operator==(const ByteRange&) const = default;
};

struct RangePart {
  ByteRange range;
  std::span<const std::byte> bytes;  // points into the body given to the parser
};

// "bytes=S1-E1,S2-E2": the Range header value for `ranges`.
std::string range_header_value(std::span<const ByteRange> ranges);

// Splits a `multipart/byteranges` body. The boundary comes from `content_type`; each part is matched by its
// own Content-Range (never by position or count) and must lie inside one of the `requested` ranges. A part's
// length is taken from its Content-Range, so binary data that happens to contain the boundary is read
// correctly. Throws FetchError(Integrity) for a malformed body, a missing or foreign part, or a part that
// was not asked for.
std::vector<RangePart> parse_byteranges(std::string_view content_type, std::span<const std::byte> body,
                                        std::span<const ByteRange> requested);

// The start, end and total of a "bytes S-E/T" Content-Range value (total 0 when "*").
struct ContentRange {
  ByteRange range;
  std::uint64_t total = 0;
};
std::optional<ContentRange> parse_content_range(std::string_view value);

}  // namespace fetchd::xet
