// The test hub's Xet read path through real HTTP on loopback: resolve headers in each style, the read-token
// route, V1 and V2 reconstructions of files spanning several xorbs, the gateway's signed ranges and
// multipart answers, the plain /xet/files path, and every Xet fault switch. Bytes fetched from the gateway
// are decoded with fetchd's Xet core (ChunkReader) and reassembled as a client would; hashing itself is
// tested against the spec's vectors by the core's own tests.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "base/splitmix64.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_chunk.h"
#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub.h"

namespace testing_support {
namespace {

namespace xet = fetchd::xet;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

// ---- Content ------------------------------------------------------------------------------------------

std::string splitmix_bytes(std::size_t size, std::uint64_t seed) {
  std::string bytes(size, '\0');
  base::SplitMix64(seed).fill(std::as_writable_bytes(std::span(bytes)));
  return bytes;
}

// About 1.1 MB whose chunks a real writer stores in all three ways: random bytes raw, text with LZ4, and
// 32-bit values with random low bytes and constant high bytes (float-like) with byte grouping then LZ4.
std::string mixed_content() {
  std::string content = splitmix_bytes(400000, 1);
  for (int line = 0; content.size() < 700000; ++line) {
    content += "line " + std::to_string(line) + ": the quick brown fox jumps over the lazy dog\n";
  }
  const std::string noise = splitmix_bytes(300000, 2);
  for (std::size_t i = 0; i + 1 < noise.size(); i += 2) {
    content += noise[i];
    content += noise[i + 1];
    content += '\x80';
    content += '\x3f';
  }
  content += splitmix_bytes(100000, 3);
  return content;
}

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string sha256_hex(std::string_view content) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(content.data(), content.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back("0123456789abcdef"[digest[i] >> 4]);
    hex.push_back("0123456789abcdef"[digest[i] & 0x0f]);
  }
  return hex;
}

std::string xet_hash_of(std::string_view content) {
  xet::ContentHasher hasher;
  hasher.update(as_bytes(content));
  return xet::to_hex(hasher.finish());
}

// ---- Reading answers ----------------------------------------------------------------------------------

struct Part {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::uint64_t total = 0;
  std::string data;
};

// "bytes S-E/T"
Part parse_content_range(const std::string& value) {
  Part part;
  const std::string text = value.substr(value.find(' ') + 1);
  const std::size_t dash = text.find('-');
  const std::size_t slash = text.find('/');
  part.first = std::stoull(text.substr(0, dash));
  part.last = std::stoull(text.substr(dash + 1, slash - dash - 1));
  part.total = std::stoull(text.substr(slash + 1));
  return part;
}

// The parts of a multipart/byteranges body, in the order sent.
std::vector<Part> parse_multipart(const HttpResult& result) {
  const std::string type = result.header("content-type");
  EXPECT_THAT(type, StartsWith("multipart/byteranges; boundary="));
  const std::string delimiter = "--" + type.substr(type.find("boundary=") + 9);
  std::vector<Part> parts;
  std::size_t at = result.body.find(delimiter);
  while (at != std::string::npos && result.body.compare(at + delimiter.size(), 2, "--") != 0) {
    const std::size_t headers_start = at + delimiter.size() + 2;
    const std::size_t headers_end = result.body.find("\r\n\r\n", headers_start);
    const std::string headers = result.body.substr(headers_start, headers_end - headers_start);
    const std::size_t range_at = headers.find("Content-Range: ");
    EXPECT_NE(range_at, std::string::npos) << headers;
    Part part = parse_content_range(headers.substr(range_at + 15, headers.find("\r\n", range_at) - range_at - 15));
    const std::size_t data_start = headers_end + 4;
    const std::size_t next = result.body.find("\r\n" + delimiter, data_start);
    part.data = result.body.substr(data_start, next - data_start);
    parts.push_back(std::move(part));
    at = next == std::string::npos ? next : next + 2;
  }
  EXPECT_NE(at, std::string::npos) << "no closing delimiter";
  return parts;
}

// Chunks decoded from fetched xorb bytes, by xorb and chunk index.
struct DecodedChunks {
  std::map<std::pair<std::string, std::uint64_t>, std::string> chunks;
  std::set<std::uint8_t> schemes;  // compression schemes seen in the records
  std::vector<std::string> chunk_hash_mismatches;

