// fetchd's Xet path against the test hub's Xet store: one test per behaviour, asserting what the hub saw
// and what the cache holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "engine/format/safetensors_writer.h"
#include "fetchd/proof/content_hash.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/resolve/resolver.h"
#include "tests/hub/test_hub.h"
#include "tests/support/environment.h"
#include "tests/support/temp_dir.h"

namespace fetchd::resolve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_support::HubRequest;

// ~1.2 MB of weights whose bytes vary enough for content-defined chunking to cut several chunks.
std::string weights_bytes() {
  engine::format::SafetensorsWriter w;
  std::vector<std::byte> data(1'200'000);
  std::uint64_t x = 88172645463325252ull;
  for (auto& b : data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x % 7 == 0 ? 0 : x & 0xff);  // some zeros: LZ4 finds something to do
  }
  w.add("w", engine::format::SafetensorsDType::U8, {data.size()}, data);
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

struct Observer : ResolveObserver {
  std::vector<std::string> lines;
  void log(const std::string& line, bool) override { lines.push_back(line); }
  bool said(const std::string& text) const {
    return std::any_of(lines.begin(), lines.end(), [&](auto& l) { return l.find(text) != std::string::npos; });
  }
};

class XetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_.set_store_lfs_as_xet(true);
    hub_.set_xet_chunks_per_xorb(4);  // several xorbs, several fetch units
    commit_ = hub_.commit("org/xet", "main", {{"config.json", "{}", false}, {"model.safetensors", weights_, true}});
    xet_hash_ = *hub_.xet_hash("org/xet", "main", "model.safetensors");
  }

  ResolverOptions options() const {
    ResolverOptions o;
    o.environment = testing_support::map_environment(env_);
    o.retry.initial_backoff = std::chrono::milliseconds(5);
    o.retry.max_backoff = std::chrono::milliseconds(20);
    o.retry.max_attempts = 4;
    return o;
  }

  Resolution resolve(std::optional<ResolverOptions> o = std::nullopt) {
    return Resolver(o.value_or(options())).resolve({"org/xet", "", ""}, observer_);
  }

  FetchError error_of(std::optional<ResolverOptions> o = std::nullopt) {
    try {
      resolve(o);
    } catch (const FetchError& e) {
      return e;
    }
    ADD_FAILURE() << "resolve succeeded";
    return {ErrorKind::Internal, ""};
  }

  std::vector<HubRequest> on(const std::string& server, const std::string& fragment = "") const {
    std::vector<HubRequest> out;
    for (const auto& r : hub_.requests()) {
      if (r.server == server && r.target.find(fragment) != std::string::npos) out.push_back(r);
    }
    return out;
  }
  std::vector<HubRequest> with(const std::string& fragment) const {
    std::vector<HubRequest> out;
    for (const auto& r : hub_.requests()) {
      if (r.target.find(fragment) != std::string::npos) out.push_back(r);
    }
    return out;
  }

  const ResolvedFile& weights_file(const Resolution& r) const {
    return *std::find_if(r.files.begin(), r.files.end(), [](auto& f) { return f.path == "model.safetensors"; });
  }

  void expect_complete(const Resolution& r) const {
    const auto path = r.local_path / "model.safetensors";
    ASSERT_TRUE(fs::exists(path));
    const auto bytes = testing_support::read_file(path);
    EXPECT_EQ(fetchd::proof::sha256_hex(bytes), sha256_);
  }

  fs::path partial() const { return home_.path() / "hub" / "models--org--xet" / "blobs" / (sha256_ + ".incomplete"); }

  std::string weights_ = weights_bytes();
  std::string sha256_ = fetchd::proof::sha256_hex(std::as_bytes(std::span(weights_.data(), weights_.size())));
  testing_support::TestHub hub_;
  testing_support::TempDir home_;
  std::map<std::string, std::string> env_{
      {"HF_HOME", home_.path().string()}, {"HF_ENDPOINT", hub_.endpoint()}, {"HF_HUB_DOWNLOAD_TIMEOUT", "5"}};
  std::string commit_;
  std::string xet_hash_;
  Observer observer_;
};

