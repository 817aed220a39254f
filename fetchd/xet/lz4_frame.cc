#include "fetchd/xet/lz4_frame.h"

#include <lz4.h>
#include <lz4frame.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>

namespace fetchd::xet::lz4 {
namespace {

constexpr std::uint32_t kFrameMagic = 0x184D2204;
constexpr std::size_t kLinkedWindow = 64 * 1024;  // how far back a linked block may reach

std::uint32_t load_u32_le(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | std::to_integer<std::uint32_t>(p[i]);
  return v;
}

std::uint64_t load_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

std::string hex32(std::uint32_t v) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// Reads a frame front to back, refusing to step past its end.
class FrameCursor {
 public:
  explicit FrameCursor(std::span<const std::byte> frame) : frame_(frame) {}

  std::span<const std::byte> take(std::size_t n, const char* what) {
    if (frame_.size() - at_ < n) {
      throw FrameError("the LZ4 frame ends inside its " + std::string(what) + " (" + std::to_string(n) +
                       " bytes needed at byte " + std::to_string(at_) + ", " + std::to_string(frame_.size() - at_) +
                       " left)");
    }
    const auto piece = frame_.subspan(at_, n);
    at_ += n;
    return piece;
  }
  std::uint8_t byte(const char* what) { return std::to_integer<std::uint8_t>(take(1, what)[0]); }
  std::uint32_t u32(const char* what) { return load_u32_le(take(4, what).data()); }

  std::size_t position() const { return at_; }
  std::size_t left() const { return frame_.size() - at_; }
  std::span<const std::byte> consumed_since(std::size_t from) const { return frame_.subspan(from, at_ - from); }