  // Decodes `records` (whole records of `xorb`, the first being chunk `first_chunk`); exactly `count` chunks.
  void add(const std::string& xorb, std::uint64_t first_chunk, std::uint64_t count, std::string_view records) {
    xet::ChunkReader reader(as_bytes(records), first_chunk);
    std::uint64_t decoded = 0;
    while (const auto chunk = reader.next()) {
      schemes.insert(xet::read_chunk_header(as_bytes(records).subspan(chunk->record_offset)).scheme);
      chunks[{xorb, chunk->index}] =
          std::string(reinterpret_cast<const char*>(chunk->bytes.data()), chunk->bytes.size());
      ++decoded;
    }
    EXPECT_TRUE(reader.at_end());
    EXPECT_EQ(decoded, count) << "a served range must hold exactly its chunks' records";
  }
};

struct Reassembled {
  std::string bytes;
  std::vector<std::string> problems;  // terms that decode to another length than announced
};

// Joins the terms of a reconstruction answer from decoded chunks, as a client does: each term must decode to
// its unpacked_length; the first skips offset_into_first_range; the whole is trimmed to `length`.
Reassembled reassemble(const rapidjson::Document& answer, const DecodedChunks& decoded, std::uint64_t length) {
  Reassembled out;
  std::uint64_t skip = answer["offset_into_first_range"].GetUint64();
  for (const auto& term : answer["terms"].GetArray()) {
    const std::string xorb = term["hash"].GetString();
    std::string data;
    for (std::uint64_t i = term["range"]["start"].GetUint64(); i < term["range"]["end"].GetUint64(); ++i) {
      const auto chunk = decoded.chunks.find({xorb, i});
      if (chunk == decoded.chunks.end()) {
        out.problems.push_back("chunk " + std::to_string(i) + " of " + xorb + " was not fetched");
        continue;
      }
      data += chunk->second;
    }
    if (data.size() != term["unpacked_length"].GetUint64()) {
      out.problems.push_back("term of " + xorb + " decodes to " + std::to_string(data.size()) + " bytes, announced " +
                             std::to_string(term["unpacked_length"].GetUint64()));
    }
    const std::uint64_t skipped = std::min<std::uint64_t>(skip, data.size());
    out.bytes += data.substr(skipped);
    skip -= skipped;
  }
  if (out.bytes.size() > length) out.bytes.resize(length);
  return out;
}

// ---- Fixture ------------------------------------------------------------------------------------------

class XetHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_.set_xet_chunks_per_xorb(3);  // several xorbs per file
    commit_ = hub_.commit("org/xet", "main",
                          {{"config.json", "{}", false},
                           {"model.safetensors", content_, true, true},
                           {"empty.bin", "", true, true},
                           {"weights.bin", "plain LFS", true}});
    hash_ = xet_hash_of(content_);
  }

  std::string api(const std::string& path) const { return hub_.endpoint() + path; }
  std::string resolve_url(const std::string& path = "model.safetensors") const {
    return api("/org/xet/resolve/main/" + path);
  }

  std::string token(const std::string& repo = "org/xet") {
    const HttpResult result = http_get(api("/api/models/" + repo + "/xet-read-token/main"));
    EXPECT_EQ(result.status, 200) << result.body;
    const rapidjson::Document json = parse_json(result.body);
    return json.IsObject() && json.HasMember("accessToken") ? json["accessToken"].GetString() : "";
  }

  HttpResult reconstruction(const std::string& version, const std::string& hash, const std::string& range = "") {
    std::vector<std::string> headers = {"Authorization: Bearer " + token()};
    if (!range.empty()) headers.push_back("Range: " + range);
    return http_get_with(hub_.cas_endpoint() + "/" + version + "/reconstructions/" + hash, headers);
  }

  // Fetches every V1 fetch_info range (one request each) and decodes it.
  DecodedChunks fetch_v1(const rapidjson::Document& answer) {
    DecodedChunks decoded;
    for (const auto& [xorb, entries] : answer["fetch_info"].GetObject()) {
      for (const auto& entry : entries.GetArray()) {
        const std::uint64_t first = entry["url_range"]["start"].GetUint64();
        const std::uint64_t last = entry["url_range"]["end"].GetUint64();
        const HttpResult bytes = http_get_with(entry["url"].GetString(),
                                               {"Range: bytes=" + std::to_string(first) + "-" + std::to_string(last)});
        EXPECT_EQ(bytes.status, 206) << bytes.body;
        EXPECT_EQ(bytes.body.size(), last - first + 1);
        const std::uint64_t start = entry["range"]["start"].GetUint64();
        decoded.add(xorb.GetString(), start, entry["range"]["end"].GetUint64() - start, bytes.body);
      }
    }
    return decoded;
  }

  // Fetches every V2 entry with one request carrying all its ranges, as the npm client does, and decodes
  // the parts matched by their Content-Range.
  DecodedChunks fetch_v2(const rapidjson::Document& answer, std::size_t* multipart_answers = nullptr) {
    DecodedChunks decoded;
    for (const auto& [xorb, entries] : answer["xorbs"].GetObject()) {
      for (const auto& entry : entries.GetArray()) {
        std::string header = "Range: bytes=";
        for (const auto& range : entry["ranges"].GetArray()) {
          if (header.back() != '=') header += ",";
          header += std::to_string(range["bytes"]["start"].GetUint64()) + "-" +
                    std::to_string(range["bytes"]["end"].GetUint64());
        }
        const HttpResult bytes = http_get_with(entry["url"].GetString(), {header});
        EXPECT_EQ(bytes.status, 206) << bytes.body;
        std::vector<Part> parts;
        if (entry["ranges"].Size() == 1) {
          Part part = parse_content_range(bytes.header("content-range"));
          part.data = bytes.body;
          parts.push_back(std::move(part));
        } else {
          parts = parse_multipart(bytes);
          if (multipart_answers != nullptr) ++*multipart_answers;
        }
        EXPECT_EQ(parts.size(), entry["ranges"].Size());
        for (const auto& range : entry["ranges"].GetArray()) {
          const auto part = std::find_if(parts.begin(), parts.end(), [&](const Part& p) {
            return p.first == range["bytes"]["start"].GetUint64() && p.last == range["bytes"]["end"].GetUint64();
          });
          if (part == parts.end()) {
            ADD_FAILURE() << "no part for a signed range";
            continue;
          }
          const std::uint64_t start = range["chunks"]["start"].GetUint64();
          decoded.add(xorb.GetString(), start, range["chunks"]["end"].GetUint64() - start, part->data);
        }
      }
    }
    return decoded;
  }

  // Asks for `range` (empty: the whole file) through `version`, fetches, decodes and reassembles.
  Reassembled download(const std::string& version, const std::string& hash, std::uint64_t length,
                       const std::string& range = "") {
    const HttpResult result = reconstruction(version, hash, range);
    EXPECT_EQ(result.status, 200) << result.body;
    const rapidjson::Document answer = parse_json(result.body);
    if (!answer.IsObject()) return {};
    return reassemble(answer, version == "v1" ? fetch_v1(answer) : fetch_v2(answer), length);
  }

  // The first V2 entry's URL and its signed ranges as a Range header value.
  std::pair<std::string, std::string> first_v2_entry(const std::string& range = "") {
    const rapidjson::Document answer = parse_json(reconstruction("v2", hash_, range).body);
    const auto& entry = answer["xorbs"].MemberBegin()->value[0];
    const auto& bytes = entry["ranges"][0]["bytes"];
    return {entry["url"].GetString(),
            "bytes=" + std::to_string(bytes["start"].GetUint64()) + "-" + std::to_string(bytes["end"].GetUint64())};
  }

  const std::string content_ = mixed_content();
  TestHub hub_;
  std::string commit_;
  std::string hash_;
};