TEST_F(XetTest, RebuildsTheFileFromTheStoreAndProvesIt) {
  const auto r = resolve();
  expect_complete(r);
  EXPECT_EQ(weights_file(r).proofs, (std::vector<Proof>{Proof::XetHash, Proof::Sha256, Proof::SafetensorsLayout}));
  // One token for the repository, V2 reconstructions, several signed fetches, no plain transfer.
  EXPECT_EQ(with("/xet-read-token/").size(), 1u);
  EXPECT_FALSE(on("cas", "/v2/reconstructions/" + xet_hash_).empty());
  EXPECT_GE(on("gateway").size(), 2u);
  EXPECT_TRUE(with("/xet/files/").empty());
  EXPECT_TRUE(with("/lfs/objects/").empty());
  // The resolve was asked under the commit.
  for (const auto& req : with("/resolve/")) EXPECT_THAT(req.target, HasSubstr("/resolve/" + commit_ + "/"));
}

TEST_F(XetTest, SignedUrlsNeverSeeAToken) {
  env_["HF_TOKEN"] = "hf_secret";
  resolve();
  for (const auto& req : on("gateway")) EXPECT_EQ(req.authorization, "") << req.target;
  for (const auto& req : on("cas")) {
    EXPECT_THAT(req.authorization, HasSubstr("Bearer "));
    EXPECT_THAT(req.authorization, ::testing::Not(HasSubstr("hf_secret")));  // the Xet token, not the hub's
  }
  for (const auto& req : with("/xet-read-token/")) EXPECT_EQ(req.authorization, "Bearer hf_secret");
}

TEST_F(XetTest, HfHubDisableXetFollowsThePlainRedirect) {
  env_["HF_HUB_DISABLE_XET"] = "1";
  const auto r = resolve();
  expect_complete(r);
  EXPECT_TRUE(on("cas").empty());
  EXPECT_FALSE(with("/xet/files/").empty());
  EXPECT_EQ(weights_file(r).proofs, (std::vector<Proof>{Proof::Sha256, Proof::SafetensorsLayout}));
}

TEST_F(XetTest, AHubWithoutXetHeadersIsFetchedPlainly) {
  hub_.faults().set_xet_headers(testing_support::XetHeaders::none);
  expect_complete(resolve());
  EXPECT_TRUE(on("cas").empty());
  EXPECT_FALSE(with("/xet/files/").empty());
}

TEST_F(XetTest, TheOlderRefreshRouteAndHeaderTokensWork) {
  hub_.faults().set_xet_headers(testing_support::XetHeaders::refresh_route);
  hub_.faults().set_xet_token_in_headers(true);
  expect_complete(resolve());
  EXPECT_FALSE(on("cas").empty());
}

TEST_F(XetTest, ARefusedTokenFallsBackToThePlainPath) {
  hub_.faults().set_xet_token_refused(true);
  const auto r = resolve();
  expect_complete(r);
  EXPECT_TRUE(on("cas").empty());
  EXPECT_FALSE(with("/xet/files/").empty());
  EXPECT_TRUE(observer_.said("fetching it through the plain redirect"));
}

TEST_F(XetTest, AStoreWithoutV2IsReadThroughV1) {
  hub_.faults().set_xet_v2_disabled(true);
  expect_complete(resolve());
  EXPECT_FALSE(on("cas", "/v1/reconstructions/").empty());
}

TEST_F(XetTest, ExpiredSignedUrlsAreRenewedByAFreshReconstruction) {
  hub_.faults().set_xet_urls_expire_after(1);  // each batch of URLs serves one request, then answers 403
  expect_complete(resolve());
  std::size_t refused = 0;
  for (const auto& req : on("gateway")) refused += req.status == 403;
  EXPECT_GE(refused, 1u);
  EXPECT_GE(on("cas", "/reconstructions/").size(), 2u);
}

// A store that refuses every signed URL it hands out ends the download after as many fresh reconstructions
// as the retry policy allows, keeping what was written; it is never asked forever.
TEST_F(XetTest, AStoreThatRefusesEverySignedUrlEndsTheDownload) {
  hub_.faults().set_xet_urls_expired(true);
  auto o = options();
  o.retry.max_attempts = 3;
  const auto e = error_of(o);
  EXPECT_EQ(e.kind(), ErrorKind::Network);
  EXPECT_THAT(e.what(), HasSubstr("signed URLs (403) in a row, fresh ones included"));
}

