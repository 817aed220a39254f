#include "fetchd/xet/xorb_decode.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/byteranges.h"
#include "fetchd/xet/xorb_chunk.h"

namespace fetchd::xet {

namespace {

// The answer's parts, each with the xorb bytes its Content-Range names.
std::vector<RangePart> answer_parts(const FetchUnit& unit, const transfer::HttpHeaders& headers,
                                    std::span<const std::byte> body) {
  const auto requested = unit.byte_ranges();
  std::vector<RangePart> parts;
  const auto content_type = headers.get("Content-Type").value_or("");
  if (content_type.find("multipart/byteranges") != std::string::npos) {
    parts = parse_byteranges(content_type, body, requested);
  } else {
    const auto cr = parse_content_range(headers.get("Content-Range").value_or(""));
    if (!cr || requested.size() != 1 || !(cr->range == requested.front()) || cr->range.length() != body.size()) {
      throw FetchError(ErrorKind::Integrity, "the Xet store answered bytes " +
                                                 headers.get("Content-Range").value_or("?") + " of xorb " + unit.xorb +
                                                 " when asked for " + range_header_value(requested));
    }
    parts.push_back({cr->range, body});
  }
  return parts;
}

// Where each chunk's record starts in `bytes` (the records of `range`), from the headers alone, and where
// the last one ends.
std::vector<std::uint64_t> record_offsets(const FetchRange& range, std::span<const std::byte> bytes,
                                          const std::string& xorb) {
  std::vector<std::uint64_t> offsets{0};
  for (std::uint32_t i = range.chunks.start; i < range.chunks.end; ++i) {
    const auto at = offsets.back();
    if (at >= bytes.size()) break;
    const auto header = read_chunk_header(bytes.subspan(at), {i, range.bytes.start + at});
    offsets.push_back(at + header.record_size());
  }
  if (offsets.size() - 1 != range.chunks.end - range.chunks.start || offsets.back() != bytes.size()) {
    throw FetchError(ErrorKind::Integrity, "bytes " + std::to_string(range.bytes.start) + "-" +
                                               std::to_string(range.bytes.end) + " of xorb " + xorb +
                                               " do not hold exactly the " +
                                               std::to_string(range.chunks.end - range.chunks.start) +
                                               " chunk records the reconstruction promised");
  }
  return offsets;
}

// Decodes the term's chunk records and writes the part of it that lands in [clip_start, clip_end).
void write_term(const TermWrite& w, std::span<const std::byte> records, const transfer::PartialFile& file,
                const std::string& xorb, const std::string& name) {
  ChunkReader reader(records, w.chunks.start);
  std::uint64_t position = w.term_start;  // file offset of the next decoded byte
  while (auto chunk = reader.next()) {
    const std::uint64_t chunk_end = position + chunk->bytes.size();
    const std::uint64_t write_from = std::max(position, w.clip_start);
    const std::uint64_t write_to = std::min(chunk_end, w.clip_end);
    if (write_from < write_to && chunk_end <= w.term_start + w.unpacked_length) {
      file.write_at(write_from, chunk->bytes.subspan(write_from - position, write_to - write_from));
    }
    position = chunk_end;
  }
  if (position - w.term_start != w.unpacked_length) {
    throw FetchError(ErrorKind::Integrity,
                     "chunks [" + std::to_string(w.chunks.start) + ", " + std::to_string(w.chunks.end) + ") of xorb " +
                         xorb + " decode to " + std::to_string(position - w.term_start) +
                         " bytes, but the reconstruction of '" + name + "' says " + std::to_string(w.unpacked_length));
  }
}

}  // namespace

void write_unit_answer(const FetchUnit& unit, const transfer::HttpHeaders& headers, std::span<const std::byte> body,
                       const transfer::PartialFile& file, const std::string& name) {
  const auto parts = answer_parts(unit, headers, body);
  for (const auto& range : unit.ranges) {
    const RangePart* part = nullptr;
    for (const auto& p : parts) {
      if (p.range.start <= range.bytes.start && range.bytes.end <= p.range.end) part = &p;
    }
    if (part == nullptr) {
      throw FetchError(ErrorKind::Integrity, "the Xet store's answer for xorb " + unit.xorb + " lacks bytes " +
                                                 std::to_string(range.bytes.start) + "-" +
                                                 std::to_string(range.bytes.end));
    }
    const auto bytes = part->bytes.subspan(range.bytes.start - part->range.start, range.bytes.length());
    // Where each chunk's record starts, from the headers alone; then every term decodes its own chunks
    // straight into the file, so no decoded copy of the range is ever held.
    const auto offsets = record_offsets(range, bytes, unit.xorb);
    for (const auto& w : unit.writes) {
      if (!range.chunks.contains(w.chunks)) continue;
      const auto from = offsets[w.chunks.start - range.chunks.start];
      const auto to = offsets[w.chunks.end - range.chunks.start];
      write_term(w, bytes.subspan(from, to - from), file, unit.xorb, name);
    }
  }
}

}  // namespace fetchd::xet