// ---- Storage and listings -----------------------------------------------------------------------------

TEST_F(XetHubTest, ListingsCarryTheXetHashBesideTheSha256) {
  const rapidjson::Document tree = parse_json(http_get(api("/api/models/org/xet/tree/main")).body);
  std::map<std::string, const rapidjson::Value*> by_path;
  for (const auto& entry : tree.GetArray()) by_path[entry["path"].GetString()] = &entry;
  const rapidjson::Value& model = *by_path.at("model.safetensors");
  EXPECT_EQ(std::string(model["xetHash"].GetString()), hash_);
  EXPECT_EQ(std::string(model["lfs"]["oid"].GetString()), sha256_hex(content_));  // not the Xet hash
  EXPECT_EQ(std::string((*by_path.at("empty.bin"))["xetHash"].GetString()), std::string(64, '0'));
  EXPECT_FALSE(by_path.at("weights.bin")->HasMember("xetHash"));
  EXPECT_FALSE(by_path.at("config.json")->HasMember("xetHash"));

  RequestOptions post;
  post.method = "POST";
  post.headers = {"Content-Type: application/json"};
  post.body = R"({"paths": ["model.safetensors", "config.json"], "expand": true})";
  const HttpResult info = http_get(api("/api/models/org/xet/paths-info/main"), post);
  ASSERT_EQ(info.status, 200) << info.body;
  const rapidjson::Document paths = parse_json(info.body);
  ASSERT_EQ(paths.Size(), 2u);
  EXPECT_EQ(std::string(paths[0]["xetHash"].GetString()), hash_);
  EXPECT_EQ(std::string(paths[0]["lfs"]["oid"].GetString()), std::string(model["lfs"]["oid"].GetString()));
  EXPECT_EQ(std::string(paths[1]["path"].GetString()), "config.json");
  EXPECT_FALSE(paths[1].HasMember("xetHash"));
  EXPECT_EQ(hub_.xet_hash("org/xet", "main", "model.safetensors"), hash_);
  EXPECT_EQ(hub_.xet_hash("org/xet", "main", "weights.bin"), std::nullopt);
}

TEST_F(XetHubTest, StoreLfsAsXetAppliesToLaterCommits) {
  TestHub hub;
  hub.commit("org/a", "main", {{"w.bin", "before", true}});
  hub.set_store_lfs_as_xet(true);
  hub.commit("org/b", "main", {{"w.bin", "after", true}, {"c.txt", "plain", false}});
  EXPECT_EQ(hub.xet_hash("org/a", "main", "w.bin"), std::nullopt);
  EXPECT_EQ(hub.xet_hash("org/b", "main", "w.bin"), xet_hash_of("after"));
  EXPECT_EQ(hub.xet_hash("org/b", "main", "c.txt"), std::nullopt);
}

// ---- Resolve ------------------------------------------------------------------------------------------

TEST_F(XetHubTest, ResolveRedirectsToThePlainPathWithLinkHeaders) {
  for (const bool head : {false, true}) {
    const HttpResult result = head ? http_head(resolve_url()) : http_get(resolve_url());
    ASSERT_EQ(result.status, 302);
    EXPECT_EQ(result.header("location"), api("/xet/files/" + hash_));
    EXPECT_EQ(result.header("x-xet-hash"), hash_);
    EXPECT_EQ(result.header("x-linked-size"), std::to_string(content_.size()));
    EXPECT_EQ(result.header("x-linked-etag"), "\"" + sha256_hex(content_) + "\"");
    EXPECT_EQ(result.header("x-repo-commit"), commit_);
    EXPECT_EQ(result.header("link"), "<" + api("/api/models/org/xet/xet-read-token/" + commit_) +
                                         ">; rel=\"xet-auth\", <" + hub_.cas_endpoint() + "/v1/reconstructions/" +
                                         hash_ + ">; rel=\"xet-reconstruction-info\"");
    EXPECT_FALSE(result.has_header("x-xet-refresh-route"));
  }
}