TEST_F(XetTest, DataNotYetPinnedIsWaitedFor) {
  hub_.faults().set_xet_unpinned_for(2);
  expect_complete(resolve());
  std::size_t not_found = 0;
  for (const auto& req : on("cas", "/reconstructions/")) not_found += req.status == 404;
  EXPECT_EQ(not_found, 2u);
}

TEST_F(XetTest, MultipartPartsOutOfOrderAreMatchedByRange) {
  hub_.set_xet_chunks_per_xorb(64);  // one xorb per file: its ranges come in one multi-range answer
  hub_.commit("org/xet", "main", {{"config.json", "{}", false}, {"model.safetensors", weights_ + "", true}});
  hub_.faults().set_xet_multipart_reversed(true);
  expect_complete(resolve());
}

TEST_F(XetTest, ACorruptChunkThatStillDecodesIsRefused) {
  hub_.faults().set_xet_corrupt_chunk(testing_support::XetCorruption{xet_hash_, 3, true});
  const auto e = error_of();
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("rebuilt from the Xet store hashes to"));
  EXPECT_THAT(e.what(), HasSubstr("but the hub names it " + xet_hash_));
  EXPECT_FALSE(fs::exists(home_.path() / "hub" / "models--org--xet" / "blobs" / sha256_));
  EXPECT_FALSE(fs::exists(partial()));
}

TEST_F(XetTest, AChunkThatDoesNotDecodeIsRefused) {
  hub_.faults().set_xet_corrupt_chunk(testing_support::XetCorruption{xet_hash_, 1, false});
  const auto e = error_of();
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_FALSE(fs::exists(home_.path() / "hub" / "models--org--xet" / "blobs" / sha256_));
}

TEST_F(XetTest, ATermThatDecodesShortIsRefused) {
  hub_.faults().set_xet_short_term(0);
  const auto e = error_of();
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("decode to"));
}

TEST_F(XetTest, AnInterruptedDownloadFetchesOnlyWhatIsMissing) {
  // A clean download elsewhere counts the fetch units.
  {
    testing_support::TempDir other;
    auto env = env_;
    env["HF_HOME"] = other.path().string();
    auto o = options();
    o.environment = testing_support::map_environment(env);
    Observer quiet;
    Resolver(o).resolve({"org/xet", "", ""}, quiet);
  }
  const auto total_units = on("gateway").size();
  ASSERT_GE(total_units, 3u);
  hub_.clear_requests();

  // First run: one fetch fails for good, so the run stops with part of the file written and recorded. The
  // second fetch to reach the store fails: the first one is then served and recorded whatever the threads'
  // timing (failing the first could stop the run before any other fetch began).
  auto o = options();
  o.retry.max_attempts = 1;
  hub_.faults().fail_after("/xorbs/", 1, 1, 500);
  EXPECT_EQ(error_of(o).kind(), ErrorKind::Network);
  std::size_t written = 0;
  for (const auto& req : on("gateway")) written += req.status == 206;
  ASSERT_GE(written, 1u);
  ASSERT_TRUE(fs::exists(partial()));

  hub_.clear_requests();
  const auto r = resolve();
  expect_complete(r);
  EXPECT_EQ(on("gateway").size(), total_units - written);
  EXPECT_TRUE(observer_.said("bytes already rebuilt"));
}

TEST_F(XetTest, LargeFilesAreReconstructedInBlocksWhoseTermsCrossTheirEdges) {
  auto o = options();
  o.xet_block_size = 300'000;  // not a chunk boundary: terms start inside a block's first chunk
  expect_complete(resolve(o));
  const auto recon = on("cas", "/reconstructions/");
  ASSERT_GE(recon.size(), 4u);
  EXPECT_EQ(recon[0].range, "bytes=0-299999");
  EXPECT_EQ(recon[1].range, "bytes=300000-599999");
}

TEST_F(XetTest, A416IsReadAsTheEndOfTheData) {
  auto o = options();
  o.xet_block_size = 300'000;
  hub_.faults().fail_next("/reconstructions/", 1, 416, {{"Content-Range", "bytes */0"}});
  const auto e = error_of(o);
  // Not retried, not taken for an HTTP failure: the store has no data there, so the file cannot be whole.
  EXPECT_EQ(on("cas", "/reconstructions/").size(), 1u);
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("covers 0 of its " + std::to_string(weights_.size()) + " bytes"));
}

