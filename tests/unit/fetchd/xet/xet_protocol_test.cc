// The Xet client's protocol pieces: multipart/byteranges answers, reconstruction answers (V1 and V2), and
// the resolve headers that announce a Xet file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/byteranges.h"
#include "fetchd/xet/reconstruction.h"
#include "fetchd/xet/xet_download.h"

namespace fetchd::xet {
namespace {

using ::testing::HasSubstr;

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    return e.what();
  }
  return "";
}

std::string part(const std::string& boundary, std::uint64_t start, const std::string& data,
                 std::uint64_t total = 1000) {
  return "--" + boundary + "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes " +
         std::to_string(start) + "-" + std::to_string(start + data.size() - 1) + "/" + std::to_string(total) +
         "\r\n\r\n" + data + "\r\n";
}

TEST(Byteranges, HeaderValue) {
  const std::vector<ByteRange> ranges{{0, 9}, {100, 199}};
  EXPECT_EQ(range_header_value(ranges), "bytes=0-9,100-199");
}

TEST(Byteranges, PartsAreMatchedByContentRangeNotOrder) {
  const std::string boundary = "3d6b6a416f9b5";
  // Out of order, and the data contains the boundary text itself.
  const std::string body =
      part(boundary, 100, "--3d6b6a416f9b5 inside") + part(boundary, 0, "0123456789") + "--" + boundary + "--\r\n";
  const std::vector<ByteRange> asked{{0, 9}, {100, 121}};
  const auto parts = parse_byteranges("multipart/byteranges; boundary=" + boundary, bytes_of(body), asked);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].range, (ByteRange{100, 121}));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(parts[0].bytes.data()), parts[0].bytes.size()),
            "--3d6b6a416f9b5 inside");
  EXPECT_EQ(parts[1].range, (ByteRange{0, 9}));
}

TEST(Byteranges, QuotedBoundaryAndCaseInsensitiveHeaders) {
  const std::string body = "--b\r\ncontent-range: bytes 5-7/10\r\n\r\nabc\r\n--b--";
  const std::vector<ByteRange> asked{{5, 7}};
  const auto parts = parse_byteranges("multipart/byteranges; BOUNDARY=\"b\"", bytes_of(body), asked);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].bytes.size(), 3u);
}

TEST(Byteranges, RefusesPartsNotAskedForAndMalformedBodies) {
  const std::vector<ByteRange> asked{{0, 9}};
  EXPECT_THAT(error_of([&] {
                parse_byteranges("multipart/byteranges; boundary=b", bytes_of(part("b", 20, "xyz") + "--b--"), asked);
              }),
              HasSubstr("holds bytes 20-22, which were not asked for"));
  EXPECT_THAT(error_of([&] { parse_byteranges("multipart/byteranges", bytes_of("--b--"), asked); }),
              HasSubstr("no usable boundary"));
  EXPECT_THAT(error_of([&] {
                parse_byteranges("multipart/byteranges; boundary=b",
                                 bytes_of("--b\r\nContent-Range: bytes 0-9/10\r\n\r\nshort"), asked);
              }),
              HasSubstr("ends inside the part for bytes 0-9"));
  EXPECT_THAT(error_of([&] {
                parse_byteranges("multipart/byteranges; boundary=b", bytes_of("--b\r\nX: y\r\n\r\nabc\r\n--b--"),
                                 asked);
              }),
              HasSubstr("without a valid Content-Range"));
}

TEST(ContentRange, Parses) {
  const auto cr = parse_content_range("bytes 10-19/100");
  ASSERT_TRUE(cr);
  EXPECT_EQ(cr->range, (ByteRange{10, 19}));
  EXPECT_EQ(cr->total, 100u);
  EXPECT_EQ(parse_content_range("bytes 0-0/*")->total, 0u);
  EXPECT_FALSE(parse_content_range("bytes 9-1/100"));
  EXPECT_FALSE(parse_content_range("items 0-1/2"));
}

const char* kV1 = R"({
  "offset_into_first_range": 5,
  "terms": [
    {"hash": "aa", "unpacked_length": 65536, "range": {"start": 0, "end": 4}},
    {"hash": "bb", "unpacked_length": 1000, "range": {"start": 2, "end": 3}}],
  "fetch_info": {
    "aa": [{"range": {"start": 0, "end": 4}, "url": "http://gw/aa?sig=1", "url_range": {"start": 0, "end": 32767}}],
    "bb": [{"range": {"start": 0, "end": 8}, "url": "http://gw/bb?sig=2", "url_range": {"start": 0, "end": 9999}}]}})";

