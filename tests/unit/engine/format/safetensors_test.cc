#include "engine/format/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/format/format_error.h"
#include "engine/format/little_endian.h"
#include "engine/format/safetensors_writer.h"
#include "tests/support/temp_dir.h"

namespace engine::format {
namespace {

using ::testing::HasSubstr;

std::vector<std::byte> bytes_of(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return out;
}

std::vector<std::byte> valid_file() {
  SafetensorsWriter w;
  w.add("model.embed_tokens.weight", SafetensorsDType::BF16, {4, 3}, bytes_of(24, 1));
  w.add("model.norm.weight", SafetensorsDType::F32, {3}, bytes_of(12, 2));
  w.add("empty", SafetensorsDType::F16, {0, 5}, {});
  w.set_metadata("format", "pt");
  return w.serialize();
}

// A file from a hand-written header and `data_bytes` bytes of data.
std::vector<std::byte> file_with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  store_le<std::uint64_t>(out.data(), header.size());
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string error_of(const std::vector<std::byte>& file) {
  try {
    parse_safetensors(file, "test.safetensors");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ParsesWhatTheWriterWrote) {
  const auto file = valid_file();
  const auto layout = parse_safetensors(file, "x");
  ASSERT_EQ(layout.tensors.size(), 3u);
  EXPECT_EQ(layout.metadata.at("format"), "pt");
  EXPECT_EQ(layout.data_offset() % 8, 0u);  // the writer pads the header with spaces
  const auto* embed = &layout.tensors[0];
  EXPECT_EQ(embed->name, "model.embed_tokens.weight");
  EXPECT_EQ(embed->dtype, SafetensorsDType::BF16);
  EXPECT_EQ(embed->shape, (std::vector<std::uint64_t>{4, 3}));
  EXPECT_EQ(embed->begin, 0u);
  EXPECT_EQ(embed->end, 24u);
}

TEST(Safetensors, OpenMapsTheFileAndReturnsTensorBytes) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "m.safetensors", valid_file());
  const auto file = SafetensorsFile::open(dir / "m.safetensors");
  const auto* norm = file.find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  const auto data = file.data(*norm);
  const auto expected = bytes_of(12, 2);
  ASSERT_EQ(data.size(), expected.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin()));
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, EmptyHeaderObjectIsAValidEmptyFile) {
  EXPECT_EQ(error_of(file_with_header("{}", 0)), "");
  EXPECT_EQ(error_of(file_with_header("{}      ", 0)), "");
}

TEST(Safetensors, RefusesFilesShorterThanTheLengthField) {
  EXPECT_THAT(error_of(std::vector<std::byte>(7)), HasSubstr("7 bytes, fewer than the 8-byte header length"));
}

TEST(Safetensors, RefusesAHostileHeaderLengthWithoutReadingIt) {
  std::vector<std::byte> file(16);
  store_le<std::uint64_t>(file.data(), 100'000'001);
  EXPECT_THAT(error_of(file), HasSubstr("100000001 bytes, over the limit of 100000000"));
  store_le<std::uint64_t>(file.data(), ~std::uint64_t{0});
  EXPECT_THAT(error_of(file), HasSubstr("over the limit"));
}

TEST(Safetensors, RefusesAHeaderLengthPastTheFile) {
  auto file = valid_file();
  store_le<std::uint64_t>(file.data(), file.size());
  EXPECT_THAT(error_of(file), HasSubstr("only " + std::to_string(file.size() - 8) + " bytes follow it"));
}

TEST(Safetensors, RefusesAHeaderThatIsNotAJsonObject) {
  EXPECT_THAT(error_of(file_with_header(" {}", 0)), HasSubstr("does not start with '{'"));
  EXPECT_THAT(error_of(file_with_header("{\"a\":", 0)), HasSubstr("not valid UTF-8 JSON"));
  EXPECT_THAT(error_of(file_with_header("{}  x", 0)), HasSubstr("byte 4 after the header's JSON is not a space"));
  EXPECT_THAT(error_of(file_with_header("{}\n", 0)), HasSubstr("not a space"));
}

TEST(Safetensors, RefusesInvalidUtf8) {
  EXPECT_THAT(error_of(file_with_header("{\"\xff\xfe\":1}", 0)), HasSubstr("not valid UTF-8 JSON"));
}

TEST(Safetensors, DeepNestingFailsCleanly) {
  const std::string deep = "{\"t\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_THAT(error_of(file_with_header(deep, 0)), HasSubstr("tensor 't' is not a JSON object"));
}