 private:
  std::span<const std::byte> frame_;
  std::size_t at_ = 0;
};

struct FrameDescriptor {
  bool independent_blocks = false;
  bool block_checksums = false;
  bool content_checksum = false;
  std::size_t max_block_size = 0;
};

FrameDescriptor read_descriptor(FrameCursor& cursor, std::size_t expected_size) {
  const std::uint32_t magic = cursor.u32("magic number");
  if (magic != kFrameMagic) {
    throw FrameError("the payload does not start with the LZ4 frame magic " + hex32(kFrameMagic) + " (found " +
                     hex32(magic) + ")");
  }
  const std::size_t descriptor_start = cursor.position();
  const std::uint8_t flags = cursor.byte("frame descriptor");
  const std::uint8_t block_descriptor = cursor.byte("frame descriptor");
  if ((flags >> 6) != 1) throw FrameError("the LZ4 frame has version " + std::to_string(flags >> 6) + ", not 1");
  if ((flags & 0x02) != 0 || (block_descriptor & 0x8F) != 0) {
    throw FrameError("the LZ4 frame descriptor sets reserved bits");
  }
  const unsigned block_size_id = (block_descriptor >> 4) & 0x07;
  if (block_size_id < 4) {
    throw FrameError("the LZ4 frame declares block size id " + std::to_string(block_size_id) + " (valid: 4..7)");
  }
  FrameDescriptor descriptor;
  descriptor.independent_blocks = (flags & 0x20) != 0;
  descriptor.block_checksums = (flags & 0x10) != 0;
  descriptor.content_checksum = (flags & 0x04) != 0;
  descriptor.max_block_size = std::size_t{1} << (8 + 2 * block_size_id);  // 64 KiB, 256 KiB, 1 MiB, 4 MiB
  if ((flags & 0x08) != 0) {
    const std::uint64_t content_size = load_u64_le(cursor.take(8, "content size").data());
    if (content_size != expected_size) {
      throw FrameError("the LZ4 frame declares " + std::to_string(content_size) + " content bytes, the chunk header " +
                       std::to_string(expected_size));
    }
  }
  if ((flags & 0x01) != 0) throw FrameError("the LZ4 frame needs a preset dictionary, which Xet chunks never use");
  // The descriptor's last byte is the second byte of xxHash32 over the descriptor bytes before it.
  const auto checksummed = cursor.consumed_since(descriptor_start);
  const std::uint8_t header_checksum = cursor.byte("frame descriptor");
  const auto computed = static_cast<std::uint8_t>(xxh32(checksummed, 0) >> 8);
  if (header_checksum != computed) {
    throw FrameError("the LZ4 frame descriptor checksum is " + hex32(header_checksum) + ", its bytes give " +
                     hex32(computed));
  }
  return descriptor;
}

}  // namespace

std::size_t decode_frame(std::span<const std::byte> frame, std::span<std::byte> out) {
  FrameCursor cursor(frame);
  const FrameDescriptor descriptor = read_descriptor(cursor, out.size());
  std::size_t produced = 0;
  for (std::size_t block = 0;; ++block) {
    const std::uint32_t block_word = cursor.u32("block size");
    if (block_word == 0) break;  // end mark
    const bool stored = (block_word & 0x80000000u) != 0;
    const std::size_t block_size = block_word & 0x7FFFFFFFu;
    if (block_size > descriptor.max_block_size) {
      throw FrameError("LZ4 block " + std::to_string(block) + " is " + std::to_string(block_size) +
                       " bytes, over the frame's " + std::to_string(descriptor.max_block_size) + "-byte block maximum");
    }
    const auto data = cursor.take(block_size, "block data");
    if (descriptor.block_checksums) {
      const std::uint32_t expected = cursor.u32("block checksum");
      const std::uint32_t actual = xxh32(data, 0);
      if (expected != actual) {
        throw FrameError("LZ4 block " + std::to_string(block) + " checksum is " + hex32(expected) +
                         ", its bytes give " + hex32(actual));
      }
    }
    const std::size_t room = std::min(out.size() - produced, descriptor.max_block_size);
    std::size_t decoded = 0;
    if (stored) {
      if (block_size > room) {
        throw FrameError("stored LZ4 block " + std::to_string(block) + " of " + std::to_string(block_size) +
                         " bytes overruns the declared length (" + std::to_string(out.size() - produced) +
                         " bytes left)");
      }
      std::memcpy(out.data() + produced, data.data(), block_size);
      decoded = block_size;
    } else {
      auto* const src = reinterpret_cast<const char*>(data.data());
      auto* const dst = reinterpret_cast<char*>(out.data() + produced);
      // Linked blocks may copy from up to 64 KiB of the output before them, which sits right before `dst`.
      const std::size_t window = descriptor.independent_blocks ? 0 : std::min(produced, kLinkedWindow);
      const int result = LZ4_decompress_safe_usingDict(src, dst, static_cast<int>(block_size), static_cast<int>(room),
                                                       dst - window, static_cast<int>(window));
      if (result < 0) {
        throw FrameError("LZ4 block " + std::to_string(block) + " (" + std::to_string(block_size) +
                         " bytes) is malformed or decodes past the declared length (" +
                         std::to_string(out.size() - produced) + " bytes left)");
      }
      decoded = static_cast<std::size_t>(result);
    }
    produced += decoded;
  }
  if (descriptor.content_checksum) {
    const std::uint32_t expected = cursor.u32("content checksum");
    const std::uint32_t actual = xxh32(out.first(produced), 0);
    if (expected != actual) {
      throw FrameError("the LZ4 content checksum is " + hex32(expected) + ", the decoded bytes give " + hex32(actual));
    }
  }
  if (cursor.left() != 0) {
    throw FrameError(std::to_string(cursor.left()) + " bytes follow the end of the LZ4 frame");
  }
  return produced;
}

std::vector<std::byte> encode_frame(std::span<const std::byte> bytes) {
  LZ4F_preferences_t preferences;
  std::memset(&preferences, 0, sizeof preferences);
  // lz4 lowers the block size to the smallest that holds the input; blocks are independent and unchecked
  // (the chunk hash already proves the bytes), as in frames written by Xet clients.
  preferences.frameInfo.blockSizeID = LZ4F_max256KB;
  preferences.frameInfo.blockMode = LZ4F_blockIndependent;
  std::vector<std::byte> frame(LZ4F_compressFrameBound(bytes.size(), &preferences));
  const std::size_t written = LZ4F_compressFrame(frame.data(), frame.size(), bytes.data(), bytes.size(), &preferences);
  if (LZ4F_isError(written))
    throw std::runtime_error(std::string("LZ4 compression failed: ") + LZ4F_getErrorName(written));
  frame.resize(written);
  return frame;
}

// xxHash32 as its public specification defines it.
std::uint32_t xxh32(std::span<const std::byte> bytes, std::uint32_t seed) {
  constexpr std::uint32_t kPrime1 = 0x9E3779B1u, kPrime2 = 0x85EBCA77u, kPrime3 = 0xC2B2AE3Du, kPrime4 = 0x27D4EB2Fu,
                          kPrime5 = 0x165667B1u;
  const auto round = [](std::uint32_t acc, std::uint32_t lane) {
    return std::rotl(acc + lane * kPrime2, 13) * kPrime1;
  };
  const std::byte* p = bytes.data();
  const std::byte* const end = p + bytes.size();
  std::uint32_t hash = 0;
  if (bytes.size() >= 16) {
    std::uint32_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    for (; end - p >= 16; p += 16) {
      v1 = round(v1, load_u32_le(p));
      v2 = round(v2, load_u32_le(p + 4));
      v3 = round(v3, load_u32_le(p + 8));
      v4 = round(v4, load_u32_le(p + 12));
    }
    hash = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
  } else {
    hash = seed + kPrime5;
  }
  hash += static_cast<std::uint32_t>(bytes.size());
  for (; end - p >= 4; p += 4) hash = std::rotl(hash + load_u32_le(p) * kPrime3, 17) * kPrime4;
  for (; p < end; ++p) hash = std::rotl(hash + std::to_integer<std::uint32_t>(*p) * kPrime5, 11) * kPrime1;
  hash ^= hash >> 15;
  hash *= kPrime2;
  hash ^= hash >> 13;
  hash *= kPrime3;
  hash ^= hash >> 16;
  return hash;
}

}  // namespace fetchd::xet::lz4
