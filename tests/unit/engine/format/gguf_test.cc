#include "engine/format/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/format/format_error.h"
#include "engine/format/gguf_writer.h"
#include "engine/format/little_endian.h"
#include "tests/support/sample_models.h"
#include "tests/support/temp_dir.h"

namespace engine::format {
namespace {

using ::testing::HasSubstr;

std::string error_of(std::span<const std::byte> file, const GgufLimits& limits = {}) {
  try {
    parse_gguf(file, "test.gguf", limits);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

// File position of the `field`-th 8-byte field after a tensor's name: its dims, then type and offset.
std::size_t tensor_record(const std::vector<std::byte>& file, const std::string& name) {
  const auto* begin = reinterpret_cast<const char*>(file.data());
  const std::string_view haystack(begin, file.size());
  std::string needle(8, '\0');
  store_le<std::uint64_t>(reinterpret_cast<std::byte*>(needle.data()), name.size());
  needle += name;
  const auto at = haystack.find(needle);
  if (at == std::string_view::npos) throw std::runtime_error("tensor record not found: " + name);
  return at + needle.size();  // position of n_dims
}

std::size_t offset_field(const std::vector<std::byte>& file, const std::string& name) {
  const auto record = tensor_record(file, name);
  const auto n_dims = load_le<std::uint32_t>(file.data() + record);
  return record + 4 + 8 * n_dims + 4;
}

std::size_t type_field(const std::vector<std::byte>& file, const std::string& name) {
  const auto record = tensor_record(file, name);
  return record + 4 + 8 * load_le<std::uint32_t>(file.data() + record);
}

// A minimal file: header and the given raw bytes after it (metadata, then tensor infos).
std::vector<std::byte> raw_file(std::uint64_t tensors, std::uint64_t kvs, const std::vector<std::byte>& body) {
  std::vector<std::byte> out(24 + body.size());
  std::memcpy(out.data(), "GGUF", 4);
  store_le<std::uint32_t>(out.data() + 4, 3);
  store_le<std::uint64_t>(out.data() + 8, tensors);
  store_le<std::uint64_t>(out.data() + 16, kvs);
  if (!body.empty()) std::memcpy(out.data() + 24, body.data(), body.size());
  return out;
}

struct Body {
  std::vector<std::byte> bytes;
  template <typename T>
  Body& put(T v) {
    const auto at = bytes.size();
    bytes.resize(at + sizeof(T));
    store_le<T>(bytes.data() + at, v);
    return *this;
  }
  Body& str(const std::string& s) {
    put<std::uint64_t>(s.size());
    for (const char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
};

TEST(Gguf, ParsesEveryValueTypeTheWriterWrote) {
  const auto file = testing_support::sample_gguf().serialize();
  const auto layout = parse_gguf(file, "x");
  EXPECT_EQ(layout.version, 3u);
  EXPECT_EQ(layout.alignment, 32u);
  EXPECT_EQ(layout.data_offset % 32, 0u);
  EXPECT_EQ(*layout.find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(layout.find("test.u8")->as_uint(), 255u);
  EXPECT_EQ(layout.find("test.i8")->as_int(), -128);
  EXPECT_FALSE(layout.find("test.i8")->as_uint());
  EXPECT_EQ(layout.find("test.u16")->as_uint(), 65535u);
  EXPECT_EQ(layout.find("test.i16")->as_int(), -32768);
  EXPECT_EQ(layout.find("test.u32")->as_uint(), 4294967295u);
  EXPECT_EQ(layout.find("test.i32")->as_int(), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(layout.find("test.f32")->as_float(), static_cast<double>(0.1f));
  EXPECT_TRUE(std::signbit(*layout.find("test.f32_negzero")->as_float()));
  EXPECT_EQ(layout.find("test.bool_true")->as_bool(), true);
  EXPECT_EQ(layout.find("test.bool_false")->as_bool(), false);
  EXPECT_EQ(layout.find("test.u64")->as_uint(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_FALSE(layout.find("test.u64")->as_int());
  EXPECT_EQ(layout.find("test.i64")->as_int(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(layout.find("test.f64")->as_float(), 1e-300);
  EXPECT_EQ(*layout.find("test.empty_string")->as_string(), "");

  const auto* arr = layout.find("test.arr_i32");
  EXPECT_EQ(arr->element_type(), GgufType::Int32);
  EXPECT_EQ(arr->ints(), (std::vector<std::int64_t>{-1, 0, 7, 2147483647}));
  EXPECT_EQ(layout.find("test.arr_f32")->floats(), (std::vector<double>{-1.5, 0.25, static_cast<double>(3.0e38f)}));
  EXPECT_EQ(layout.find("test.arr_bool")->element(1).as_bool(), false);
  EXPECT_FALSE(layout.find("test.arr_u64")->ints());  // UINT64_MAX does not fit
  EXPECT_EQ(layout.find("test.arr_empty")->size(), 0u);
  const auto* tokens = layout.find("tokenizer.ggml.tokens")->strings();
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->size(), 5u);
  EXPECT_EQ((*tokens)[2], "\xc4\xa0the");
  const auto* nested = layout.find("test.nested")->nested();
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->size(), 3u);
  EXPECT_EQ((*nested)[0].ints(), (std::vector<std::int64_t>{1, -2}));
  EXPECT_EQ((*(*nested)[1].strings())[1], "bc");
  EXPECT_EQ((*layout.find("test.nested_deep")->nested())[0].nested()->at(0).ints(), (std::vector<std::int64_t>{9, 8}));
  EXPECT_EQ(layout.find("missing"), nullptr);
}

TEST(Gguf, ParsesTensorInfosAndServesTheirBytes) {
  testing_support::TempDir dir;
  const auto writer = testing_support::sample_gguf();
  writer.write(dir / "m.gguf");
  const auto file = GgufFile::open(dir / "m.gguf");
  const auto& layout = file.layout();
  ASSERT_EQ(layout.tensors.size(), 8u);
  const auto* q4k = layout.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(q4k, nullptr);
  EXPECT_EQ(q4k->type->name, "Q4_K");
  EXPECT_EQ(q4k->dims, (std::vector<std::uint64_t>{256, 2}));  // innermost first
  EXPECT_EQ(q4k->elements(), 512u);
  EXPECT_EQ(q4k->size, 2u * 144u);
  const auto* f16 = layout.find_tensor("output_norm.weight");
  EXPECT_EQ(f16->dims.size(), 4u);
  // Each tensor's bytes start at an aligned offset and hold what was written.
  const auto bytes = testing_support::read_file(dir / "m.gguf");
  for (const auto& t : layout.tensors) {
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    const auto data = file.data(t);
    EXPECT_EQ(data.size(), t.size);
    EXPECT_EQ(data.data(), file.data(t).data());
    EXPECT_TRUE(std::equal(data.begin(), data.end(),
                           bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset + t.offset)));
  }
}

TEST(Gguf, ReadsVersion2AndCustomAlignment) {
  const auto file = testing_support::sample_gguf(2, 64).serialize();
  const auto layout = parse_gguf(file, "x");
  EXPECT_EQ(layout.version, 2u);
  EXPECT_EQ(layout.alignment, 64u);
  EXPECT_EQ(layout.data_offset % 64, 0u);
  for (const auto& t : layout.tensors) EXPECT_EQ(t.offset % 64, 0u);
}

TEST(Gguf, AcceptsAFileWithoutTrailingPadding) {
  GgufWriter w;
  std::vector<std::byte> data(34);
  w.add_tensor("t", {32}, *ggml_type_by_name("Q8_0"), data);
  auto file = w.serialize();
  file.resize(file.size() - (64 - 34));  // drop the last tensor's padding
  EXPECT_EQ(error_of(file), "");
}

TEST(Gguf, RefusesBadMagicAndVersions) {
  auto file = testing_support::sample_gguf().serialize();
  auto bad = file;
  bad[0] = std::byte{'X'};
  EXPECT_THAT(error_of(bad), HasSubstr("magic 'GGUF'"));
  store_le<std::uint32_t>(file.data() + 4, 1);
  EXPECT_THAT(error_of(file), HasSubstr("version 1"));
  store_le<std::uint32_t>(file.data() + 4, 4);
  EXPECT_THAT(error_of(file), HasSubstr("version 4 is not 2 or 3"));
  store_le<std::uint32_t>(file.data() + 4, 3u << 24);
  EXPECT_THAT(error_of(file), HasSubstr("big-endian"));
  EXPECT_THAT(error_of(std::vector<std::byte>(3)), HasSubstr("the magic number needs 4 bytes"));
}

TEST(Gguf, RefusesATruncationByOneByte) {
  auto file = testing_support::sample_gguf().serialize();
  file.pop_back();
  EXPECT_THAT(error_of(file), HasSubstr("truncated"));
}

TEST(Gguf, RefusesATruncationIntoTheLastTensor) {
  auto file = testing_support::sample_gguf().serialize();
  const auto layout = parse_gguf(file, "x");
  file.resize(file.size() - 64);
  const auto error = error_of(file);
  EXPECT_THAT(error, HasSubstr("truncated"));
  EXPECT_THAT(error, HasSubstr("but the file has " + std::to_string(file.size()) + " bytes"));
}

TEST(Gguf, RefusesAnExtraTailByte) {
  auto file = testing_support::sample_gguf().serialize();
  file.push_back(std::byte{0});
  EXPECT_THAT(error_of(file), HasSubstr("trailing bytes"));
}

TEST(Gguf, RefusesOverlappingTensors) {
  auto file = testing_support::sample_gguf().serialize();
  // Point the second tensor at the first one's data.
  store_le<std::uint64_t>(file.data() + offset_field(file, "blk.0.attn_q.weight"), 0);
  EXPECT_THAT(error_of(file), HasSubstr("inside tensor"));
}

TEST(Gguf, RefusesATensorPastTheEnd) {
  auto file = testing_support::sample_gguf().serialize();
  store_le<std::uint64_t>(file.data() + offset_field(file, "blk.0.attn_v.weight"), 1u << 20);
  const auto error = error_of(file);
  EXPECT_THAT(error, HasSubstr("tensor 'blk.0.attn_v.weight' (Q4_0, 18 bytes at data offset 1048576)"));
  EXPECT_THAT(error, HasSubstr("truncated"));
}

TEST(Gguf, RefusesAMisalignedOffset) {
  auto file = testing_support::sample_gguf().serialize();
  store_le<std::uint64_t>(file.data() + offset_field(file, "blk.0.attn_v.weight"), 33);
  EXPECT_THAT(error_of(file), HasSubstr("not a multiple of the alignment 32"));
}

TEST(Gguf, RefusesAnUnknownTensorTypeByName) {
  auto file = testing_support::sample_gguf().serialize();
  store_le<std::uint32_t>(file.data() + type_field(file, "blk.0.attn_v.weight"), 99);
  const auto error = error_of(file);
  EXPECT_THAT(error, HasSubstr("tensor 'blk.0.attn_v.weight' has ggml type 99"));
  EXPECT_THAT(error, HasSubstr("Q4_K"));
}

TEST(Gguf, RefusesPartialBlocks) {
  Body body;
  body.str("t").put<std::uint32_t>(1).put<std::uint64_t>(33).put<std::uint32_t>(8).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(1, 0, body.bytes)),
              HasSubstr("33 elements of Q8_0, which is not a whole number of its 32-element blocks"));
}

TEST(Gguf, RefusesBadDimensionCounts) {
  Body zero;
  zero.str("t").put<std::uint32_t>(0).put<std::uint32_t>(0).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(1, 0, zero.bytes)), HasSubstr("has 0 dimensions"));
  Body five;
  five.str("t").put<std::uint32_t>(5);
  for (int i = 0; i < 5; ++i) five.put<std::uint64_t>(1);
  five.put<std::uint32_t>(0).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(1, 0, five.bytes)), HasSubstr("has 5 dimensions; 1 to 4"));
  Body overflow;
  overflow.str("t").put<std::uint32_t>(2).put<std::uint64_t>(1ull << 40).put<std::uint64_t>(1ull << 40);
  overflow.put<std::uint32_t>(0).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(1, 0, overflow.bytes)), HasSubstr("overflows"));
}

TEST(Gguf, RefusesLyingCountsWithoutAllocating) {
  EXPECT_THAT(error_of(raw_file(1ull << 40, 0, {})), HasSubstr("claims 1099511627776 tensors"));
  EXPECT_THAT(error_of(raw_file(0, ~0ull, {})), HasSubstr("metadata entries"));
  Body array;
  array.str("k").put<std::uint32_t>(9).put<std::uint32_t>(6).put<std::uint64_t>(1ull << 61);
  EXPECT_THAT(error_of(raw_file(0, 1, array.bytes)), HasSubstr("claims 2305843009213693952 elements of FLOAT32"));
  Body strings;
  strings.str("k").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(1ull << 40);
  EXPECT_THAT(error_of(raw_file(0, 1, strings.bytes)), HasSubstr("elements of STRING"));
  Body long_string;
  long_string.str("k").put<std::uint32_t>(8).put<std::uint64_t>(1ull << 62);
  EXPECT_THAT(error_of(raw_file(0, 1, long_string.bytes)), HasSubstr("over the limit"));
  Body short_string;
  short_string.str("k").put<std::uint32_t>(8).put<std::uint64_t>(100).str("abc");
  EXPECT_THAT(error_of(raw_file(0, 1, short_string.bytes)), HasSubstr("needs 100 bytes"));
}

TEST(Gguf, ChargesDecodedMetadataAgainstABudget) {
  const auto file = testing_support::sample_gguf().serialize();
  GgufLimits tight;
  tight.max_metadata_bytes = 256;
  EXPECT_THAT(error_of(file, tight), HasSubstr("past the limit of 256 bytes"));
}

TEST(Gguf, RefusesArraysNestedTooDeeply) {
  Body body;
  body.str("k").put<std::uint32_t>(9);
  for (int i = 0; i < 20; ++i) body.put<std::uint32_t>(9).put<std::uint64_t>(1);
  body.put<std::uint32_t>(0).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(0, 1, body.bytes)), HasSubstr("nests arrays deeper than 8 levels"));
}

