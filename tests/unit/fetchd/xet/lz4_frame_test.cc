// lz4_frame: every LZ4 frame variant liblz4 writes, decoded directly and through the chunk record decoder,
// and the frame checksum's known values.

#include "fetchd/xet/lz4_frame.h"

#include <gtest/gtest.h>
#include <lz4frame.h>

#include <cstdint>

#include "fetchd/xet/xorb_chunk.h"
#include "tests/unit/fetchd/xet/xet_test_data.h"

namespace fetchd::xet {
namespace {

TEST(XetChunkCodec, DecodesEveryLz4FrameVariant) {
  const Bytes data = text_like(131072, 13);
  for (const auto block_size : {LZ4F_max64KB, LZ4F_max256KB, LZ4F_max1MB, LZ4F_max4MB}) {
    for (const auto mode : {LZ4F_blockLinked, LZ4F_blockIndependent}) {
      for (const bool checksums : {false, true}) {
        for (const bool content_size : {false, true}) {
          SCOPED_TRACE(testing::Message() << "block size id " << block_size << ", linked " << (mode == LZ4F_blockLinked)
                                          << ", checksums " << checksums << ", content size " << content_size);
          const Bytes frame = lz4f_frame(data, block_size, mode, checksums, checksums, content_size);
          Bytes out(data.size());
          EXPECT_EQ(lz4::decode_frame(frame, out), data.size());
          EXPECT_EQ(out, data);
          // Through the record decoder too, under both compressed schemes' framing.
          EXPECT_EQ(decode_record(concat(header_bytes(0, static_cast<std::uint32_t>(frame.size()), 1, 131072), frame)),
                    data);
        }
      }
    }
  }
  // A frame declaring a content size other than the header's is refused.
  const Bytes sized = lz4f_frame(data, LZ4F_max64KB, LZ4F_blockIndependent, false, false, true);
  Bytes small(data.size() - 1);
  EXPECT_THROW(lz4::decode_frame(sized, small), lz4::FrameError);
}

TEST(XetChunkCodec, Xxh32KnownValues) {
  EXPECT_EQ(lz4::xxh32({}, 0), 0x02CC5D05u);
  EXPECT_EQ(lz4::xxh32(as_bytes("a"), 0), 0x550D7456u);
  EXPECT_EQ(lz4::xxh32(as_bytes("abc"), 0), 0x32D153FFu);
}

}  // namespace
}  // namespace fetchd::xet
