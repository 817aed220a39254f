#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fetchd/xet/byteranges.h"
#include "fetchd/xet/reconstruction.h"
#include "fetchd/xet/resume_state.h"

namespace fetchd::xet {

// One term's bytes that land in the file: the term starts at `term_start`, and [clip_start, clip_end) of the
// file is written from it.
struct TermWrite {
  ChunkRange chunks;
  std::uint64_t unpacked_length = 0;
  std::uint64_t term_start = 0;
  std::uint64_t clip_start = 0;
  std::uint64_t clip_end = 0;
};

// One request to the store: the ranges of one signed URL, and the terms they serve.
struct FetchUnit {
  std::string xorb;
  std::string url;
  std::vector<FetchRange> ranges;
  std::vector<TermWrite> writes;

  std::uint64_t wire_bytes() const;
  std::uint64_t span_start() const;
  std::uint64_t span_end() const;
  std::vector<ByteRange> byte_ranges() const;  // the xorb bytes of `ranges`, in their order
};

// Groups the terms of `recon` (the reconstruction asked for file bytes from `recon_start`) that land in
// [want_start, want_end) and are not yet done into fetch units: one per signed URL, each range asked for
// once and the ranges in xorb order. Throws FetchError(Integrity) when the reconstruction's first term
// cannot hold its offset_into_first_range; `name` is the repository path, for that message.
std::vector<FetchUnit> plan_units(const Reconstruction& recon, std::uint64_t recon_start, std::uint64_t want_start,
                                  std::uint64_t want_end, const DoneRanges& done, const std::string& name);

}  // namespace fetchd::xet
