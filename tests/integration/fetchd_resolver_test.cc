// fetchd's resolver against the loopback test hub: one test per behaviour, asserting what the hub saw
// and what the cache holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include "engine/format/gguf_writer.h"
#include "engine/format/safetensors_writer.h"
#include "fetchd/cache/cache_layout.h"
#include "fetchd/cache/repo_lock.h"
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
using testing_support::HubFile;
using testing_support::HubRequest;

std::string safetensors_bytes(int tensors, std::size_t elements, unsigned seed) {
  engine::format::SafetensorsWriter w;
  for (int t = 0; t < tensors; ++t) {
    std::vector<std::byte> data(elements * 4);
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<std::byte>((i * 13 + seed + static_cast<unsigned>(t)) & 0xff);
    w.add("layer." + std::to_string(seed) + "." + std::to_string(t), engine::format::SafetensorsDType::F32, {elements},
          data);
  }
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string gguf_bytes(const std::string& name) {
  engine::format::GgufWriter w;
  w.add_metadata("general.name", engine::format::GgufValue::string(name));
  w.add_tensor("t", {64}, *engine::format::ggml_type_by_name("F32"), std::vector<std::byte>(256, std::byte{7}));
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string sha256(const std::string& s) {
  return proof::sha256_hex(std::as_bytes(std::span(s.data(), s.size())));
}

struct CollectingObserver : ResolveObserver {
  std::vector<std::string> lines;
  std::size_t progress_events = 0;
  void log(const std::string& line, bool) override { lines.push_back(line); }
  void progress(Phase, const std::string&, std::uint64_t, std::uint64_t) override { ++progress_events; }
  bool said(const std::string& text) const {
    return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(text) != std::string::npos; });
  }
};

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_["HF_HOME"] = home_.path().string();
    env_["HF_ENDPOINT"] = hub_.endpoint();
    env_["HF_HUB_DOWNLOAD_TIMEOUT"] = "2";
    env_["HF_HUB_ETAG_TIMEOUT"] = "5";
  }

  ResolverOptions options() const {
    ResolverOptions o;
    o.environment = testing_support::map_environment(env_);
    o.retry.initial_backoff = std::chrono::milliseconds(10);
    o.retry.max_backoff = std::chrono::milliseconds(50);
    o.retry.max_attempts = 4;
    o.lock.lease_duration = std::chrono::milliseconds(2000);
    o.lock.heartbeat = std::chrono::milliseconds(200);
    o.lock.poll = std::chrono::milliseconds(20);
    return o;
  }

  Resolution resolve(const std::string& model, const std::string& revision = "", const std::string& dir = "") {
    Resolver resolver(options());
    return resolver.resolve({model, revision, dir}, observer_);
  }

  FetchError error_of(const std::string& model, const std::string& revision = "") {
    try {
      resolve(model, revision);
    } catch (const FetchError& e) {
      return e;
    }
    ADD_FAILURE() << "resolving " << model << " succeeded";
    return {ErrorKind::Internal, ""};
  }

  fs::path cache_dir() const { return home_.path() / "hub"; }
  cache::RepoCache repo(const std::string& id) const { return cache::RepoCache(cache_dir(), id); }

  // Requests for a path (by substring of the target), on either host.
  std::vector<HubRequest> requests_for(const std::string& fragment) const {
    std::vector<HubRequest> out;
    for (const auto& r : hub_.requests()) {
      if (r.target.find(fragment) != std::string::npos) out.push_back(r);
    }
    return out;
  }

  // A small safetensors checkpoint, with tokenizer and a README that is never fetched.
  std::string add_model(const std::string& id, const std::string& branch = "main", unsigned seed = 1) {
    return hub_.commit(
        id, branch,
        {{"config.json", R"({"architectures":["Qwen3ForCausalLM"],"seed":)" + std::to_string(seed) + "}", false},
         {"tokenizer.json", R"({"model":{"type":"BPE"}})", false},
         {"README.md", "# a model card", false},
         {"model.safetensors", safetensors_bytes(2, 5000, seed), true}});
  }

  testing_support::TestHub hub_;
  testing_support::TempDir home_;
  std::map<std::string, std::string> env_;
  CollectingObserver observer_;
};