TEST(Safetensors, RefusesDuplicateNames) {
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  EXPECT_THAT(error_of(file_with_header(header, 2)), HasSubstr("names 'a' twice"));
  // Inside a tensor's own object too: which dtype or offsets would a reader believe?
  EXPECT_THAT(error_of(file_with_header(R"({"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 1)),
              HasSubstr("names 'dtype' twice"));
}

TEST(Safetensors, RefusesUnknownDtypeByName) {
  const std::string header = R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}})";
  const auto error = error_of(file_with_header(header, 2));
  EXPECT_THAT(error, HasSubstr("dtype 'F12'"));
  EXPECT_THAT(error, HasSubstr("BF16"));
}

TEST(Safetensors, RefusesShapeThatDisagreesWithTheSpan) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})";
  EXPECT_THAT(error_of(file_with_header(header, 20)), HasSubstr("shape × dtype = 24 bytes but data_offsets span 20"));
}

TEST(Safetensors, RefusesShapeThatOverflows) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})";
  EXPECT_THAT(error_of(file_with_header(header, 4)), HasSubstr("overflows"));
}

TEST(Safetensors, RefusesOverlappingSpans) {
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})";
  EXPECT_THAT(error_of(file_with_header(header, 6)),
              HasSubstr("tensor 'b' [2, 6) overlaps tensor 'a' which ends at 4"));
}

TEST(Safetensors, RefusesHolesBetweenSpans) {
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})";
  EXPECT_THAT(error_of(file_with_header(header, 8)), HasSubstr("bytes [4, 6) of the data section belong to no tensor"));
  const std::string late = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})";
  EXPECT_THAT(error_of(file_with_header(late, 4)), HasSubstr("bytes [0, 2)"));
}

TEST(Safetensors, RefusesOffsetsThatEndBeforeTheyBegin) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})";
  EXPECT_THAT(error_of(file_with_header(header, 4)), HasSubstr("end before they begin"));
}

TEST(Safetensors, RefusesATruncationByOneByte) {
  auto file = valid_file();
  file.pop_back();
  EXPECT_THAT(error_of(file), HasSubstr("truncated"));
}

TEST(Safetensors, RefusesAnExtraTailByte) {
  auto file = valid_file();
  const auto size = file.size();
  file.push_back(std::byte{0});
  const auto error = error_of(file);
  EXPECT_THAT(error, HasSubstr("but the file has " + std::to_string(size + 1) + " bytes (trailing bytes)"));
}

TEST(Safetensors, RefusesADoubledFile) {  // a whole body appended to a partial one
  auto file = valid_file();
  const auto copy = file;
  file.insert(file.end(), copy.begin(), copy.end());
  EXPECT_THAT(error_of(file), HasSubstr("trailing bytes"));
}

TEST(Safetensors, RefusesMetadataThatIsNotAStringMap) {
  EXPECT_THAT(error_of(file_with_header(R"({"__metadata__":{"a":1}})", 0)), HasSubstr("'__metadata__' value for 'a'"));
  EXPECT_THAT(error_of(file_with_header(R"({"__metadata__":[]})", 0)), HasSubstr("not a JSON object of strings"));
}

TEST(Safetensors, RefusesMissingFields) {
  EXPECT_THAT(error_of(file_with_header(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1)),
              HasSubstr("no string 'dtype'"));
  EXPECT_THAT(error_of(file_with_header(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1)),
              HasSubstr("no array 'shape'"));
  EXPECT_THAT(error_of(file_with_header(R"({"w":{"dtype":"U8","shape":[1]}})", 1)), HasSubstr("no 'data_offsets'"));
  EXPECT_THAT(error_of(file_with_header(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1)),
              HasSubstr("not a non-negative integer"));
}

TEST(Safetensors, ErrorsNameTheFile) {
  testing_support::TempDir dir;
  auto bytes = valid_file();
  bytes.pop_back();
  testing_support::write_file(dir / "bad.safetensors", bytes);
  try {
    SafetensorsFile::open(dir / "bad.safetensors");
    FAIL() << "opened a truncated file";
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "bad.safetensors").string()));
  }
  EXPECT_THROW(SafetensorsFile::open(dir / "missing.safetensors"), FormatError);
}

// Every single-byte change of a valid file either parses or is refused with FormatError: no crash, no
// other exception, whatever the byte.
TEST(Safetensors, SurvivesEveryByteMutation) {
  const auto file = valid_file();
  for (std::size_t i = 0; i < file.size(); ++i) {
    for (const int value : {0x00, 0x20, 0x7b, 0xff}) {
      auto mutated = file;
      mutated[i] = static_cast<std::byte>(value);
      try {
        parse_safetensors(mutated, "m");
      } catch (const FormatError&) {
      }
    }
  }
}

}  // namespace
}  // namespace engine::format