TEST_F(XetHubTest, ResolveInTheOlderStyleSendsTheRefreshRoute) {
  hub_.faults().set_xet_headers(XetHeaders::refresh_route);
  const HttpResult result = http_get(resolve_url());
  ASSERT_EQ(result.status, 302);
  EXPECT_EQ(result.header("x-xet-hash"), hash_);
  EXPECT_EQ(result.header("x-xet-refresh-route"), "/api/models/org/xet/xet-read-token/" + commit_);
  EXPECT_FALSE(result.has_header("link"));
  // Older hubs do not know the file-info Accept either: a client asking for it is redirected.
  EXPECT_EQ(http_get_with(resolve_url(), {"Accept: application/vnd.xet-fileinfo+json"}).status, 302);
}

TEST_F(XetHubTest, ResolveWithoutXetHeadersLeavesOnlyTheRedirect) {
  hub_.faults().set_xet_headers(XetHeaders::none);
  const HttpResult result = http_get(resolve_url());
  ASSERT_EQ(result.status, 302);
  EXPECT_FALSE(result.has_header("x-xet-hash"));
  EXPECT_FALSE(result.has_header("link"));
  EXPECT_FALSE(result.has_header("x-xet-refresh-route"));
  EXPECT_EQ(result.header("x-linked-size"), std::to_string(content_.size()));
  EXPECT_EQ(http_get(result.header("location")).body, content_);
}

TEST_F(XetHubTest, ResolveAnswersTheXetFileInfoAcceptWithJsonAndHeaders) {
  // What the npm client sends.
  const HttpResult result =
      http_get_with(resolve_url(), {"Range: bytes=0-0", "Accept: application/vnd.xet-fileinfo+json, */*"});
  ASSERT_EQ(result.status, 200);
  EXPECT_THAT(result.header("content-type"), StartsWith("application/vnd.xet-fileinfo+json"));
  EXPECT_EQ(result.header("x-xet-hash"), hash_);
  EXPECT_EQ(result.header("x-linked-size"), std::to_string(content_.size()));
  EXPECT_THAT(result.header("link"), HasSubstr("rel=\"xet-auth\""));
  const rapidjson::Document info = parse_json(result.body);
  EXPECT_EQ(std::string(info["hash"].GetString()), hash_);
  EXPECT_EQ(info["size"].GetUint64(), content_.size());
  EXPECT_EQ(std::string(info["refreshUrl"].GetString()), api("/api/models/org/xet/xet-read-token/" + commit_));
  EXPECT_EQ(std::string(info["reconstructionUrl"].GetString()), hub_.cas_endpoint() + "/v1/reconstructions/" + hash_);
  EXPECT_EQ(std::string(info["etag"].GetString()), sha256_hex(content_));
  // A plain LFS file is still redirected to the LFS host.
  EXPECT_EQ(http_get_with(resolve_url("weights.bin"), {"Accept: application/vnd.xet-fileinfo+json"}).status, 302);
}

// ---- Token --------------------------------------------------------------------------------------------

TEST_F(XetHubTest, TokenRouteAnswersJsonOrHeadersAndHonoursGating) {
  const HttpResult json = http_get(api("/api/models/org/xet/xet-read-token/main"));
  ASSERT_EQ(json.status, 200);
  const rapidjson::Document token = parse_json(json.body);
  EXPECT_GT(token["accessToken"].GetStringLength(), 0u);
  EXPECT_GT(token["exp"].GetInt64(), 1700000000);
  EXPECT_EQ(std::string(token["casUrl"].GetString()), hub_.cas_endpoint());
  EXPECT_EQ(http_get(api("/api/models/org/xet/xet-read-token/" + commit_)).status, 200);
  EXPECT_EQ(http_get(api("/api/models/org/xet/xet-read-token/nope")).header("x-error-code"), "RevisionNotFound");

  hub_.faults().set_xet_token_in_headers(true);
  const HttpResult headers = http_get(api("/api/models/org/xet/xet-read-token/main"));
  ASSERT_EQ(headers.status, 200);
  EXPECT_FALSE(headers.header("x-xet-access-token").empty());
  EXPECT_GT(std::stoll(headers.header("x-xet-token-expiration")), 1700000000);
  EXPECT_EQ(headers.header("x-xet-cas-url"), hub_.cas_endpoint());
  EXPECT_TRUE(headers.body.empty());

  hub_.set_token("hub-token");
  hub_.set_gated("org/xet", true);
  EXPECT_EQ(http_get(api("/api/models/org/xet/xet-read-token/main")).status, 401);
  EXPECT_EQ(http_get_with(api("/api/models/org/xet/xet-read-token/main"), {"Authorization: Bearer hub-token"}).status,
            200);
}