TEST_F(ResolveTest, FetchesASnapshotInTheStandardLayout) {
  const auto commit = add_model("org/model");
  const auto r = resolve("org/model");
  EXPECT_EQ(r.commit, commit);
  EXPECT_EQ(r.served_model_name, "org/model");
  EXPECT_FALSE(r.from_cache);
  const auto repo_dir = cache_dir() / "models--org--model";
  EXPECT_EQ(r.local_path, repo_dir / "snapshots" / commit);
  // refs/main holds the commit with no newline.
  EXPECT_EQ(repo("org/model").read_ref("main"), commit);
  EXPECT_EQ(fs::file_size(repo_dir / "refs" / "main"), 40u);
  // Weights are relative symlinks to blobs named by their SHA-256.
  const auto weights = r.local_path / "model.safetensors";
  ASSERT_TRUE(fs::is_symlink(weights));
  const auto sha = sha256(safetensors_bytes(2, 5000, 1));
  EXPECT_EQ(fs::read_symlink(weights), fs::path("../../blobs") / sha);
  EXPECT_TRUE(fs::exists(repo_dir / "blobs" / sha));
  EXPECT_TRUE(fs::exists(r.local_path / "config.json"));
  EXPECT_TRUE(fs::exists(r.local_path / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(r.local_path / "README.md"));
  EXPECT_TRUE(requests_for("README.md").empty());
  // Every file carries its proofs.
  const auto file = std::find_if(r.files.begin(), r.files.end(), [](auto& f) { return f.path == "model.safetensors"; });
  ASSERT_NE(file, r.files.end());
  EXPECT_EQ(file->proofs, (std::vector<Proof>{Proof::Sha256, Proof::SafetensorsLayout}));
  const auto config = std::find_if(r.files.begin(), r.files.end(), [](auto& f) { return f.path == "config.json"; });
  EXPECT_EQ(config->proofs, (std::vector<Proof>{Proof::GitBlobSha1}));
  // Nothing unfinished is left behind.
  for (const auto& e : fs::directory_iterator(repo_dir / "blobs")) {
    EXPECT_FALSE(e.path().string().ends_with(".incomplete")) << e.path();
  }
}

TEST_F(ResolveTest, FilesAreFetchedUnderTheCommitNotTheBranch) {
  const auto commit = add_model("org/model");
  resolve("org/model");
  for (const auto& r : requests_for("/resolve/")) EXPECT_THAT(r.target, HasSubstr("/resolve/" + commit + "/"));
  EXPECT_EQ(requests_for("/refs").size(), 1u);
}

TEST_F(ResolveTest, MetadataComesBeforeWeights) {
  add_model("org/model");
  resolve("org/model");
  std::vector<std::string> order;
  for (const auto& r : requests_for("/resolve/")) order.push_back(r.target.substr(r.target.rfind('/') + 1));
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order.back(), "model.safetensors");
}

TEST_F(ResolveTest, AWarmRunOpensNoSocket) {
  add_model("org/model");
  const auto first = resolve("org/model");
  hub_.clear_requests();
  const auto second = resolve("org/model");
  EXPECT_TRUE(hub_.requests().empty());
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.local_path, first.local_path);
}

