// The test hub's repositories: commit ids that are deterministic and chain on a branch, the paths and tag
// targets it refuses, and a folder on disk turned into one commit with LFS where the hub would use it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub.h"
#include "tests/hub/test_hub_fixture.h"
#include "tests/support/temp_dir.h"

namespace testing_support {
namespace {

using ::testing::ElementsAre;

// ---- Repositories -------------------------------------------------------------------------------------

TEST(TestHubRepository, CommitIdsAreDeterministicAndChainOnTheBranch) {
  TestHub first;
  TestHub second;
  const std::vector<HubFile> files = {{"a.txt", "a", false}, {"b/c.bin", "c", true}};
  const std::string root = first.commit("org/r", "main", files);
  EXPECT_TRUE(is_40_hex(root));
  EXPECT_EQ(second.commit("org/r", "main", files), root);
  // File order does not matter; the parent does.
  EXPECT_EQ(second.commit("org/other", "main", {files[1], files[0]}), root);
  const std::string child = first.commit("org/r", "main", files);
  EXPECT_NE(child, root);
  EXPECT_TRUE(is_40_hex(child));
  // Plain and LFS storage of the same bytes are different trees.
  EXPECT_NE(first.commit("org/lfs", "main", {{"a.txt", "a", true}, {"b/c.bin", "c", true}}), root);
}

TEST(TestHubRepository, RefusesUnusablePathsAndUnknownTagTargets) {
  TestHub hub;
  EXPECT_THROW(hub.commit("org/r", "main", {{"", "x", false}}), std::invalid_argument);
  EXPECT_THROW(hub.commit("org/r", "main", {{"../x", "x", false}}), std::invalid_argument);
  EXPECT_THROW(hub.commit("org/r", "main", {{"a//b", "x", false}}), std::invalid_argument);
  EXPECT_THROW(hub.commit("org/r", "main", {{"/abs", "x", false}}), std::invalid_argument);
  EXPECT_THROW(hub.commit("org/r", "main", {{"a", "x", false}, {"a", "y", false}}), std::invalid_argument);
  EXPECT_THROW(hub.commit("org/r", "main", {{"a", "x", false}, {"a.txt", "", false}, {"a/b", "y", false}}),
               std::invalid_argument);
  hub.commit("org/r", "main", {{"a", "x", false}});
  EXPECT_THROW(hub.tag("org/r", "v1", std::string(40, 'a')), std::invalid_argument);
  EXPECT_THROW(hub.tag("org/absent", "v1", "main"), std::invalid_argument);
}

TEST(TestHubRepository, FolderBecomesOneCommitOnMainWithLfsForWeightsAndLargeFiles) {
  TempDir folder;
  std::filesystem::create_directories(folder / "original");
  std::filesystem::create_directories(folder / ".git");
  write_file(folder / "config.json", std::string_view("{}"));
  write_file(folder / "tiny.safetensors", std::string_view("x"));
  write_file(folder / "original" / "params.gguf", std::string_view("y"));
  write_file(folder / "pytorch_model.bin", std::string_view("z"));
  write_file(folder / "big.txt", std::string_view(std::string(1024 * 1024, 'b')));
  write_file(folder / "almost.txt", std::string_view(std::string(1024 * 1024 - 1, 'a')));
  write_file(folder / ".git" / "HEAD", std::string_view("ref: refs/heads/main\n"));
  TestHub hub;
  hub.add_repository_from_folder("org/folder", folder.path());

  const HttpResult tree = http_get(hub.endpoint() + "/api/models/org/folder/tree/main?recursive=true");
  ASSERT_EQ(tree.status, 200);
  const rapidjson::Document listing = parse_json(tree.body);
  std::map<std::string, bool> lfs_by_path;
  for (const auto& entry : listing.GetArray()) {
    if (std::string(entry["type"].GetString()) == "file")
      lfs_by_path[entry["path"].GetString()] = entry.HasMember("lfs");
  }
  EXPECT_EQ(lfs_by_path, (std::map<std::string, bool>{{"almost.txt", false},
                                                      {"big.txt", true},
                                                      {"config.json", false},
                                                      {"original/params.gguf", true},
                                                      {"pytorch_model.bin", true},
                                                      {"tiny.safetensors", true}}));
  const rapidjson::Document refs = parse_json(http_get(hub.endpoint() + "/api/models/org/folder/refs").body);
  EXPECT_THAT(string_members(refs["branches"], "name"), ElementsAre("main"));
}

}  // namespace
}  // namespace testing_support