TEST_F(XetHubTest, TokenRefusedAnswers401) {
  hub_.faults().set_xet_token_refused(true);
  EXPECT_EQ(http_get(api("/api/models/org/xet/xet-read-token/main")).status, 401);
  hub_.faults().set_xet_token_refused(false);
  EXPECT_EQ(http_get(api("/api/models/org/xet/xet-read-token/main")).status, 200);
}

TEST_F(XetHubTest, CasNeedsAnUnexpiredTokenForTheFilesRepository) {
  const std::string url = hub_.cas_endpoint() + "/v2/reconstructions/" + hash_;
  EXPECT_EQ(http_get(url).status, 401);
  EXPECT_EQ(http_get_with(url, {"Authorization: Bearer forged"}).status, 401);
  std::string valid = token();
  valid.back() = valid.back() == '0' ? '1' : '0';  // a signature off by one digit
  EXPECT_EQ(http_get_with(url, {"Authorization: Bearer " + valid}).status, 401);
  EXPECT_EQ(http_get_with(url, {"Authorization: Bearer " + token()}).status, 200);

  // A token of another repository reads none of this one's files.
  hub_.commit("org/other", "main", {{"x.bin", "x", true, true}});
  EXPECT_EQ(http_get_with(url, {"Authorization: Bearer " + token("org/other")}).status, 404);

  hub_.faults().set_xet_token_lifetime(std::chrono::seconds(-10));
  EXPECT_EQ(http_get_with(url, {"Authorization: Bearer " + token()}).status, 401);
}

// ---- Reconstructions ----------------------------------------------------------------------------------

TEST_F(XetHubTest, V1ReconstructionOfAMultiXorbFileReassemblesTheFile) {
  const HttpResult result = reconstruction("v1", hash_);
  ASSERT_EQ(result.status, 200);
  const rapidjson::Document answer = parse_json(result.body);
  EXPECT_EQ(answer["offset_into_first_range"].GetUint64(), 0u);
  EXPECT_GE(answer["fetch_info"].MemberCount(), 3u);
  EXPECT_FALSE(answer.HasMember("xorbs"));
  // Map keys come sorted.
  std::vector<std::string> keys;
  for (const auto& member : answer["fetch_info"].GetObject()) keys.emplace_back(member.name.GetString());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));

  const DecodedChunks decoded = fetch_v1(answer);
  const Reassembled file = reassemble(answer, decoded, content_.size());
  EXPECT_THAT(file.problems, SizeIs(0));
  EXPECT_EQ(file.bytes.size(), content_.size());
  EXPECT_TRUE(file.bytes == content_);
  EXPECT_EQ(xet_hash_of(file.bytes), http_head(resolve_url()).header("x-xet-hash"));
  // Stored the way writers store: each scheme where it is smallest.
  EXPECT_THAT(decoded.schemes, Contains(static_cast<std::uint8_t>(xet::CompressionScheme::None)));
  EXPECT_THAT(decoded.schemes, Contains(static_cast<std::uint8_t>(xet::CompressionScheme::Lz4)));
  EXPECT_THAT(decoded.schemes, Contains(static_cast<std::uint8_t>(xet::CompressionScheme::ByteGrouping4Lz4)));
}

TEST_F(XetHubTest, V2ReconstructionOfAMultiXorbFileReassemblesTheFile) {
  const HttpResult result = reconstruction("v2", hash_);
  ASSERT_EQ(result.status, 200);
  const rapidjson::Document answer = parse_json(result.body);
  EXPECT_FALSE(answer.HasMember("fetch_info"));
  EXPECT_GE(answer["xorbs"].MemberCount(), 3u);
  for (const auto& [xorb, entries] : answer["xorbs"].GetObject()) {
    EXPECT_EQ(entries.Size(), 1u) << "one signed URL per xorb";
    EXPECT_THAT(std::string(entries[0]["url"].GetString()),
                StartsWith(hub_.gateway_endpoint() + "/xorbs/" + xorb.GetString() + "?"));
  }
  const Reassembled file = reassemble(answer, fetch_v2(answer), content_.size());
  EXPECT_THAT(file.problems, SizeIs(0));
  EXPECT_TRUE(file.bytes == content_);
  EXPECT_EQ(xet_hash_of(file.bytes), hash_);
}