const char* kV2 = R"({
  "offset_into_first_range": 0,
  "terms": [{"hash": "aa", "unpacked_length": 10, "range": {"start": 1, "end": 2}},
            {"hash": "aa", "unpacked_length": 20, "range": {"start": 5, "end": 7}}],
  "xorbs": {"aa": [{"url": "http://gw/aa?multi", "ranges": [
      {"chunks": {"start": 0, "end": 2}, "bytes": {"start": 0, "end": 99}},
      {"chunks": {"start": 5, "end": 7}, "bytes": {"start": 500, "end": 699}}]}]}})";

TEST(Reconstruction, ParsesV1) {
  const auto r = parse_reconstruction(kV1);
  EXPECT_EQ(r.offset_into_first_range, 5u);
  ASSERT_EQ(r.terms.size(), 2u);
  EXPECT_EQ(r.terms[1].xorb, "bb");
  EXPECT_EQ(r.terms[1].chunks.start, 2u);
  const FetchRange* range = nullptr;
  const auto* source = r.source_for(r.terms[1], &range);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->url, "http://gw/bb?sig=2");
  EXPECT_EQ(range->bytes, (ByteRange{0, 9999}));
}

TEST(Reconstruction, ParsesV2WithOneMultiRangeUrlPerXorb) {
  const auto r = parse_reconstruction(kV2);
  const FetchRange* range = nullptr;
  EXPECT_EQ(r.source_for(r.terms[1], &range)->url, "http://gw/aa?multi");
  EXPECT_EQ(range->bytes, (ByteRange{500, 699}));
  EXPECT_EQ(r.sources.at("aa").front().ranges.size(), 2u);
}

TEST(Reconstruction, RefusesInconsistentAnswers) {
  EXPECT_THAT(error_of([] { parse_reconstruction("{"); }), HasSubstr("not valid JSON"));
  EXPECT_THAT(
      error_of([] {
        parse_reconstruction(R"({"terms":[{"hash":"a","unpacked_length":1,"range":{"start":3,"end":3}}],"xorbs":{}})");
      }),
      HasSubstr("chunk range [3, 3)"));
  EXPECT_THAT(
      error_of([] {
        parse_reconstruction(R"({"terms":[{"hash":"a","unpacked_length":1,"range":{"start":0,"end":1}}],"xorbs":{}})");
      }),
      HasSubstr("gives no source for chunks [0, 1) of xorb a"));
  EXPECT_THAT(error_of([] { parse_reconstruction(R"({"terms":[{"hash":"a","range":{"start":0,"end":1}}]})"); }),
              HasSubstr("no number 'unpacked_length'"));
  EXPECT_EQ(parse_reconstruction(R"({"offset_into_first_range":0,"terms":[]})").terms.size(), 0u);  // empty file
}

TEST(XetHeaders, ReadsTheLinkFormAndTheOlderRefreshRoute) {
  const std::string hash(64, 'a');
  transfer::HttpHeaders headers;
  headers.add("X-Xet-Hash", hash);
  headers.add("X-Linked-Size", "1234");
  headers.add("Link",
              "<https://hub.test/api/models/o/r/xet-read-token/c>; rel=\"xet-auth\", "
              "<https://cas.test/v1/reconstructions/" +
                  hash + ">; rel=\"xet-reconstruction-info\"");
  const auto info = xet_info_from_headers(headers, "https://hub.test", std::nullopt);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->file_hash, hash);
  EXPECT_EQ(info->size, 1234u);
  EXPECT_EQ(info->token_url, "https://hub.test/api/models/o/r/xet-read-token/c");

  transfer::HttpHeaders old;
  old.add("X-Xet-Hash", hash);
  old.add("X-Xet-Refresh-Route", "/api/models/o/r/xet-read-token/c");
  const auto older = xet_info_from_headers(old, "http://127.0.0.1:9", 77);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->token_url, "http://127.0.0.1:9/api/models/o/r/xet-read-token/c");
  EXPECT_EQ(older->size, 77u);

  transfer::HttpHeaders plain;
  plain.add("X-Linked-Size", "5");
  EXPECT_FALSE(xet_info_from_headers(plain, "http://h", 5));
  transfer::HttpHeaders no_route;
  no_route.add("X-Xet-Hash", hash);
  EXPECT_FALSE(xet_info_from_headers(no_route, "http://h", 5));
}

}  // namespace
}  // namespace fetchd::xet