TEST_F(XetTest, ATokenIsReusedUntilItNearlyExpires) {
  auto o = options();
  o.xet_block_size = 300'000;
  expect_complete(resolve(o));
  EXPECT_EQ(with("/xet-read-token/").size(), 1u);                  // one token for every reconstruction
  hub_.faults().set_xet_token_lifetime(std::chrono::seconds(30));  // inside the one-minute renewal margin
  testing_support::TempDir other;
  env_["HF_HOME"] = other.path().string();
  hub_.clear_requests();
  expect_complete(resolve(o));
  EXPECT_EQ(with("/xet-read-token/").size(), on("cas", "/reconstructions/").size());
}

TEST_F(XetTest, TheStorePushingBackIsRetried) {
  hub_.faults().fail_next("/xorbs/", 1, 429, {{"Retry-After", "0"}});
  hub_.faults().fail_next("/xorbs/", 2, 503);
  hub_.faults().fail_next("/reconstructions/", 1, 500);
  expect_complete(resolve());
}

TEST_F(XetTest, AListedXetHashIsNeverTakenForASha256) {
  // OpenWeights lists the Xet hash where the SHA-256 would be (lfs.oid, blob id).
  hub_.faults().override_tree(
      "org/xet", R"([{"type":"file","oid":"9e26dfeeb6e641a33dae4961196235bdb965b21b","size":2,"path":"config.json"},
      {"type":"file","oid":"1111111111111111111111111111111111111112","size":)" +
                     std::to_string(weights_.size()) + R"(,"path":"model.safetensors","lfs":{"oid":")" + xet_hash_ +
                     R"(","size":)" + std::to_string(weights_.size()) + R"(},"xetHash":")" + xet_hash_ + R"("}])");
  const auto r = resolve();
  expect_complete(r);
  EXPECT_EQ(weights_file(r).proofs, (std::vector<Proof>{Proof::XetHash, Proof::SafetensorsLayout}));
  EXPECT_EQ(weights_file(r).blob_id, xet_hash_);
}

TEST_F(XetTest, APlainSourceThatIgnoresRangeRestartsFromZero) {
  hub_.faults().set_xet_token_refused(true);  // plain path: /xet/files ignores Range
  const auto blob_partial = partial();
  fs::create_directories(blob_partial.parent_path());
  testing_support::write_file(blob_partial, std::string_view(weights_).substr(0, 1000));
  expect_complete(resolve());
  const auto plain = with("/xet/files/");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.front().range, "bytes=1000-");  // asked to resume, got the whole file, started over
}

TEST_F(XetTest, APlainFetchNeverResumesFromAnInterruptedXetFile) {
  auto o = options();
  o.retry.max_attempts = 1;
  hub_.faults().fail_after("/xorbs/", 1, 1, 500);  // the first fetch served: bytes to keep
  EXPECT_EQ(error_of(o).kind(), ErrorKind::Network);
  ASSERT_TRUE(fs::exists(partial()));  // written at term offsets, with holes
  env_["HF_HUB_DISABLE_XET"] = "1";
  hub_.clear_requests();
  expect_complete(resolve());
  for (const auto& req : with("/xet/files/")) EXPECT_EQ(req.range, "");  // started over, not resumed
}

TEST_F(XetTest, APlainFetchNeverResumesFromAXetFileThatRecordedNothing) {
  // Every fetch fails: the partial file exists at full size, all holes, with nothing recorded yet.
  auto o = options();
  o.retry.max_attempts = 1;
  hub_.faults().fail_next("/xorbs/", 1000, 500);
  EXPECT_EQ(error_of(o).kind(), ErrorKind::Network);
  for (const auto& req : on("gateway")) ASSERT_EQ(req.status, 500);
  ASSERT_TRUE(fs::exists(partial()));
  hub_.faults().reset();
  env_["HF_HUB_DISABLE_XET"] = "1";
  hub_.clear_requests();
  expect_complete(resolve());
  for (const auto& req : with("/xet/files/")) EXPECT_EQ(req.range, "");
}

}  // namespace
}  // namespace fetchd::resolve
