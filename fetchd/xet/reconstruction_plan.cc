#include "fetchd/xet/reconstruction_plan.h"

#include <algorithm>
#include <map>

#include "fetchd/request/fetch_error.h"

namespace fetchd::xet {

std::uint64_t FetchUnit::wire_bytes() const {
  std::uint64_t n = 0;
  for (const auto& r : ranges) n += r.bytes.length();
  return n;
}

std::uint64_t FetchUnit::span_start() const {
  std::uint64_t s = UINT64_MAX;
  for (const auto& w : writes) s = std::min(s, w.clip_start);
  return s;
}

std::uint64_t FetchUnit::span_end() const {
  std::uint64_t e = 0;
  for (const auto& w : writes) e = std::max(e, w.clip_end);
  return e;
}

std::vector<ByteRange> FetchUnit::byte_ranges() const {
  std::vector<ByteRange> out;
  for (const auto& r : ranges) out.push_back(r.bytes);
  return out;
}

std::vector<FetchUnit> plan_units(const Reconstruction& recon, std::uint64_t recon_start, std::uint64_t want_start,
                                  std::uint64_t want_end, const DoneRanges& done, const std::string& name) {
  std::map<std::string, FetchUnit> by_url;
  // The first term's decoded bytes begin offset_into_first_range before the requested start.
  if (recon.offset_into_first_range > recon_start ||
      (!recon.terms.empty() && recon.offset_into_first_range >= recon.terms.front().unpacked_length)) {
    throw FetchError(ErrorKind::Integrity,
                     "the reconstruction of '" + name + "' for bytes from " + std::to_string(recon_start) + " starts " +
                         std::to_string(recon.offset_into_first_range) + " bytes into its first term, which cannot be");
  }
  std::uint64_t cursor = recon_start - recon.offset_into_first_range;
  for (const auto& term : recon.terms) {
    const std::uint64_t term_start = cursor;
    cursor += term.unpacked_length;
    const std::uint64_t clip_start = std::max(term_start, want_start);
    const std::uint64_t clip_end = std::min(cursor, want_end);
    if (clip_start >= clip_end || done.covers(clip_start, clip_end)) continue;
    const FetchRange* range = nullptr;
    const FetchSource* source = recon.source_for(term, &range);
    auto& unit = by_url[source->url];
    unit.xorb = term.xorb;
    unit.url = source->url;
    if (std::none_of(unit.ranges.begin(), unit.ranges.end(),
                     [&](const FetchRange& r) { return r.bytes == range->bytes; })) {
      unit.ranges.push_back(*range);
    }
    unit.writes.push_back({term.chunks, term.unpacked_length, term_start, clip_start, clip_end});
  }
  std::vector<FetchUnit> units;
  for (auto& [url, unit] : by_url) {
    std::sort(unit.ranges.begin(), unit.ranges.end(),
              [](const auto& a, const auto& b) { return a.bytes.start < b.bytes.start; });
    units.push_back(std::move(unit));
  }
  return units;
}

}  // namespace fetchd::xet
