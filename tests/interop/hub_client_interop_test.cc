// The cache is shared with the Hugging Face clients: what the @huggingface/hub npm client downloads,
// fetchd serves offline, and what fetchd downloads, the npm client reads from the cache without the hub.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "engine/format/safetensors_writer.h"
#include "fetchd/proof/content_hash.h"
#include "fetchd/resolve/resolver.h"
#include "tests/hub/test_hub.h"
#include "tests/support/environment.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string weights() {
  engine::format::SafetensorsWriter w;
  std::vector<std::byte> data(40000, std::byte{3});
  w.add("w", engine::format::SafetensorsDType::U8, {40000}, data);
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string sha256(const std::string& s) {
  return fetchd::proof::sha256_hex(std::as_bytes(std::span(s.data(), s.size())));
}

class HubClientInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(TEST_NODE_MODULES) / "@huggingface" / "hub"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
    commit_ = hub_.commit("org/model", "main",
                          {{"config.json", R"({"architectures":["LlamaForCausalLM"]})", false},
                           {"tokenizer.json", "{}", false},
                           {"model.safetensors", weights_, true}});
  }

  int node(const std::string& args, std::string& output) {
    return testing_support::run_command(std::string("'") + NODE_EXECUTABLE + "' '" + INTEROP_SCRIPT + "' " + args,
                                        output);
  }

  fetchd::resolve::Resolution fetchd_resolve(bool offline) {
    fetchd::resolve::ResolverOptions options;
    std::map<std::string, std::string> env{{"HF_HUB_CACHE", cache_.path().string()},
                                           {"HF_ENDPOINT", hub_.endpoint()},
                                           {"HF_HUB_OFFLINE", offline ? "1" : ""}};
    options.environment = testing_support::map_environment(env);
    fetchd::resolve::ResolveObserver quiet;
    return fetchd::resolve::Resolver(options).resolve({"org/model", "", ""}, quiet);
  }

  std::string weights_ = weights();
  testing_support::TestHub hub_;
  testing_support::TempDir cache_;
  std::string commit_;
};

TEST_F(HubClientInterop, FetchdServesOfflineWhatTheNpmClientDownloaded) {
  std::string output;
  ASSERT_EQ(node("download '" + hub_.endpoint() + "' '" + cache_.path().string() + "' org/model", output), 0) << output;
  EXPECT_THAT(output, HasSubstr("snapshots/" + commit_));
  hub_.clear_requests();
  const auto r = fetchd_resolve(/*offline=*/true);
  EXPECT_EQ(r.commit, commit_);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(fs::file_size(r.local_path / "model.safetensors"), weights_.size());
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(HubClientInterop, TheNpmClientReadsWhatFetchdDownloadedWithoutTheHub) {
  fetchd_resolve(/*offline=*/false);
  hub_.clear_requests();
  std::string output;
  ASSERT_EQ(node("read '" + hub_.endpoint() + "' '" + cache_.path().string() + "' org/model " + commit_, output), 0)
      << output;
  EXPECT_THAT(output, HasSubstr("refs main"));
  EXPECT_THAT(output, HasSubstr("model.safetensors " + sha256(weights_)));
  EXPECT_THAT(output, HasSubstr("config.json " + sha256(R"({"architectures":["LlamaForCausalLM"]})")));
  EXPECT_TRUE(hub_.requests().empty());
}

}  // namespace
