// The test hub speaks the real Xet read protocol: the @huggingface/hub npm client's downloadFile, which
// implements Xet the way the Hugging Face hub serves it (xet-fileinfo resolve, read token, V2
// reconstruction, multi-range signed URLs with multipart answers), downloads Xet files from it byte-exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "fetchd/proof/content_hash.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xorb_chunk.h"
#include "tests/hub/test_hub.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_support::HubRequest;

std::string sha256(const std::string& s) {
  return fetchd::proof::sha256_hex(std::as_bytes(std::span(s.data(), s.size())));
}

std::string random_bytes(std::size_t size, std::uint64_t seed) {
  std::string bytes;
  std::uint64_t state = seed;
  while (bytes.size() < size) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bytes.push_back(static_cast<char>(state >> 56));
  }
  return bytes;
}

// Random bytes (stored raw), text (LZ4) and float-like values (byte grouping + LZ4): every chunk scheme.
std::string weights() {
  std::string content = random_bytes(300000, 1);
  for (int line = 0; content.size() < 600000; ++line)
    content += "line " + std::to_string(line) + ": the quick brown fox jumps over the lazy dog\n";
  const std::string noise = random_bytes(200000, 2);
  for (std::size_t i = 0; i + 1 < noise.size(); i += 2) content += std::string{noise[i], noise[i + 1], '\x80', '\x3f'};
  return content;
}

// The weights' first two chunks and everything from the fourth on: only chunks the hub already stores, two
// runs of one xorb, so the client fetches them with one multi-range request.
std::string spliced(const std::string& base) {
  const auto ends = fetchd::xet::chunk_boundaries(std::as_bytes(std::span(base.data(), base.size())));
  return base.substr(0, ends.at(1)) + base.substr(ends.at(2));
}

class XetHubInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(TEST_NODE_MODULES) / "@huggingface" / "hub"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
    hub_.set_store_lfs_as_xet(true);
    hub_.commit("org/model", "main",
                {{"config.json", "{}", false},
                 {"model.safetensors", weights_, true},
                 {"spliced.bin", spliced_, true},
                 {"empty.bin", "", true}});
  }

  // Runs the npm client; its output line, or the failure with what it printed.
  std::string download(const std::string& path, const std::string& options = "") {
    std::string output;
    const int status =
        testing_support::run_command(std::string("timeout 120 '") + NODE_EXECUTABLE + "' '" + INTEROP_SCRIPT + "' '" +
                                         hub_.endpoint() + "' org/model '" + path + "' " + options,
                                     output);
    EXPECT_EQ(status, 0) << output;
    return output;
  }

  std::vector<HubRequest> requests_to(const std::string& server) const {
    std::vector<HubRequest> found;
    for (const HubRequest& request : hub_.requests()) {
      if (request.server == server) found.push_back(request);
    }
    return found;
  }

  const std::string weights_ = weights();
  const std::string spliced_ = spliced(weights_);
  testing_support::TestHub hub_;
};

TEST_F(XetHubInterop, TheNpmClientDownloadsAXetFileSpanningSeveralXorbs) {
  // A fresh hub's xorbs hold up to 8192 chunks; this one is re-committed with three per xorb.
  hub_.set_xet_chunks_per_xorb(3);
  const std::string other = random_bytes(700000, 7);
  hub_.commit("org/model", "main", {{"model.safetensors", other, true}});
  for (const char* mode : {"", "--serial"}) {
    hub_.clear_requests();
    EXPECT_EQ(download("model.safetensors", mode),
              "XetBlob " + std::to_string(other.size()) + " " + sha256(other) + "\n");
    const std::vector<HubRequest> cas = requests_to("cas");
    ASSERT_EQ(cas.size(), 1u);
    EXPECT_THAT(cas[0].target,
                HasSubstr("/v2/reconstructions/" + *hub_.xet_hash("org/model", "main", "model.safetensors")));
    EXPECT_EQ(cas[0].range, "bytes=0-" + std::to_string(other.size() - 1));
    EXPECT_GE(requests_to("gateway").size(), 3u) << "one request per xorb";
    for (const HubRequest& request : requests_to("gateway")) {
      EXPECT_EQ(request.status, 206);
      EXPECT_EQ(request.authorization, "");
    }
    EXPECT_TRUE(requests_to("lfs").empty());
  }
}