TEST_F(XetHubTest, DeduplicatedChunksAreServedAsMultiRangeUrlsAndMultipartAnswers) {
  // A file made of the model's first chunks and its last ones: chunking restarts at every cut, so its
  // chunks are exactly those chunks of the model, and the hub stores nothing new.
  const std::vector<std::uint64_t> ends = xet::chunk_boundaries(as_bytes(content_));
  ASSERT_GE(ends.size(), 8u);
  hub_.set_xet_chunks_per_xorb(8192);  // one big xorb, so the two runs share it
  const std::string base = splitmix_bytes(900000, 9);
  const std::vector<std::uint64_t> base_ends = xet::chunk_boundaries(as_bytes(base));
  ASSERT_GE(base_ends.size(), 6u);
  const std::string spliced = base.substr(0, base_ends[1]) + base.substr(base_ends[3]);
  hub_.commit("org/dedup", "main", {{"base.bin", base, true, true}, {"spliced.bin", spliced, true, true}});
  const std::string base_hash = *hub_.xet_hash("org/dedup", "main", "base.bin");
  const std::string spliced_hash = *hub_.xet_hash("org/dedup", "main", "spliced.bin");
  const auto token_for = [&] { return "Authorization: Bearer " + token("org/dedup"); };

  const rapidjson::Document base_answer =
      parse_json(http_get_with(hub_.cas_endpoint() + "/v2/reconstructions/" + base_hash, {token_for()}).body);
  ASSERT_EQ(base_answer["terms"].Size(), 1u);
  const std::string xorb = base_answer["terms"][0]["hash"].GetString();

  const rapidjson::Document v2 =
      parse_json(http_get_with(hub_.cas_endpoint() + "/v2/reconstructions/" + spliced_hash, {token_for()}).body);
  ASSERT_EQ(v2["terms"].Size(), 2u);
  for (const auto& term : v2["terms"].GetArray()) EXPECT_EQ(std::string(term["hash"].GetString()), xorb);
  EXPECT_EQ(v2["terms"][0]["range"]["end"].GetUint64(), 2u);
  EXPECT_EQ(v2["terms"][1]["range"]["start"].GetUint64(), 4u);
  ASSERT_EQ(v2["xorbs"][xorb.c_str()].Size(), 1u);
  EXPECT_EQ(v2["xorbs"][xorb.c_str()][0]["ranges"].Size(), 2u);
  std::size_t multipart_answers = 0;
  const Reassembled file = reassemble(v2, fetch_v2(v2, &multipart_answers), spliced.size());
  EXPECT_EQ(multipart_answers, 1u);
  EXPECT_THAT(file.problems, SizeIs(0));
  EXPECT_TRUE(file.bytes == spliced);
  EXPECT_EQ(xet_hash_of(file.bytes), spliced_hash);

  // V1: one URL per merged chunk range.
  const rapidjson::Document v1 =
      parse_json(http_get_with(hub_.cas_endpoint() + "/v1/reconstructions/" + spliced_hash, {token_for()}).body);
  EXPECT_EQ(v1["fetch_info"][xorb.c_str()].Size(), 2u);
  EXPECT_TRUE(reassemble(v1, fetch_v1(v1), spliced.size()).bytes == spliced);
}

TEST_F(XetHubTest, RangesNarrowTermsToTheirChunksAndClampAtTheEnd) {
  const std::vector<std::uint64_t> ends = xet::chunk_boundaries(as_bytes(content_));
  // A start inside the third chunk: the answer starts at that chunk, offset_into_first_range into it.
  const std::uint64_t first = ends[1] + 1000;
  const std::uint64_t last = ends[4] + 10;  // inside the sixth chunk
  const HttpResult result = reconstruction("v2", hash_, "bytes=" + std::to_string(first) + "-" + std::to_string(last));
  ASSERT_EQ(result.status, 200);
  const rapidjson::Document answer = parse_json(result.body);
  EXPECT_EQ(answer["offset_into_first_range"].GetUint64(), 1000u);
  std::uint64_t unpacked = 0;
  for (const auto& term : answer["terms"].GetArray()) unpacked += term["unpacked_length"].GetUint64();
  EXPECT_EQ(unpacked, ends[5] - ends[1]);  // chunks 2..5 whole: the client trims the last one
  Reassembled piece = reassemble(answer, fetch_v2(answer), last - first + 1);
  EXPECT_THAT(piece.problems, SizeIs(0));
  EXPECT_TRUE(piece.bytes == content_.substr(first, last - first + 1));

  // An end past the file is clamped; V1 narrows the same way.
  const std::uint64_t tail = content_.size() - 5000;
  piece = download("v1", hash_, content_.size() - tail, "bytes=" + std::to_string(tail) + "-99999999");
  EXPECT_THAT(piece.problems, SizeIs(0));
  EXPECT_TRUE(piece.bytes == content_.substr(tail));
  piece = download("v2", hash_, 1, "bytes=0-0");
  EXPECT_EQ(piece.bytes, content_.substr(0, 1));

  // A start at or past the end: 416.
  const HttpResult past = reconstruction("v2", hash_, "bytes=" + std::to_string(content_.size()) + "-");
  EXPECT_EQ(past.status, 416);
  EXPECT_EQ(past.header("content-range"), "bytes */" + std::to_string(content_.size()));
  EXPECT_EQ(reconstruction("v1", hash_, "bytes=oops").status, 400);
}

TEST_F(XetHubTest, EmptyFileHasNoTermsAndNoBytes) {
  const std::string empty = std::string(64, '0');
  const HttpResult whole = reconstruction("v2", empty);
  ASSERT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, R"({"offset_into_first_range":0,"terms":[],"xorbs":{}})");
  EXPECT_EQ(reconstruction("v1", empty).body, R"({"offset_into_first_range":0,"terms":[],"fetch_info":{}})");
  EXPECT_EQ(reconstruction("v2", empty, "bytes=0-").status, 416);
  EXPECT_EQ(reconstruction("v2", std::string(64, 'f')).status, 404);
}

// ---- Gateway ------------------------------------------------------------------------------------------