TEST(Gguf, RefusesUnknownValueTypesAndBadBools) {
  Body type;
  type.str("k").put<std::uint32_t>(13);
  EXPECT_THAT(error_of(raw_file(0, 1, type.bytes)), HasSubstr("is 13, not a GGUF value type"));
  Body flag;
  flag.str("k").put<std::uint32_t>(7).put<std::uint8_t>(2);
  EXPECT_THAT(error_of(raw_file(0, 1, flag.bytes)), HasSubstr("bool with value 2"));
}

TEST(Gguf, RefusesDuplicates) {
  Body keys;
  keys.str("k").put<std::uint32_t>(0).put<std::uint8_t>(1).str("k").put<std::uint32_t>(0).put<std::uint8_t>(2);
  EXPECT_THAT(error_of(raw_file(0, 2, keys.bytes)), HasSubstr("metadata key 'k' appears twice"));
  Body tensors;
  for (int i = 0; i < 2; ++i)
    tensors.str("t").put<std::uint32_t>(1).put<std::uint64_t>(1).put<std::uint32_t>(0).put<std::uint64_t>(0);
  EXPECT_THAT(error_of(raw_file(2, 0, tensors.bytes)), HasSubstr("tensor 't' appears twice"));
}

TEST(Gguf, RefusesBadAlignment) {
  Body wrong_type;
  wrong_type.str("general.alignment").put<std::uint32_t>(10).put<std::uint64_t>(32);
  EXPECT_THAT(error_of(raw_file(0, 1, wrong_type.bytes)), HasSubstr("UINT32 power of two"));
  Body not_pow2;
  not_pow2.str("general.alignment").put<std::uint32_t>(4).put<std::uint32_t>(48);
  EXPECT_THAT(error_of(raw_file(0, 1, not_pow2.bytes)), HasSubstr("UINT32 power of two"));
}

TEST(Gguf, MetadataOnlyFileIsValid) {
  Body body;
  body.str("general.architecture").put<std::uint32_t>(8).str("llama");
  const auto file = raw_file(0, 1, body.bytes);
  EXPECT_EQ(error_of(file), "");
  auto padded = file;
  padded.resize((padded.size() + 31) / 32 * 32);
  EXPECT_EQ(error_of(padded), "");
  padded.push_back(std::byte{0});
  EXPECT_THAT(error_of(padded), HasSubstr("trailing bytes"));
}

TEST(Gguf, SurvivesEveryByteMutationOfTheHeader) {
  const auto file = testing_support::sample_gguf().serialize();
  const auto layout = parse_gguf(file, "x");
  for (std::size_t i = 0; i < layout.data_offset; ++i) {
    for (const int value : {0x00, 0x01, 0x7f, 0xff}) {
      auto mutated = file;
      mutated[i] = static_cast<std::byte>(value);
      try {
        parse_gguf(mutated, "m");
      } catch (const FormatError&) {
      }
    }
  }
}

}  // namespace
}  // namespace engine::format