TEST_F(ResolveTest, OfflineWarmBehavesAsOnline) {
  add_model("org/model");
  const auto online = resolve("org/model");
  hub_.clear_requests();
  env_["HF_HUB_OFFLINE"] = "1";
  const auto offline = resolve("org/model");
  EXPECT_EQ(offline.local_path, online.local_path);
  EXPECT_EQ(offline.commit, online.commit);
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(ResolveTest, OfflineColdRefusesNamingTheDirectory) {
  add_model("org/model");
  env_["HF_HUB_OFFLINE"] = "1";
  const auto e = error_of("org/model");
  EXPECT_EQ(e.kind(), ErrorKind::OfflineMiss);
  EXPECT_THAT(e.what(), HasSubstr("HF_HUB_OFFLINE is set and repository 'org/model' has no recorded 'main' reference"));
  EXPECT_THAT(e.what(), HasSubstr((cache_dir() / "models--org--model").string()));
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(ResolveTest, DownloadDirBeatsTheEnvironment) {
  add_model("org/model");
  testing_support::TempDir elsewhere;
  env_["HF_HUB_CACHE"] = (home_.path() / "ignored").string();
  const auto r = resolve("org/model", "", elsewhere.path().string());
  EXPECT_EQ(r.local_path.parent_path().parent_path().parent_path(), elsewhere.path());
  EXPECT_FALSE(fs::exists(home_.path() / "ignored"));
}

TEST_F(ResolveTest, RevisionBranchWritesItsRef) {
  add_model("org/model");
  const auto dev = add_model("org/model", "dev", 2);
  const auto r = resolve("org/model", "dev");
  EXPECT_EQ(r.commit, dev);
  EXPECT_EQ(repo("org/model").read_ref("dev"), dev);
  EXPECT_FALSE(repo("org/model").read_ref("main"));
}

TEST_F(ResolveTest, TagsResolve) {
  const auto commit = add_model("org/model");
  add_model("org/model", "main", 3);
  hub_.tag("org/model", "v1.0", commit);
  EXPECT_EQ(resolve("org/model", "v1.0").commit, commit);
}

TEST_F(ResolveTest, ACommitRevisionCostsNoRefsRequest) {
  const auto commit = add_model("org/model");
  const auto r = resolve("org/model", commit);
  EXPECT_EQ(r.commit, commit);
  EXPECT_TRUE(requests_for("/refs").empty());
  EXPECT_FALSE(fs::exists(cache_dir() / "models--org--model" / "refs" / commit));
}

TEST_F(ResolveTest, UnknownRevisionListsWhatExists) {
  const auto commit = add_model("org/model");
  hub_.tag("org/model", "v1", commit);
  const auto e = error_of("org/model", "nope");
  EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  EXPECT_THAT(e.what(), HasSubstr("revision 'nope' is not a branch or tag of 'org/model'. Branches: main. Tags: v1."));
}

TEST_F(ResolveTest, UnknownRepository) {
  const auto e = error_of("org/missing");
  EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  EXPECT_THAT(e.what(), HasSubstr("repository 'org/missing' was not found on " + hub_.endpoint()));
}

TEST_F(ResolveTest, GatedRepositoryNeedsAToken) {
  add_model("org/gated");
  hub_.set_token("hf_secret");
  hub_.set_gated("org/gated", true);
  auto e = error_of("org/gated");
  EXPECT_EQ(e.kind(), ErrorKind::Auth);
  EXPECT_THAT(e.what(), HasSubstr("is gated"));
  EXPECT_THAT(e.what(), HasSubstr("HF_TOKEN"));
  env_["HF_TOKEN"] = "hf_wrong";
  e = error_of("org/gated");
  EXPECT_EQ(e.kind(), ErrorKind::Auth);
  EXPECT_THAT(e.what(), HasSubstr("has not been granted access"));
  env_.erase("HF_TOKEN");
  testing_support::write_file(home_.path() / "token", std::string_view("hf_secret\n"));
  EXPECT_NO_THROW(resolve("org/gated"));
}

TEST_F(ResolveTest, TheTokenNeverReachesAnotherHost) {
  add_model("org/model");
  env_["HF_TOKEN"] = "hf_secret";
  resolve("org/model");
  bool saw_lfs = false;
  for (const auto& r : hub_.requests()) {
    if (r.server == "lfs") {
      saw_lfs = true;
      EXPECT_EQ(r.authorization, "") << r.target;
    } else {
      EXPECT_EQ(r.authorization, "Bearer hf_secret") << r.target;
    }
  }
  EXPECT_TRUE(saw_lfs);
}

// A redirect whose target carries userinfo ("user:password@") would have libcurl send those as Basic
// credentials to the host it names: the userinfo is dropped and the redirect followed without it.
TEST_F(ResolveTest, ARedirectNeverCarriesCredentialsFromItsUserinfo) {
  const std::string commit = add_model("org/model");
  const std::string port = hub_.endpoint().substr(hub_.endpoint().rfind(':') + 1);
  hub_.faults().fail_next("/config.json", 1, 302,
                          {{"Location", "http://hub-user:hub-password@localhost:" + port + "/org/model/resolve/" +
                                            commit + "/config.json"}});
  EXPECT_NO_THROW(resolve("org/model"));
  bool followed = false;
  for (const auto& r : hub_.requests()) {
    EXPECT_EQ(r.authorization, "") << r.host << r.target;
    followed = followed || (r.host == "localhost:" + port && r.target.ends_with("/config.json"));
  }
  EXPECT_TRUE(followed);
}

TEST_F(ResolveTest, RelativeRedirectsKeepTheirQuery) {
  add_model("org/model");
  hub_.faults().set_relative_lfs_redirect(true);
  EXPECT_NO_THROW(resolve("org/model"));
  EXPECT_FALSE(requests_for("/lfs/objects/").empty());
}

TEST_F(ResolveTest, ARedirectOnAnApiCallIsRefused) {
  add_model("org/model");
  hub_.faults().set_redirect_api(true);
  const auto e = error_of("org/model");
  EXPECT_THAT(e.what(), HasSubstr("API calls are never redirected"));
}

TEST_F(ResolveTest, IndexNamesExactlyTheShardsFetched) {
  const std::string index = R"({"metadata":{"total_size":40000},"weight_map":{
      "a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  hub_.commit("org/sharded", "main",
              {{"config.json", "{}", false},
               {"model.safetensors.index.json", index, false},
               {"model-00001-of-00002.safetensors", safetensors_bytes(1, 5000, 4), true},
               {"model-00002-of-00002.safetensors", safetensors_bytes(1, 5000, 5), true},
               {"consolidated.safetensors", safetensors_bytes(1, 5000, 6), true},
               {"original/consolidated.00.pth", "weights", true},
               {"pytorch_model.bin", "weights", true}});
  const auto r = resolve("org/sharded");
  EXPECT_TRUE(fs::exists(r.local_path / "model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(r.local_path / "model-00002-of-00002.safetensors"));
  EXPECT_TRUE(requests_for("consolidated").empty());
  EXPECT_TRUE(requests_for("pytorch_model.bin").empty());
}

TEST_F(ResolveTest, BinOnlyRepositoryIsRefusedBeforeAnyWeightByte) {
  hub_.commit("org/old", "main", {{"config.json", "{}", false}, {"pytorch_model.bin", std::string(100000, 'w'), true}});
  const auto e = error_of("org/old");
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_THAT(e.what(), HasSubstr("pytorch_model.bin"));
  EXPECT_FALSE(requests_for("config.json").empty());
  EXPECT_TRUE(requests_for("pytorch_model.bin").empty());
}

TEST_F(ResolveTest, ARepositoryWithoutConfigOrGgufDownloadsNothing) {
  hub_.commit("org/data", "main", {{"data.csv", "a,b", false}, {"README.md", "#", false}});
  const auto e = error_of("org/data");
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_THAT(e.what(), HasSubstr("no config.json and no .gguf file"));
  EXPECT_TRUE(requests_for("/resolve/").empty());
}

TEST_F(ResolveTest, GgufQuantFetchesOnlyThatFile) {
  hub_.commit("org/gguf", "main",
              {{"m-Q4_K_M.gguf", gguf_bytes("q4km"), true},
               {"m-Q4_K_S.gguf", gguf_bytes("q4ks"), true},
               {"m-Q8_0.gguf", gguf_bytes("q8"), true}});
  const auto r = resolve("org/gguf:q8_0");
  EXPECT_EQ(r.local_path.filename(), "m-Q8_0.gguf");
  EXPECT_EQ(r.served_model_name, "org/gguf:q8_0");
  EXPECT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].proofs, (std::vector<Proof>{Proof::Sha256, Proof::GgufLayout}));
  EXPECT_TRUE(requests_for("Q4_K").empty());
  hub_.clear_requests();
  const auto picked = resolve("org/gguf");  // no config.json: Q4_K_M by default
  EXPECT_EQ(picked.local_path.filename(), "m-Q4_K_M.gguf");
  EXPECT_TRUE(requests_for("Q4_K_S").empty());
  EXPECT_TRUE(observer_.said("picked Q4_K_M"));
}

TEST_F(ResolveTest, ListingIntegrityIsCheckedBeforeAnyDownload) {
  add_model("org/model");
  hub_.faults().override_tree("org/model", R"([{"type":"file","oid":"1234","size":10,"path":"config.json"},
                       {"type":"file","oid":"p","size":10,"path":"model.safetensors","lfs":{"oid":")" +
                                               std::string(64, 'a') + R"(","size":10,"pointerSize":130}}])");
  const auto e = error_of("org/model");
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("whose 64 characters are all 'a'"));
  EXPECT_TRUE(requests_for("/resolve/").empty());
}

