// fetchd verify: every stored file re-proves itself from its bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "engine/format/safetensors_writer.h"
#include "fetchd/cache/cache_layout.h"
#include "fetchd/hub/repo_listing.h"
#include "fetchd/proof/content_hash.h"
#include "fetchd/resolve/resolver.h"
#include "fetchd/verify/cache_verifier.h"
#include "fetchd/xet/chunker.h"
#include "tests/hub/test_hub.h"
#include "tests/support/environment.h"
#include "tests/support/temp_dir.h"

namespace fetchd::verify {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string weights() {
  engine::format::SafetensorsWriter w;
  std::vector<std::byte> data(300000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 % 253);
  w.add("w", engine::format::SafetensorsDType::U8, {data.size()}, data);
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

void flip_byte(const fs::path& file, std::uint64_t at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5a));
}

class VerifyTest : public ::testing::Test {
 protected:
  resolve::Resolution pull() {
    resolve::ResolverOptions options;
    std::map<std::string, std::string> env{{"HF_HUB_CACHE", cache_.path().string()}, {"HF_ENDPOINT", hub_.endpoint()}};
    options.environment = testing_support::map_environment(env);
    resolve::ResolveObserver quiet;
    return resolve::Resolver(options).resolve({"org/model", "", ""}, quiet);
  }

  std::string weights_ = weights();
  testing_support::TestHub hub_;
  testing_support::TempDir cache_;
};

TEST_F(VerifyTest, AFreshCacheProvesItself) {
  hub_.commit("org/model", "main", {{"config.json", "{}", false}, {"model.safetensors", weights_, true}});
  pull();
  const auto reports = verify_cache(cache_.path(), {});
  ASSERT_EQ(reports.size(), 2u);
  for (const auto& r : reports) EXPECT_TRUE(r.ok()) << r.path << ": " << r.problem;
  const auto weights_report = std::find_if(reports.begin(), reports.end(), [](auto& r) {
    return !r.used_by.empty() && r.used_by.front().ends_with("model.safetensors");
  });
  EXPECT_EQ(weights_report->proven_by, "sha256+safetensors-layout");
}

TEST_F(VerifyTest, ACorruptBlobIsFoundAndCanBeRemovedThenFetchedAgain) {
  hub_.commit("org/model", "main", {{"config.json", "{}", false}, {"model.safetensors", weights_, true}});
  const auto first = pull();
  const auto sha = proof::sha256_hex(std::as_bytes(std::span(weights_.data(), weights_.size())));
  const auto blob = cache_.path() / "models--org--model" / "blobs" / sha;
  flip_byte(blob, 1000);

  const auto reports = verify_cache(cache_.path(), {});
  const auto bad = std::find_if(reports.begin(), reports.end(), [](auto& r) { return !r.ok(); });
  ASSERT_NE(bad, reports.end());
  EXPECT_EQ(bad->path, blob);
  EXPECT_THAT(bad->problem, HasSubstr("sha256 is "));
  EXPECT_THAT(bad->problem, HasSubstr("expected " + sha));
  EXPECT_TRUE(fs::exists(blob));  // reported only

  VerifyOptions remove;
  remove.remove_failures = true;
  remove.repo_id = "org/model";
  const auto removed = verify_cache(cache_.path(), remove);
  EXPECT_EQ(std::count_if(removed.begin(), removed.end(), [](auto& r) { return r.removed; }), 1);
  EXPECT_FALSE(fs::exists(blob));
  EXPECT_FALSE(fs::is_symlink(first.local_path / "model.safetensors"));

  hub_.clear_requests();
  const auto again = pull();  // the snapshot is incomplete now: fetched again
  EXPECT_FALSE(again.from_cache);
  EXPECT_TRUE(fs::exists(blob));
  for (const auto& r : verify_cache(cache_.path(), {})) EXPECT_TRUE(r.ok()) << r.problem;
}

TEST_F(VerifyTest, AFileListedByItsXetHashIsProvenByChunking) {
  // A hub that lists the Xet hash where the SHA-256 would be (as OpenWeights does): verify must chunk.
  const std::string commit(40, 'e');
  const auto repo_dir = cache_.path() / "models--org--xet";
  fs::create_directories(repo_dir / "snapshots" / commit);
  fs::create_directories(repo_dir / "blobs");
  const auto content = std::string(500000, 'x') + weights_;
  testing_support::write_file(repo_dir / "blobs" / "tmp", content);
  const auto xet = xet::to_hex(xet::hash_file_by_chunks(repo_dir / "blobs" / "tmp"));
  fs::rename(repo_dir / "blobs" / "tmp", repo_dir / "blobs" / xet);
  fs::create_symlink("../../blobs/" + xet, repo_dir / "snapshots" / commit / "data.bin");
  hub::ListingEntry entry;
  entry.path = "data.bin";
  entry.size = content.size();
  entry.lfs_oid = xet;
  entry.lfs_size = content.size();
  entry.xet_hash = xet;
  cache::RepoCache(cache_.path(), "org/xet").write_listing(commit, hub::listing_to_json({entry}));

  auto reports = verify_cache(cache_.path(), {});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].ok()) << reports[0].problem;
  EXPECT_EQ(reports[0].proven_by, "xet-hash");
  flip_byte(repo_dir / "blobs" / xet, 123456);
  reports = verify_cache(cache_.path(), {});
  EXPECT_THAT(reports[0].problem, HasSubstr("xet-hash is "));
}

}  // namespace
}  // namespace fetchd::verify
