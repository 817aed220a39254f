#include "fetchd/xet/byteranges.h"

#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/decimal.h"

namespace fetchd::xet {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw FetchError(ErrorKind::Integrity, "a multipart/byteranges answer from the Xet store " + what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string boundary_of(std::string_view content_type) {
  std::size_t at = 0;
  while (at < content_type.size()) {
    const auto semicolon = content_type.find(';', at);
    auto param =
        trim(content_type.substr(at, semicolon == std::string_view::npos ? std::string_view::npos : semicolon - at));
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && iequals(trim(param.substr(0, eq)), "boundary")) {
      auto value = trim(param.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      return std::string(value);
    }
    if (semicolon == std::string_view::npos) break;
    at = semicolon + 1;
  }
  return {};
}

}  // namespace

std::string range_header_value(std::span<const ByteRange> ranges) {
  std::string value = "bytes=";
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i) value += ',';
    value += std::to_string(ranges[i].start) + "-" + std::to_string(ranges[i].end);
  }
  return value;
}

std::optional<ContentRange> parse_content_range(std::string_view value) {
  value = trim(value);
  if (!value.starts_with("bytes ")) return std::nullopt;
  value.remove_prefix(6);
  const auto dash = value.find('-');
  const auto slash = value.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) return std::nullopt;
  const auto start = transfer::parse_u64(trim(value.substr(0, dash)));
  const auto end = transfer::parse_u64(trim(value.substr(dash + 1, slash - dash - 1)));
  const auto total_text = trim(value.substr(slash + 1));
  const auto total = total_text == "*" ? std::optional<std::uint64_t>(0) : transfer::parse_u64(total_text);
  if (!start || !end || !total || *end < *start) return std::nullopt;
  return ContentRange{{*start, *end}, *total};
}

std::vector<RangePart> parse_byteranges(std::string_view content_type, std::span<const std::byte> body,
                                        std::span<const ByteRange> requested) {
  const std::string boundary = boundary_of(content_type);
  if (boundary.empty() || boundary.size() > 200)
    refuse("has no usable boundary in '" + std::string(content_type) + "'");
  const std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  const std::string delimiter = "--" + boundary;

  std::vector<RangePart> parts;
  std::size_t at = text.find(delimiter);
  if (at == std::string_view::npos) refuse("has no part delimiter");
  for (;;) {
    at += delimiter.size();
    if (text.substr(at, 2) == "--") break;  // the closing delimiter
    // Part headers: lines up to an empty line.
    const auto headers_start = text.find("\r\n", at);
    const auto headers_end = text.find("\r\n\r\n", at);
    if (headers_start == std::string_view::npos || headers_end == std::string_view::npos) {
      refuse("has a part without a header block");
    }
    std::optional<ContentRange> range;
    for (std::size_t line = headers_start + 2; line < headers_end + 2;) {
      const auto eol = text.find("\r\n", line);
      const auto header = text.substr(line, eol - line);
      const auto colon = header.find(':');
      if (colon != std::string_view::npos && iequals(trim(header.substr(0, colon)), "Content-Range")) {
        range = parse_content_range(header.substr(colon + 1));
      }
      line = eol + 2;
    }
    if (!range) refuse("has a part without a valid Content-Range");
    const std::uint64_t data_start = headers_end + 4;
    const std::uint64_t length = range->range.length();
    if (length > text.size() - data_start) {
      refuse("ends inside the part for bytes " + std::to_string(range->range.start) + "-" +
             std::to_string(range->range.end) + " (" + std::to_string(text.size() - data_start) + " of " +
             std::to_string(length) + " bytes present)");
    }
    bool asked = false;
    for (const auto& r : requested) asked |= range->range.start >= r.start && range->range.end <= r.end;
    if (!asked) {
      refuse("holds bytes " + std::to_string(range->range.start) + "-" + std::to_string(range->range.end) +
             ", which were not asked for");
    }
    parts.push_back({range->range, body.subspan(data_start, length)});
    at = text.find(delimiter, data_start + length);
    if (at == std::string_view::npos)
      refuse("has no delimiter after the part for bytes " + std::to_string(range->range.start) + "-");
  }
  return parts;
}

}  // namespace fetchd::xet