TEST_F(XetHubTest, GatewayServesSignedRangesOnlyWithoutAuthorization) {
  // The file's first byte: the grant is the first chunk's record only, a part of its xorb.
  const auto [url, range] = first_v2_entry("bytes=0-0");
  ASSERT_THAT(range, StartsWith("bytes=0-"));
  EXPECT_EQ(http_get_with(url, {"Range: " + range}).status, 206);
  EXPECT_EQ(http_get_with(url, {"Range: " + range, "Authorization: Bearer " + token()}).status, 400);
  // One byte more than granted, or another range: refused.
  const std::uint64_t last = std::stoull(range.substr(range.find('-') + 1));
  EXPECT_EQ(http_get_with(url, {"Range: bytes=0-" + std::to_string(last + 1)}).status, 403);
  EXPECT_EQ(
      http_get_with(url, {"Range: " + range + "," + std::to_string(last + 1) + "-" + std::to_string(last + 9)}).status,
      403);
  EXPECT_EQ(http_get(url).status, 403);  // no Range: the whole xorb, which the grant does not cover
  std::string tampered = url;
  tampered.replace(tampered.find("granted=0-") + 10, 1, "9");
  EXPECT_EQ(http_get_with(tampered, {"Range: " + range}).status, 403);
  // Ranges inside the grant are fine, as single ranges or several.
  const HttpResult two = http_get_with(url, {"Range: bytes=0-9,20-29"});
  EXPECT_EQ(two.status, 206);
  const std::vector<Part> parts = parse_multipart(two);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].first, 0u);
  EXPECT_EQ(parts[0].last, 9u);
  EXPECT_EQ(parts[1].first, 20u);
  EXPECT_EQ(parts[1].data.size(), 10u);
  EXPECT_EQ(parts[0].total, parts[1].total);
}

TEST_F(XetHubTest, ExpiredUrlsAnswer403UntilAFreshReconstruction) {
  hub_.faults().set_xet_urls_expired(true);
  auto [url, range] = first_v2_entry();
  EXPECT_THAT(url, HasSubstr("&expires="));
  const HttpResult expired = http_get_with(url, {"Range: " + range});
  EXPECT_EQ(expired.status, 403);
  EXPECT_THAT(expired.body, HasSubstr("expired"));
  hub_.faults().set_xet_urls_expired(false);
  std::tie(url, range) = first_v2_entry();
  EXPECT_EQ(http_get_with(url, {"Range: " + range}).status, 206);
}

TEST_F(XetHubTest, UrlsExpireAfterSomeGatewayRequestsUntilAFreshReconstruction) {
  hub_.faults().set_xet_urls_expire_after(2);
  const rapidjson::Document answer = parse_json(reconstruction("v1", hash_).body);
  std::vector<std::pair<std::string, std::string>> urls;  // url, range
  for (const auto& [xorb, entries] : answer["fetch_info"].GetObject()) {
    for (const auto& entry : entries.GetArray()) {
      urls.emplace_back(entry["url"].GetString(), "bytes=" + std::to_string(entry["url_range"]["start"].GetUint64()) +
                                                      "-" + std::to_string(entry["url_range"]["end"].GetUint64()));
    }
  }
  ASSERT_GE(urls.size(), 3u);
  EXPECT_EQ(http_get_with(urls[0].first, {"Range: " + urls[0].second}).status, 206);
  EXPECT_EQ(http_get_with(urls[1].first, {"Range: " + urls[1].second}).status, 206);
  EXPECT_EQ(http_get_with(urls[2].first, {"Range: " + urls[2].second}).status, 403);
  EXPECT_EQ(http_get_with(urls[0].first, {"Range: " + urls[0].second}).status, 403);  // all of them expired
  const auto [fresh, fresh_range] = first_v2_entry();  // a new reconstruction signs new URLs
  EXPECT_EQ(http_get_with(fresh, {"Range: " + fresh_range}).status, 206);
  EXPECT_EQ(http_get_with(fresh, {"Range: " + fresh_range}).status, 206);
  EXPECT_EQ(http_get_with(fresh, {"Range: " + fresh_range}).status, 403);
  hub_.faults().set_xet_urls_expire_after(std::nullopt);
  const auto [again, again_range] = first_v2_entry();
  EXPECT_EQ(http_get_with(again, {"Range: " + again_range}).status, 206);
}

TEST_F(XetHubTest, MultipartPartsCanComeInReverseOrder) {
  hub_.faults().set_xet_multipart_reversed(true);
  const auto [url, range] = first_v2_entry();
  const std::vector<Part> parts = parse_multipart(http_get_with(url, {"Range: bytes=0-9,20-29"}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].first, 20u);  // matched by Content-Range, a client still gets it right
  EXPECT_EQ(parts[1].first, 0u);
  hub_.faults().set_xet_multipart_reversed(false);
  // The reversed order does not change what the parts hold.
  const std::vector<Part> ordered = parse_multipart(http_get_with(url, {"Range: bytes=0-9,20-29"}));
  ASSERT_EQ(ordered.size(), 2u);
  EXPECT_EQ(ordered[0].data, parts[1].data);
}

// ---- Plain path ---------------------------------------------------------------------------------------