TEST_F(XetHubInterop, TheNpmClientReadsEveryChunkSchemeAndMultipartAnswers) {
  // The weights hold chunks that writers store raw, as LZ4 and as byte-grouped LZ4: the client decodes all.
  std::set<int> schemes;
  const auto bytes = std::as_bytes(std::span(weights_.data(), weights_.size()));
  std::uint64_t start = 0;
  for (const std::uint64_t end : fetchd::xet::chunk_boundaries(bytes)) {
    schemes.insert(static_cast<int>(fetchd::xet::encode_chunk(bytes.subspan(start, end - start))[4]));
    start = end;
  }
  EXPECT_EQ(schemes, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(download("model.safetensors"),
            "XetBlob " + std::to_string(weights_.size()) + " " + sha256(weights_) + "\n");
  hub_.clear_requests();
  EXPECT_EQ(download("spliced.bin"), "XetBlob " + std::to_string(spliced_.size()) + " " + sha256(spliced_) + "\n");
  const std::vector<HubRequest> gateway = requests_to("gateway");
  ASSERT_EQ(gateway.size(), 1u);
  EXPECT_THAT(gateway[0].range, HasSubstr(","));  // two ranges in one request, answered as multipart
  EXPECT_EQ(gateway[0].status, 206);
}

TEST_F(XetHubInterop, TheNpmClientReadsASliceThroughARangedReconstruction) {
  const std::size_t start = 200001;
  const std::size_t end = 450003;
  const std::string expected = weights_.substr(start, end - start);
  EXPECT_EQ(download("model.safetensors", "--slice " + std::to_string(start) + " " + std::to_string(end)),
            "XetBlob " + std::to_string(expected.size()) + " " + sha256(expected) + "\n");
  const std::vector<HubRequest> cas = requests_to("cas");
  ASSERT_EQ(cas.size(), 1u);
  EXPECT_EQ(cas[0].range, "bytes=" + std::to_string(start) + "-" + std::to_string(end - 1));
}

TEST_F(XetHubInterop, TheNpmClientDownloadsFromAGatedRepositoryWithItsToken) {
  hub_.set_token("hf_test_token");  // the npm client insists on the hf_ prefix
  hub_.set_gated("org/model", true);
  EXPECT_EQ(download("model.safetensors", "--token hf_test_token"),
            "XetBlob " + std::to_string(weights_.size()) + " " + sha256(weights_) + "\n");
  EXPECT_EQ(download("empty.bin", "--token hf_test_token"), "XetBlob 0 " + sha256("") + "\n");
}

TEST_F(XetHubInterop, TheNpmClientRefreshesUrlsThatExpireMidDownload) {
  hub_.set_xet_chunks_per_xorb(3);
  const std::string other = random_bytes(700000, 8);
  hub_.commit("org/model", "main", {{"model.safetensors", other, true}});
  // One gateway request per xorb; all but the last are served before the URLs expire, so the client meets
  // exactly one 403 however many requests it runs at once, and must ask the CAS again.
  const auto chunks = fetchd::xet::chunk_boundaries(std::as_bytes(std::span(other.data(), other.size()))).size();
  const auto xorbs = static_cast<std::uint32_t>((chunks + 2) / 3);
  ASSERT_GE(xorbs, 3u);
  for (const char* mode : {"", "--serial"}) {
    hub_.faults().set_xet_urls_expire_after(xorbs - 1);
    hub_.clear_requests();
    EXPECT_EQ(download("model.safetensors", mode),
              "XetBlob " + std::to_string(other.size()) + " " + sha256(other) + "\n");
    const std::vector<HubRequest> gateway = requests_to("gateway");
    EXPECT_EQ(std::count_if(gateway.begin(), gateway.end(), [](const HubRequest& r) { return r.status == 403; }), 1);
    EXPECT_EQ(requests_to("cas").size(), 2u) << "a fresh reconstruction after the 403";
  }
}

TEST_F(XetHubInterop, WithoutXetHeadersThePlainPathGivesTheNpmClientNoSize) {
  hub_.faults().set_xet_headers(testing_support::XetHeaders::none);
  std::string output;
  // The plain path ignores Range (as OpenWeights does), so the client's `Range: bytes=0-0` probe gets the
  // whole file without a Content-Range, and the client gives up: it needs the size from somewhere.
  const int status =
      testing_support::run_command(std::string("timeout 120 '") + NODE_EXECUTABLE + "' '" + INTEROP_SCRIPT + "' '" +
                                       hub_.endpoint() + "' org/model model.safetensors",
                                   output);
  EXPECT_NE(status, 0);
  EXPECT_THAT(output, HasSubstr("Expected size information"));
  EXPECT_TRUE(requests_to("cas").empty());
}

}  // namespace
