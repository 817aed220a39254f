#pragma once

// LZ4 frames (the format of lz4frame.h, magic 0x184D2204) as xorb chunk payloads hold them. Internal to
// fetchd_xet: xorb_chunk.cc wraps these errors with the chunk's location.

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace fetchd::xet::lz4 {

// What is wrong with a frame, as a phrase ("block 2 checksum ..."), for the caller to place.
class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Decodes one whole LZ4 frame into `out`, which holds exactly the decoded length the caller expects, and
// returns how many bytes it decoded. Blocks are decoded straight into `out` with the bounded-output LZ4
// block decoder: nothing is allocated, and a frame that would decode to more than out.size() bytes is
// refused rather than followed. Checksums present in the frame (header, block, content) are verified.
// Refuses bytes after the frame, preset dictionaries, and reserved header bits.
std::size_t decode_frame(std::span<const std::byte> frame, std::span<std::byte> out);

// One LZ4 frame holding `bytes` (independent blocks, no checksums, the smallest block size that fits, as
// Xet writers produce), written with liblz4's lz4frame.h.
std::vector<std::byte> encode_frame(std::span<const std::byte> bytes);

// xxHash32, which LZ4 frames use for their checksums.
std::uint32_t xxh32(std::span<const std::byte> bytes, std::uint32_t seed);

}  // namespace fetchd::xet::lz4