TEST_F(ResolveTest, PaginatedListingsAreReadToTheEnd) {
  add_model("org/model");
  hub_.faults().set_tree_page_size(1);
  const auto r = resolve("org/model");
  EXPECT_TRUE(fs::exists(r.local_path / "model.safetensors"));
  EXPECT_GE(requests_for("/tree/").size(), 4u);
}

TEST_F(ResolveTest, CorruptBytesNeverTakeTheBlobName) {
  add_model("org/model");
  hub_.faults().set_corrupt_lfs(true);
  const auto e = error_of("org/model");
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("arrived with SHA-256"));
  EXPECT_THAT(e.what(), HasSubstr(sha256(safetensors_bytes(2, 5000, 1))));
  const auto blobs = cache_dir() / "models--org--model" / "blobs";
  EXPECT_FALSE(fs::exists(blobs / sha256(safetensors_bytes(2, 5000, 1))));
  EXPECT_FALSE(fs::exists(blobs / (sha256(safetensors_bytes(2, 5000, 1)) + ".incomplete")));
  EXPECT_FALSE(repo("org/model").read_ref("main"));  // no ref for an incomplete snapshot
}

TEST_F(ResolveTest, AnInterruptedDownloadResumesWithRange) {
  add_model("org/model");
  const auto content = safetensors_bytes(2, 5000, 1);
  const auto partial = cache_dir() / "models--org--model" / "blobs" / (sha256(content) + ".incomplete");
  fs::create_directories(partial.parent_path());
  testing_support::write_file(partial, std::string_view(content).substr(0, 12345));
  const auto r = resolve("org/model");
  const auto lfs = requests_for("/lfs/objects/");
  ASSERT_FALSE(lfs.empty());
  EXPECT_EQ(lfs.back().range, "bytes=12345-");
  EXPECT_EQ(fs::file_size(r.local_path / "model.safetensors"), content.size());
}