TEST_F(XetHubTest, PlainPathServesTheWholeFileWhateverTheRange) {
  const HttpResult ranged = http_get_with(api("/xet/files/" + hash_), {"Range: bytes=100-199"});
  EXPECT_EQ(ranged.status, 200);
  EXPECT_TRUE(ranged.body == content_);
  EXPECT_FALSE(ranged.has_header("content-range"));
  const HttpResult head = http_head(api("/xet/files/" + hash_));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), std::to_string(content_.size()));
  EXPECT_EQ(http_get(api("/xet/files/" + std::string(64, '0'))).body, "");
  EXPECT_EQ(http_get(api("/xet/files/" + std::string(64, 'f'))).status, 404);
}

// ---- Fault switches -----------------------------------------------------------------------------------

TEST_F(XetHubTest, UnpinnedFilesAnswer404ForTheNextReconstructions) {
  hub_.faults().set_xet_unpinned_for(2);
  EXPECT_EQ(reconstruction("v2", hash_).status, 404);
  EXPECT_EQ(reconstruction("v1", hash_).status, 404);
  EXPECT_EQ(reconstruction("v2", hash_).status, 200);
}

TEST_F(XetHubTest, V2DisabledAnswers501AndV1StillServes) {
  hub_.faults().set_xet_v2_disabled(true);
  EXPECT_EQ(reconstruction("v2", hash_).status, 501);
  EXPECT_TRUE(download("v1", hash_, content_.size()).bytes == content_);
}

TEST_F(XetHubTest, CorruptChunkThatStillDecodesChangesOneByte) {
  // Chunks of the text region are LZ4 frames, those of the random region raw: both kinds get corrupted.
  const std::vector<std::uint64_t> ends = xet::chunk_boundaries(as_bytes(content_));
  const auto chunk_at = [&](std::uint64_t offset) {
    return static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), offset) - ends.begin());
  };
  for (const std::size_t chunk : {chunk_at(100000), chunk_at(550000)}) {
    hub_.faults().set_xet_corrupt_chunk(XetCorruption{hash_, chunk, true});
    const Reassembled file = download("v2", hash_, content_.size());
    EXPECT_THAT(file.problems, SizeIs(0)) << "the damaged chunk still decodes to its length";
    ASSERT_EQ(file.bytes.size(), content_.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < content_.size(); ++i) differing += file.bytes[i] != content_[i] ? 1 : 0;
    EXPECT_EQ(differing, 1u) << "chunk " << chunk;
    const std::uint64_t chunk_start = chunk == 0 ? 0 : ends[chunk - 1];
    EXPECT_TRUE(file.bytes.substr(0, chunk_start) == content_.substr(0, chunk_start));
    EXPECT_NE(xet_hash_of(file.bytes), hash_);
  }
  // The plain path is the CAS's own reconstruction: not damaged.
  EXPECT_TRUE(http_get(api("/xet/files/" + hash_)).body == content_);
}

TEST_F(XetHubTest, CorruptChunkThatNoLongerDecodesIsRefusedByTheDecoder) {
  const std::vector<std::uint64_t> ends = xet::chunk_boundaries(as_bytes(content_));
  for (const std::size_t chunk : {std::size_t{0}, ends.size() / 2}) {
    hub_.faults().set_xet_corrupt_chunk(XetCorruption{hash_, chunk, false});
    const rapidjson::Document answer = parse_json(reconstruction("v1", hash_).body);
    EXPECT_ANY_THROW(fetch_v1(answer)) << "chunk " << chunk;
  }
}

TEST_F(XetHubTest, ShortTermClaimsMoreThanItsChunksDecodeTo) {
  hub_.faults().set_xet_short_term(1);
  const HttpResult result = reconstruction("v2", hash_);
  const rapidjson::Document answer = parse_json(result.body);
  const Reassembled file = reassemble(answer, fetch_v2(answer), content_.size());
  ASSERT_THAT(file.problems, SizeIs(1));
  EXPECT_THAT(file.problems[0], HasSubstr("announced"));
}

TEST_F(XetHubTest, RequestLogNamesTheCasAndGatewayHostsWithTheirRanges) {
  hub_.clear_requests();
  const HttpResult cas = reconstruction("v2", hash_, "bytes=0-99");
  const rapidjson::Document answer = parse_json(cas.body);
  fetch_v2(answer);
  const std::vector<HubRequest> log = hub_.requests();
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[0].server, "api");  // the token
  EXPECT_EQ(log[1].server, "cas");
  EXPECT_EQ(log[1].range, "bytes=0-99");
  EXPECT_THAT(log[1].authorization, StartsWith("Bearer xet_"));
  EXPECT_EQ(log[2].server, "gateway");
  EXPECT_THAT(log[2].range, StartsWith("bytes=0-"));
  EXPECT_EQ(log[2].status, 206);
  EXPECT_EQ(log[2].authorization, "");
}

TEST_F(XetHubTest, DeliveryFaultsApplyToGatewayAnswers) {
  const auto [url, range] = first_v2_entry();
  hub_.faults().set_truncate_at(10);
  const HttpResult cut = http_get_with(url, {"Range: " + range});
  EXPECT_NE(cut.code, CURLE_OK);
  EXPECT_EQ(cut.body.size(), 10u);
}

}  // namespace
}  // namespace testing_support
