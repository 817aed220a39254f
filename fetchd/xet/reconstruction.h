#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fetchd/xet/byteranges.h"

namespace fetchd::xet {

// Chunk indices within a xorb, end exclusive.
struct ChunkRange {
  std::uint32_t start = 0;
  std::uint32_t end = 0;
  bool contains(const ChunkRange& other) const { return start <= other.start && other.end <= end; }
};

// One piece of the file: the decoded chunks [chunks.start, chunks.end) of one xorb.
struct ReconstructionTerm {
  std::string xorb;  // hash, in the Xet hex form
  std::uint64_t unpacked_length = 0;
  ChunkRange chunks;
};

// Where a run of a xorb's chunks can be fetched: `bytes` of `url` hold exactly the records of `chunks`.
struct FetchRange {
  ChunkRange chunks;
  ByteRange bytes;
};
struct FetchSource {
  std::string url;                 // signed: fetched without Authorization
  std::vector<FetchRange> ranges;  // V1: one per source; V2: several, fetched in one multi-range request
};

// A reconstruction answer, V1 and V2 alike: terms in file order and, per xorb, where its bytes are.
struct Reconstruction {
  std::uint64_t offset_into_first_range = 0;
  std::vector<ReconstructionTerm> terms;
  std::map<std::string, std::vector<FetchSource>> sources;  // by xorb hash

  // The source range that covers a term's chunks, or nullptr.
  const FetchSource* source_for(const ReconstructionTerm& term, const FetchRange** range) const;
};

// Parses `GET /v1/reconstructions/{hash}` (fetch_info) or `/v2/…` (xorbs) answers. Sizes are bounded and
// every range checked (chunk ranges end-exclusive and non-empty, byte ranges end-inclusive); throws
// FetchError(Integrity) naming the field.
Reconstruction parse_reconstruction(std::string_view json);

}  // namespace fetchd::xet