TEST_F(ResolveTest, AResumedDownloadThatFailsItsProofIsFetchedAgainFromTheStart) {
  add_model("org/model");
  const auto content = safetensors_bytes(2, 5000, 1);
  const auto partial = cache_dir() / "models--org--model" / "blobs" / (sha256(content) + ".incomplete");
  fs::create_directories(partial.parent_path());
  testing_support::write_file(partial, std::string(12345, 'x'));  // not the file's first bytes
  const auto r = resolve("org/model");
  EXPECT_EQ(proof::sha256_hex(testing_support::read_file(r.local_path / "model.safetensors")), sha256(content));
  const auto lfs = requests_for("/lfs/objects/");
  ASSERT_EQ(lfs.size(), 2u);
  EXPECT_EQ(lfs[0].range, "bytes=12345-");
  EXPECT_EQ(lfs[1].range, "");
  EXPECT_TRUE(observer_.said("resumed at byte 12345 and failed its proof"));
}

TEST_F(ResolveTest, A200ToARangeRequestIsRefusedAndNothingIsAppended) {
  add_model("org/model");
  const auto content = safetensors_bytes(2, 5000, 1);
  const auto partial = cache_dir() / "models--org--model" / "blobs" / (sha256(content) + ".incomplete");
  fs::create_directories(partial.parent_path());
  testing_support::write_file(partial, std::string_view(content).substr(0, 1000));
  hub_.faults().set_ignore_range(true);
  const auto e = error_of("org/model");
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  EXPECT_THAT(e.what(), HasSubstr("with the whole file (200, not 206); nothing was appended"));
  EXPECT_THAT(e.what(), HasSubstr("Delete " + partial.string()));
  EXPECT_EQ(fs::file_size(partial), 1000u);
}

TEST_F(ResolveTest, ATruncatedBodyIsResumed) {
  add_model("org/model");
  hub_.faults().set_truncate_at(15000);
  const auto r = resolve("org/model");
  EXPECT_EQ(fs::file_size(r.local_path / "model.safetensors"), safetensors_bytes(2, 5000, 1).size());
  const auto lfs = requests_for("/lfs/objects/");
  ASSERT_GE(lfs.size(), 2u);
  EXPECT_EQ(lfs[1].range, "bytes=15000-");
}

TEST_F(ResolveTest, AStalledDownloadIsDetectedAndKept) {
  add_model("org/model");
  env_["HF_HUB_DOWNLOAD_TIMEOUT"] = "1";
  hub_.faults().set_stall_at(4096);
  auto o = options();
  o.retry.max_attempts = 2;
  Resolver resolver(o);
  try {
    resolver.resolve({"org/model", "", ""}, observer_);
    FAIL() << "a stalled download succeeded";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Network);
    EXPECT_THAT(e.what(), HasSubstr("HF_HUB_DOWNLOAD_TIMEOUT"));
    EXPECT_THAT(e.what(), HasSubstr("kept"));
  }
  const auto partial =
      cache_dir() / "models--org--model" / "blobs" / (sha256(safetensors_bytes(2, 5000, 1)) + ".incomplete");
  EXPECT_EQ(fs::file_size(partial), 8192u);  // two attempts of 4096 bytes each, appended in order
}

TEST_F(ResolveTest, RateLimitsAndServerErrorsAreRetried) {
  add_model("org/model");
  hub_.faults().fail_next("/api/models/org/model/refs", 1, 429, {{"Retry-After", "0"}});
  hub_.faults().fail_next("/tree/", 2, 503);
  hub_.faults().fail_next("/lfs/objects/", 1, 500);
  EXPECT_NO_THROW(resolve("org/model"));
  EXPECT_EQ(requests_for("/refs").size(), 2u);
  EXPECT_EQ(requests_for("/tree/").size(), 3u);
  EXPECT_EQ(requests_for("/lfs/objects/").size(), 2u);
}

TEST_F(ResolveTest, PersistentServerErrorsGiveUpClearly) {
  add_model("org/model");
  hub_.faults().fail_next("/refs", 100, 502);
  const auto e = error_of("org/model");
  EXPECT_EQ(e.kind(), ErrorKind::Network);
  EXPECT_THAT(e.what(), HasSubstr("after 4 attempt(s): HTTP 502"));
}

TEST_F(ResolveTest, SymlinksCanBeTurnedOff) {
  add_model("org/model");
  env_["HF_HUB_DISABLE_SYMLINKS"] = "1";
  const auto r = resolve("org/model");
  EXPECT_FALSE(fs::is_symlink(r.local_path / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(r.local_path / "model.safetensors"));
  EXPECT_TRUE(observer_.said("cannot hold symbolic links"));
}

TEST_F(ResolveTest, ConcurrentResolvesDownloadEachBlobOnce) {
  add_model("org/model");
  std::vector<std::thread> threads;
  std::vector<std::string> paths(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      CollectingObserver o;
      Resolver resolver(options());
      paths[i] = resolver.resolve({"org/model", "", ""}, o).local_path.string();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& p : paths) EXPECT_EQ(p, paths[0]);
  EXPECT_EQ(requests_for("/lfs/objects/").size(), 1u);
}

TEST_F(ResolveTest, ACacheWrittenByAnotherToolIsReadWithoutTheHub) {
  // The layout huggingface_hub writes, made by hand.
  const std::string commit(40, 'c');
  const auto repo_dir = cache_dir() / "models--org--other";
  fs::create_directories(repo_dir / "refs");
  fs::create_directories(repo_dir / "blobs");
  fs::create_directories(repo_dir / "snapshots" / commit);
  testing_support::write_file(repo_dir / "refs" / "main", std::string_view(commit));
  const auto weights = safetensors_bytes(1, 10, 9);
  testing_support::write_file(repo_dir / "blobs" / sha256(weights), weights);
  testing_support::write_file(repo_dir / "blobs" / "cfg", std::string_view("{}"));
  fs::create_symlink("../../blobs/" + sha256(weights), repo_dir / "snapshots" / commit / "model.safetensors");
  fs::create_symlink("../../blobs/cfg", repo_dir / "snapshots" / commit / "config.json");
  const auto r = resolve("org/other");
  EXPECT_EQ(r.commit, commit);
  EXPECT_TRUE(r.from_cache);
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(ResolveTest, WithoutRefsTheNewestSnapshotWithAConfigServesOffline) {
  const auto repo_dir = cache_dir() / "models--org--norefs";
  for (const char* commit : {"1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"}) {
    fs::create_directories(repo_dir / "snapshots" / commit);
    testing_support::write_file(repo_dir / "snapshots" / commit / "config.json", std::string_view("{}"));
    testing_support::write_file(repo_dir / "snapshots" / commit / "model.safetensors", safetensors_bytes(1, 4, 1));
  }
  fs::last_write_time(repo_dir / "snapshots" / "1111111111111111111111111111111111111111",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  env_["HF_HUB_OFFLINE"] = "1";
  EXPECT_EQ(resolve("org/norefs").commit, "2222222222222222222222222222222222222222");
}

// Every entry under `dir` with its modification time (symlinks by their own), to prove nothing was written.
std::map<std::string, fs::file_time_type> tree_state(const fs::path& dir) {
  std::map<std::string, fs::file_time_type> state;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    state[e.path().string()] = e.is_symlink() ? fs::file_time_type{} : fs::last_write_time(e.path());
  }
  return state;
}

TEST_F(ResolveTest, ACompleteCacheResolvesWithoutWriting) {
  add_model("org/model");
  const auto r = resolve("org/model");
  const auto repo_dir = cache_dir() / "models--org--model";
  const auto before = tree_state(cache_dir());
  ::chmod(repo_dir.c_str(), 0555);
  env_["HF_HUB_OFFLINE"] = "1";
  EXPECT_EQ(resolve("org/model").local_path, r.local_path);
  ::chmod(repo_dir.c_str(), 0755);
  EXPECT_EQ(tree_state(cache_dir()), before);
}

TEST_F(ResolveTest, AFileWithoutAnIdIsNamedByCommitAndPath) {
  const auto commit = add_model("org/model");
  const std::string weights = safetensors_bytes(2, 5000, 1);
  hub_.faults().override_tree("org/model", R"([{"type":"file","size":)" + std::to_string(weights.size()) +
                                               R"(,"path":"model.safetensors"},{"type":"file","path":"config.json"}])");
  const auto r = resolve("org/model");
  EXPECT_TRUE(observer_.said("named by commit plus path (" + commit + "--"));
  const auto target = fs::read_symlink(r.local_path / "model.safetensors").filename().string();
  EXPECT_TRUE(target.starts_with(commit + "--")) << target;
  const auto weights_file =
      std::find_if(r.files.begin(), r.files.end(), [](auto& f) { return f.path == "model.safetensors"; });
  EXPECT_EQ(weights_file->proofs, (std::vector<Proof>{Proof::SafetensorsLayout}));  // no hash was given
}

TEST_F(ResolveTest, HuggingfaceHubsBlobLockIsRespected) {
  add_model("org/model");
  const std::string weights = safetensors_bytes(2, 5000, 1);
  const auto held = cache::BlobFileLock::acquire(repo("org/model"), sha256(weights));  // as a Python process would
  auto o = options();
  o.lock.max_wait = std::chrono::milliseconds(300);
  Resolver resolver(o);
  try {
    resolver.resolve({"org/model", "", ""}, observer_);
    FAIL() << "wrote a blob whose lock another program holds";
  } catch (const FetchError& e) {
    EXPECT_THAT(e.what(), HasSubstr(sha256(weights) + ".lock"));
  }
  EXPECT_TRUE(requests_for("/lfs/objects/").empty());
}

TEST_F(ResolveTest, LocalPathsNeverTouchTheHub) {
  testing_support::TempDir model;
  const auto r = resolve(model.path().string());
  EXPECT_EQ(r.local_path, model.path());
  EXPECT_TRUE(hub_.requests().empty());
}

}  // namespace
}  // namespace fetchd::resolve
