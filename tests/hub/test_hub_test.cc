// The test hub through real HTTP on loopback, with libcurl as the client: every endpoint, every error and
// every fault switch, asserting status codes, headers, bodies and the request log.

#include "tests/hub/test_hub.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace testing_support {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// Ids computed by git and sha256sum, not by the hub's code: `printf 'hello\n' | git hash-object --stdin`, and
// the git-lfs pointer of that content hashed the same way.
constexpr const char* kHello = "hello\n";
constexpr const char* kHelloGitOid = "ce013625030ba8dba906f756967f9e9ca394464a";
constexpr const char* kHelloSha256 = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
constexpr const char* kHelloPointerOid = "fa61e1ef71c9908c0926776a4aa3504b3a27f159";
constexpr int kHelloPointerSize = 126;

std::vector<std::string> string_members(const rapidjson::Value& array, const char* member) {
  std::vector<std::string> values;
  for (const auto& element : array.GetArray()) values.emplace_back(element[member].GetString());
  return values;
}

bool is_40_hex(const std::string& text) {
  return text.size() == 40 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A deterministic, non-repeating body of `size` bytes.
std::string pattern_bytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return bytes;
}

// The URL a hub redirect points at, absolute even when Location is relative.
std::string follow(const TestHub& hub, const std::string& location) {
  return location.starts_with("/") ? hub.endpoint() + location : location;
}

// ---- Fixture: one hub with one ordinary repository ----------------------------------------------------

class TestHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    main_commit_ = hub_.commit("org/model", "main",
                               {{"config.json", kHello, false},
                                {"model.safetensors", kHello, true},
                                {"original/consolidated.bin", "weights!", true},
                                {"original/params.json", "{}", false}});
  }

  std::string api(const std::string& path) const { return hub_.endpoint() + path; }

  TestHub hub_;
  std::string main_commit_;
};

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

// ---- API host -----------------------------------------------------------------------------------------

TEST_F(TestHubTest, RefsListBranchesTagsAndOnRequestPullRequests) {
  const std::string dev = hub_.commit("org/model", "dev", {{"config.json", "dev", false}});
  const std::string pr = hub_.commit("org/model", "refs/pr/1", {{"config.json", "pr", false}});
  hub_.tag("org/model", "v1", main_commit_);

  const HttpResult result = http_get(api("/api/models/org/model/refs"));
  ASSERT_EQ(result.status, 200);
  EXPECT_THAT(result.header("content-type"), StartsWith("application/json"));
  EXPECT_EQ(result.body, R"({"branches":[{"name":"dev","ref":"refs/heads/dev","targetCommit":")" + dev +
                             R"("},{"name":"main","ref":"refs/heads/main","targetCommit":")" + main_commit_ +
                             R"("}],"tags":[{"name":"v1","ref":"refs/tags/v1","targetCommit":")" + main_commit_ +
                             R"("}],"converts":[]})");

  const rapidjson::Document with_prs = parse_json(http_get(api("/api/models/org/model/refs?include_prs=1")).body);
  ASSERT_TRUE(with_prs.HasMember("pullRequests"));
  EXPECT_EQ(std::string(with_prs["pullRequests"][0]["ref"].GetString()), "refs/pr/1");
  EXPECT_EQ(std::string(with_prs["pullRequests"][0]["targetCommit"].GetString()), pr);
}

TEST_F(TestHubTest, ModelInfoAtMainAndAtEveryKindOfRevision) {
  const std::string dev = hub_.commit("org/model", "dev", {{"only-on-dev.txt", "d", false}});
  const std::string pr = hub_.commit("org/model", "refs/pr/1", {{"pr.txt", "p", false}});
  hub_.tag("org/model", "v1.0", dev);

  const HttpResult main_info = http_get(api("/api/models/org/model"));
  ASSERT_EQ(main_info.status, 200);
  const rapidjson::Document info = parse_json(main_info.body);
  EXPECT_EQ(std::string(info["id"].GetString()), "org/model");
  EXPECT_EQ(std::string(info["sha"].GetString()), main_commit_);
  EXPECT_THAT(string_members(info["siblings"], "rfilename"),
              ElementsAre("config.json", "model.safetensors", "original/consolidated.bin", "original/params.json"));
  EXPECT_FALSE(info["siblings"][0].HasMember("size"));

  const auto sha_at = [&](const std::string& revision) {
    const HttpResult result = http_get(api("/api/models/org/model/revision/" + revision));
    EXPECT_EQ(result.status, 200) << revision;
    return std::string(parse_json(result.body)["sha"].GetString());
  };
  EXPECT_EQ(sha_at("main"), main_commit_);
  EXPECT_EQ(sha_at("dev"), dev);
  EXPECT_EQ(sha_at("v1.0"), dev);
  EXPECT_EQ(sha_at(main_commit_), main_commit_);
  EXPECT_EQ(sha_at("refs%2Fpr%2F1"), pr);
  EXPECT_EQ(sha_at("refs/pr/1"), pr);

  const rapidjson::Document dev_info = parse_json(http_get(api("/api/models/org/model/revision/dev")).body);
  EXPECT_THAT(string_members(dev_info["siblings"], "rfilename"), ElementsAre("only-on-dev.txt"));
}

TEST_F(TestHubTest, ModelInfoWithBlobsCarriesSizesAndLfsIds) {
  const rapidjson::Document info = parse_json(http_get(api("/api/models/org/model/revision/main?blobs=true")).body);
  const rapidjson::Value& config = info["siblings"][0];
  EXPECT_EQ(config["size"].GetUint64(), 6u);
  EXPECT_EQ(std::string(config["blobId"].GetString()), kHelloGitOid);
  EXPECT_FALSE(config.HasMember("lfs"));
  const rapidjson::Value& weights = info["siblings"][1];
  EXPECT_EQ(std::string(weights["blobId"].GetString()), kHelloPointerOid);
  EXPECT_EQ(std::string(weights["lfs"]["sha256"].GetString()), kHelloSha256);
  EXPECT_EQ(weights["lfs"]["pointerSize"].GetInt(), kHelloPointerSize);
}

TEST_F(TestHubTest, RecursiveTreeListsFilesDirectoriesAndLfsObjects) {
  const HttpResult result = http_get(api("/api/models/org/model/tree/main?recursive=true"));
  ASSERT_EQ(result.status, 200);
  EXPECT_FALSE(result.has_header("link"));
  const rapidjson::Document listing = parse_json(result.body);
  ASSERT_TRUE(listing.IsArray());
  EXPECT_THAT(string_members(listing, "path"), ElementsAre("config.json", "model.safetensors", "original",
                                                           "original/consolidated.bin", "original/params.json"));
  EXPECT_THAT(string_members(listing, "type"), ElementsAre("file", "file", "directory", "file", "file"));

  const rapidjson::Value& plain = listing[0];
  EXPECT_EQ(std::string(plain["oid"].GetString()), kHelloGitOid);
  EXPECT_EQ(plain["size"].GetUint64(), 6u);
  EXPECT_FALSE(plain.HasMember("lfs"));

  const rapidjson::Value& lfs = listing[1];
  EXPECT_EQ(std::string(lfs["oid"].GetString()), kHelloPointerOid);
  EXPECT_EQ(lfs["size"].GetUint64(), 6u);
  EXPECT_EQ(std::string(lfs["lfs"]["oid"].GetString()), kHelloSha256);
  EXPECT_EQ(lfs["lfs"]["size"].GetUint64(), 6u);
  EXPECT_EQ(lfs["lfs"]["pointerSize"].GetInt(), kHelloPointerSize);

  EXPECT_TRUE(is_40_hex(listing[2]["oid"].GetString()));
  EXPECT_EQ(std::string(listing[3]["lfs"]["oid"].GetString()),
            "fa47a1dc2eaad8414f129b768e1bc3ab746de3ee7d73d82c9356a9ca2ad772f4");  // sha256sum of "weights!"
}

TEST_F(TestHubTest, TreeWithoutRecursionAndUnderASubpath) {
  const rapidjson::Document top = parse_json(http_get(api("/api/models/org/model/tree/main")).body);
  EXPECT_THAT(string_members(top, "path"), ElementsAre("config.json", "model.safetensors", "original"));

  const HttpResult sub = http_get(api("/api/models/org/model/tree/main/original?recursive=true"));
  ASSERT_EQ(sub.status, 200);
  EXPECT_THAT(string_members(parse_json(sub.body), "path"),
              ElementsAre("original/consolidated.bin", "original/params.json"));

  const HttpResult missing = http_get(api("/api/models/org/model/tree/main/nowhere"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("x-error-code"), "EntryNotFound");
}

// ---- Resolve ------------------------------------------------------------------------------------------

TEST_F(TestHubTest, ResolvePlainFileAnswersBodyCommitAndGitEtag) {
  const HttpResult result = http_get(api("/org/model/resolve/main/config.json"));
  ASSERT_EQ(result.status, 200);
  EXPECT_EQ(result.body, kHello);
  EXPECT_EQ(result.header("x-repo-commit"), main_commit_);
  EXPECT_EQ(result.header("etag"), std::string("\"") + kHelloGitOid + "\"");
  EXPECT_EQ(result.header("content-length"), "6");
  EXPECT_EQ(result.header("accept-ranges"), "bytes");

  const HttpResult head = http_head(api("/org/model/resolve/main/config.json"));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(head.header("content-length"), "6");
  EXPECT_EQ(head.header("etag"), result.header("etag"));
  EXPECT_EQ(head.header("x-repo-commit"), main_commit_);
}

TEST_F(TestHubTest, ResolvePlainFileHonoursRanges) {
  const HttpResult open_ended = http_get_with(api("/org/model/resolve/main/config.json"), {"Range: bytes=2-"});
  EXPECT_EQ(open_ended.status, 206);
  EXPECT_EQ(open_ended.body, "llo\n");
  EXPECT_EQ(open_ended.header("content-range"), "bytes 2-5/6");
  EXPECT_EQ(open_ended.header("content-length"), "4");

  const HttpResult closed = http_get_with(api("/org/model/resolve/main/config.json"), {"Range: bytes=1-3"});
  EXPECT_EQ(closed.status, 206);
  EXPECT_EQ(closed.body, "ell");
  EXPECT_EQ(closed.header("content-range"), "bytes 1-3/6");

  const HttpResult past_end = http_get_with(api("/org/model/resolve/main/config.json"), {"Range: bytes=6-"});
  EXPECT_EQ(past_end.status, 416);
  EXPECT_EQ(past_end.header("content-range"), "bytes */6");
}

TEST_F(TestHubTest, ResolveLfsFileRedirectsToTheLfsHost) {
  const HttpResult redirect = http_get(api("/org/model/resolve/main/model.safetensors"));
  ASSERT_EQ(redirect.status, 302);
  const std::string location = redirect.header("location");
  EXPECT_THAT(location, StartsWith(hub_.lfs_endpoint() + "/lfs/objects/" + kHelloSha256 + "?sig="));
  EXPECT_EQ(redirect.header("x-linked-size"), "6");
  EXPECT_EQ(redirect.header("x-linked-etag"), std::string("\"") + kHelloSha256 + "\"");
  EXPECT_EQ(redirect.header("etag"), std::string("\"") + kHelloPointerOid + "\"");
  EXPECT_EQ(redirect.header("x-repo-commit"), main_commit_);
  // The redirect's own body is not the file: its Content-Length differs from X-Linked-Size.
  EXPECT_EQ(redirect.header("content-length"), std::to_string(redirect.body.size()));
  EXPECT_NE(redirect.header("content-length"), "6");

  const HttpResult head = http_head(api("/org/model/resolve/main/model.safetensors"));
  EXPECT_EQ(head.status, 302);
  EXPECT_EQ(head.header("location"), location);
  EXPECT_EQ(head.header("x-linked-size"), "6");

  EXPECT_NE(hub_.lfs_endpoint(), hub_.endpoint());
  EXPECT_THAT(hub_.lfs_endpoint(), StartsWith("http://localhost:"));
  const HttpResult object = http_get(location);
  EXPECT_EQ(object.status, 200);
  EXPECT_EQ(object.body, kHello);
  EXPECT_EQ(object.header("etag"), std::string("\"") + kHelloSha256 + "\"");
  const std::vector<HubRequest> log = hub_.requests();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().server, "lfs");
  EXPECT_EQ(log.back().host, hub_.lfs_endpoint().substr(std::string("http://").size()));
}

TEST_F(TestHubTest, ResolveByTagCommitEncodedBranchAndSubdirectory) {
  const std::string pr = hub_.commit("org/model", "refs/pr/1", {{"config.json", "from the pr", false}});
  hub_.tag("org/model", "v1", main_commit_);
  EXPECT_EQ(http_get(api("/org/model/resolve/v1/config.json")).body, kHello);
  EXPECT_EQ(http_get(api("/org/model/resolve/" + main_commit_ + "/config.json")).body, kHello);
  const HttpResult from_pr = http_get(api("/org/model/resolve/refs%2Fpr%2F1/config.json"));
  EXPECT_EQ(from_pr.body, "from the pr");
  EXPECT_EQ(from_pr.header("x-repo-commit"), pr);
  EXPECT_EQ(http_get(api("/org/model/resolve/main/original/params.json")).body, "{}");
  const HttpResult nested_lfs = http_get(api("/org/model/resolve/main/original/consolidated.bin"));
  EXPECT_EQ(nested_lfs.status, 302);
  EXPECT_EQ(http_get(nested_lfs.header("location")).body, "weights!");
}

// ---- LFS host -----------------------------------------------------------------------------------------

TEST_F(TestHubTest, LfsHostServesRangesAndRefusesPastTheEnd) {
  const std::string location = http_get(api("/org/model/resolve/main/model.safetensors")).header("location");
  const HttpResult head = http_head(location);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "6");

  const HttpResult open_ended = http_get_with(location, {"Range: bytes=4-"});
  EXPECT_EQ(open_ended.status, 206);
  EXPECT_EQ(open_ended.body, "o\n");
  EXPECT_EQ(open_ended.header("content-range"), "bytes 4-5/6");

  const HttpResult closed = http_get_with(location, {"Range: bytes=0-1"});
  EXPECT_EQ(closed.status, 206);
  EXPECT_EQ(closed.body, "he");

  const HttpResult past_end = http_get_with(location, {"Range: bytes=6-"});
  EXPECT_EQ(past_end.status, 416);
  EXPECT_EQ(past_end.header("content-range"), "bytes */6");
}

TEST_F(TestHubTest, LfsHostNeedsTheSignatureButNoAuthorization) {
  hub_.set_token("secret");
  hub_.set_gated("org/model", true);
  const std::string location =
      http_get_with(api("/org/model/resolve/main/model.safetensors"), {"Authorization: Bearer secret"})
          .header("location");
  ASSERT_FALSE(location.empty());
  EXPECT_EQ(http_get(location).status, 200);  // gated repository, no token: the signed URL is enough

  const std::string unsigned_url = location.substr(0, location.find('?'));
  EXPECT_EQ(http_get(unsigned_url).status, 403);
  EXPECT_EQ(http_get(unsigned_url + "?sig=forged").status, 403);
  EXPECT_EQ(http_get(hub_.lfs_endpoint() + "/api/models/org/model").status, 404);  // not an API host
}

// ---- Errors -------------------------------------------------------------------------------------------

TEST_F(TestHubTest, UnknownRepositoryRevisionAndEntryCarryHubErrorCodes) {
  hub_.commit("org/model", "dev", {{"config.json", "x", false}});
  hub_.tag("org/model", "v2", main_commit_);

  for (const std::string path :
       {"/api/models/org/absent", "/api/models/org/absent/refs", "/org/absent/resolve/main/x"}) {
    const HttpResult result = http_get(api(path));
    EXPECT_EQ(result.status, 404) << path;
    EXPECT_EQ(result.header("x-error-code"), "RepoNotFound") << path;
    EXPECT_THAT(result.header("x-error-message"), HasSubstr("org/absent")) << path;
    EXPECT_THAT(parse_json(result.body)["error"].GetString(), HasSubstr("org/absent")) << path;
  }

  for (const std::string path : {"/api/models/org/model/revision/nope", "/api/models/org/model/tree/nope",
                                 "/org/model/resolve/nope/config.json"}) {
    const HttpResult result = http_get(api(path));
    EXPECT_EQ(result.status, 404) << path;
    EXPECT_EQ(result.header("x-error-code"), "RevisionNotFound") << path;
    const std::string message = result.header("x-error-message");
    EXPECT_THAT(message, HasSubstr("nope"));
    EXPECT_THAT(message, HasSubstr("main"));
    EXPECT_THAT(message, HasSubstr("dev"));
    EXPECT_THAT(message, HasSubstr("v2"));
  }

  const HttpResult entry = http_get(api("/org/model/resolve/main/absent.json"));
  EXPECT_EQ(entry.status, 404);
  EXPECT_EQ(entry.header("x-error-code"), "EntryNotFound");
  EXPECT_EQ(http_head(api("/org/model/resolve/main/original")).status, 404);  // a directory is no file
}

TEST_F(TestHubTest, GatedRepositoryNeedsTheToken) {
  hub_.set_token("right-token");
  hub_.set_gated("org/model", true);
  for (const std::string path : {"/api/models/org/model", "/api/models/org/model/refs",
                                 "/api/models/org/model/tree/main", "/org/model/resolve/main/config.json"}) {
    const HttpResult anonymous = http_get(api(path));
    EXPECT_EQ(anonymous.status, 401) << path;
    EXPECT_EQ(anonymous.header("x-error-code"), "GatedRepo") << path;
    const HttpResult wrong = http_get_with(api(path), {"Authorization: Bearer wrong-token"});
    EXPECT_EQ(wrong.status, 403) << path;
    EXPECT_EQ(wrong.header("x-error-code"), "GatedRepo") << path;
    EXPECT_EQ(http_get_with(api(path), {"Authorization: Bearer right-token"}).status, 200) << path;
  }
  hub_.set_gated("org/model", false);
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 200);
}

// ---- Fault switches -----------------------------------------------------------------------------------

TEST_F(TestHubTest, IgnoreRangeAnswersTheWholeBody) {
  hub_.faults().set_ignore_range(true);
  const HttpResult plain = http_get_with(api("/org/model/resolve/main/config.json"), {"Range: bytes=2-"});
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.body, kHello);
  EXPECT_FALSE(plain.has_header("content-range"));
  const std::string location = http_get(api("/org/model/resolve/main/model.safetensors")).header("location");
  const HttpResult lfs = http_get_with(location, {"Range: bytes=2-"});
  EXPECT_EQ(lfs.status, 200);
  EXPECT_EQ(lfs.body, kHello);
  hub_.faults().set_ignore_range(false);
  EXPECT_EQ(http_get_with(location, {"Range: bytes=2-"}).status, 206);
}

TEST_F(TestHubTest, TruncateAtAnnouncesTheFullLengthAndClosesEarly) {
  const std::string content = pattern_bytes(300 * 1024);
  hub_.commit("org/big", "main", {{"big.safetensors", content, true}, {"big.txt", content, false}});
  hub_.faults().set_truncate_at(100000);
  const std::string location = http_get(api("/org/big/resolve/main/big.safetensors")).header("location");
  for (const std::string& url : {location, api("/org/big/resolve/main/big.txt")}) {
    const HttpResult result = http_get(url);
    EXPECT_EQ(result.code, CURLE_PARTIAL_FILE) << url;
    EXPECT_EQ(result.header("content-length"), std::to_string(content.size()));
    EXPECT_EQ(result.body, content.substr(0, 100000));
  }
  // Ranged requests are cut at the same number of body bytes.
  const HttpResult ranged = http_get_with(location, {"Range: bytes=1000-"});
  EXPECT_EQ(ranged.code, CURLE_PARTIAL_FILE);
  EXPECT_EQ(ranged.body, content.substr(1000, 100000));
  hub_.faults().set_truncate_at(std::nullopt);
  EXPECT_EQ(http_get(location).body, content);
}

TEST_F(TestHubTest, StallAtSendsThatManyBytesThenWaitsForTheClientToLeave) {
  const std::string content = pattern_bytes(300 * 1024);
  hub_.commit("org/big", "main", {{"big.safetensors", content, true}});
  hub_.faults().set_stall_at(70000);  // not a multiple of the hub's write size
  const std::string location = http_get(api("/org/big/resolve/main/big.safetensors")).header("location");
  RequestOptions options;
  options.timeout_ms = 1500;  // a stall is, by definition, observed as time without bytes
  const HttpResult result = http_get(location, options);
  EXPECT_EQ(result.code, CURLE_OPERATION_TIMEDOUT);
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.body, content.substr(0, 70000));
  // The client hung up; the hub notices and lets go of the connection.
  EXPECT_TRUE(hub_.wait_for_no_connections(10s));
}

TEST(TestHubShutdown, DestructorEndsAStalledDownloadPromptly) {
  const std::string content = pattern_bytes(256 * 1024);
  auto hub = std::make_unique<TestHub>();
  hub->commit("org/big", "main", {{"big.bin", content, false}});
  hub->faults().set_stall_at(1000);
  const std::string url = hub->endpoint() + "/org/big/resolve/main/big.bin";

  std::promise<void> stalled;
  std::atomic<bool> signalled = false;
  HttpResult result;
  std::thread client([&] {
    RequestOptions options;
    options.on_body = [&](std::size_t received) {
      if (received >= 1000 && !signalled.exchange(true)) stalled.set_value();
      return true;
    };
    result = http_get(url, options);
  });
  // Whatever happens, the hub goes and the client thread is joined: the hub's destructor is what frees it.
  EXPECT_EQ(stalled.get_future().wait_for(15s), std::future_status::ready);
  const auto started = std::chrono::steady_clock::now();
  hub.reset();  // must close the stalled connection and join its thread, not wait for the client
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  client.join();
  EXPECT_EQ(result.code, CURLE_PARTIAL_FILE);
  EXPECT_EQ(result.body.size(), 1000u);
}

TEST_F(TestHubTest, FailNextInjectsStatusesThenServesNormally) {
  hub_.faults().fail_next("config.json", 2, 429, {{"Retry-After", "1"}});
  hub_.faults().fail_next("/refs", 1, 503);
  const HttpResult first = http_get(api("/org/model/resolve/main/config.json"));
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.header("retry-after"), "1");
  EXPECT_EQ(http_get(api("/org/model/resolve/main/original/params.json")).status, 200);  // does not match
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 429);
  const HttpResult third = http_get(api("/org/model/resolve/main/config.json"));
  EXPECT_EQ(third.status, 200);
  EXPECT_EQ(third.body, kHello);
  EXPECT_FALSE(third.has_header("retry-after"));
  EXPECT_EQ(http_get(api("/api/models/org/model/refs")).status, 503);
  EXPECT_EQ(http_get(api("/api/models/org/model/refs")).status, 200);

  // Applies on the LFS host too.
  const std::string location = http_get(api("/org/model/resolve/main/model.safetensors")).header("location");
  hub_.faults().fail_next("/lfs/objects/", 1, 408);
  EXPECT_EQ(http_get(location).status, 408);
  EXPECT_EQ(http_get(location).status, 200);

  std::vector<int> statuses;
  for (const HubRequest& request : hub_.requests()) statuses.push_back(request.status);
  EXPECT_THAT(statuses, ElementsAre(429, 200, 429, 200, 503, 200, 302, 408, 200));
}

TEST_F(TestHubTest, OverrideTreeAnswersTheGivenListingVerbatim) {
  const std::string bad_listing =
      R"([{"type":"file","oid":")" + std::string(40, 'a') + R"(","size":4096,"path":"a.bin"}])";
  hub_.commit("org/other", "main", {{"x.txt", "x", false}});
  hub_.faults().override_tree("org/model", bad_listing);
  const HttpResult overridden = http_get(api("/api/models/org/model/tree/main?recursive=true"));
  EXPECT_EQ(overridden.status, 200);
  EXPECT_EQ(overridden.body, bad_listing);
  EXPECT_EQ(http_get(api("/api/models/org/model/tree/any-revision")).body, bad_listing);
  EXPECT_THAT(http_get(api("/api/models/org/other/tree/main")).body, HasSubstr("x.txt"));
  hub_.faults().clear_tree_override("org/model");
  EXPECT_THAT(http_get(api("/api/models/org/model/tree/main")).body, HasSubstr("config.json"));
}

TEST_F(TestHubTest, RedirectApiSendsEveryApiCallToItself) {
  hub_.faults().set_redirect_api(true);
  for (const std::string path :
       {"/api/models/org/model", "/api/models/org/model/refs", "/api/models/org/model/tree/main?recursive=true"}) {
    const HttpResult result = http_get(api(path));
    EXPECT_EQ(result.status, 302) << path;
    EXPECT_EQ(result.header("location"), path);
  }
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 200);  // not an /api/ call
}

TEST_F(TestHubTest, RelativeLfsRedirectIsServedByTheApiHost) {
  hub_.faults().set_relative_lfs_redirect(true);
  const HttpResult redirect = http_get(api("/org/model/resolve/main/model.safetensors"));
  ASSERT_EQ(redirect.status, 302);
  const std::string location = redirect.header("location");
  EXPECT_THAT(location, StartsWith(std::string("/lfs/objects/") + kHelloSha256 + "?sig="));
  hub_.clear_requests();
  const HttpResult object = http_get_with(follow(hub_, location), {"Range: bytes=1-"});
  EXPECT_EQ(object.status, 206);
  EXPECT_EQ(object.body, "ello\n");
  const std::vector<HubRequest> log = hub_.requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].server, "api");
  EXPECT_EQ(log[0].target, location);
}

TEST_F(TestHubTest, TreePagesFollowLinkHeadersAndStayOnOneCommit) {
  hub_.faults().set_tree_page_size(2);
  std::vector<std::string> paths;
  std::vector<std::size_t> page_sizes;
  std::string url = api("/api/models/org/model/tree/main?recursive=true");
  bool moved_branch = false;
  while (!url.empty()) {
    const HttpResult page = http_get(url);
    ASSERT_EQ(page.status, 200) << url;
    const rapidjson::Document entries = parse_json(page.body);
    page_sizes.push_back(entries.Size());
    for (const std::string& path : string_members(entries, "path")) paths.push_back(path);
    url.clear();
    if (const std::string link = page.header("link"); !link.empty()) {
      EXPECT_THAT(link, StartsWith("<" + hub_.endpoint() + "/api/models/org/model/tree/main?recursive=true&cursor="));
      EXPECT_THAT(link, testing::EndsWith(">; rel=\"next\""));
      url = link.substr(1, link.find('>') - 1);
    }
    // Moving the branch mid-listing must not mix two trees into one listing.
    if (!moved_branch) hub_.commit("org/model", "main", {{"zzz-new.txt", "n", false}});
    moved_branch = true;
  }
  EXPECT_THAT(page_sizes, ElementsAre(2, 2, 1));
  EXPECT_THAT(paths, ElementsAre("config.json", "model.safetensors", "original", "original/consolidated.bin",
                                 "original/params.json"));
  EXPECT_EQ(http_get(api("/api/models/org/model/tree/main?cursor=nonsense")).status, 400);
}

TEST_F(TestHubTest, TreePageSizeDefaultsToAThousandEntries) {
  std::vector<HubFile> files;
  for (int i = 0; i < 1001; ++i) files.push_back({"f" + std::to_string(10000 + i), "x", false});
  hub_.commit("org/many", "main", std::move(files));
  const HttpResult first = http_get(api("/api/models/org/many/tree/main"));
  EXPECT_EQ(parse_json(first.body).Size(), 1000u);
  const std::string link = first.header("link");
  ASSERT_FALSE(link.empty());
  const HttpResult second = http_get(link.substr(1, link.find('>') - 1));
  EXPECT_EQ(parse_json(second.body).Size(), 1u);
  EXPECT_FALSE(second.has_header("link"));
}

TEST_F(TestHubTest, CorruptLfsFlipsOneByteOfLfsDownloadsOnly) {
  const std::string content = pattern_bytes(200 * 1024);
  hub_.commit("org/big", "main", {{"big.safetensors", content, true}, {"big.txt", content, false}});
  const std::string location = http_get(api("/org/big/resolve/main/big.safetensors")).header("location");
  hub_.faults().set_corrupt_lfs(true);
  const auto differing_bytes = [](const std::string& a, const std::string& b) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += a[i] != b[i];
    return count;
  };
  const HttpResult whole = http_get(location);
  EXPECT_EQ(whole.status, 200);
  ASSERT_EQ(whole.body.size(), content.size());
  EXPECT_EQ(differing_bytes(whole.body, content), 1u);
  const HttpResult ranged = http_get_with(location, {"Range: bytes=150000-"});
  ASSERT_EQ(ranged.body.size(), content.size() - 150000);
  EXPECT_EQ(differing_bytes(ranged.body, content.substr(150000)), 1u);
  EXPECT_EQ(http_get(api("/org/big/resolve/main/big.txt")).body, content);  // not an LFS download
  hub_.faults().set_corrupt_lfs(false);
  EXPECT_EQ(http_get(location).body, content);
}

// ---- Server behaviour ---------------------------------------------------------------------------------

TEST_F(TestHubTest, RequestLogRecordsEveryRequestInOrder) {
  hub_.set_token("tok");
  hub_.set_gated("org/model", true);
  http_get_with(api("/org/model/resolve/main/config.json?download=true"),
                {"Authorization: Bearer tok", "Range: bytes=1-"});
  const std::string location =
      http_get_with(api("/org/model/resolve/main/model.safetensors"), {"Authorization: Bearer tok"}).header("location");
  http_head(location);
  const std::vector<HubRequest> log = hub_.requests();
  ASSERT_EQ(log.size(), 3u);
  const std::string api_host = hub_.endpoint().substr(std::string("http://").size());
  EXPECT_EQ(log[0].server, "api");
  EXPECT_EQ(log[0].method, "GET");
  EXPECT_EQ(log[0].target, "/org/model/resolve/main/config.json?download=true");
  EXPECT_EQ(log[0].host, api_host);
  EXPECT_EQ(log[0].range, "bytes=1-");
  EXPECT_EQ(log[0].authorization, "Bearer tok");
  EXPECT_EQ(log[0].status, 206);
  EXPECT_EQ(log[1].status, 302);
  EXPECT_EQ(log[1].range, "");
  EXPECT_EQ(log[2].server, "lfs");
  EXPECT_EQ(log[2].method, "HEAD");
  EXPECT_EQ(log[2].authorization, "");
  EXPECT_EQ(log[2].status, 200);
  hub_.clear_requests();
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(TestHubTest, KeepAliveServesManyRequestsOnOneConnection) {
  CurlClient client;
  EXPECT_EQ(client.request(api("/api/models/org/model/refs")).status, 200);
  EXPECT_EQ(client.connections_opened_by_last_request(), 1);
  EXPECT_EQ(client.request(api("/org/model/resolve/main/config.json")).body, kHello);
  EXPECT_EQ(client.connections_opened_by_last_request(), 0);
  EXPECT_EQ(client.request(api("/org/model/resolve/main/absent")).status, 404);  // errors keep it too
  EXPECT_EQ(client.request(api("/org/model/resolve/main/config.json")).status, 200);
  EXPECT_EQ(client.connections_opened_by_last_request(), 0);
}

TEST_F(TestHubTest, OversizedHeadersAndOtherMethodsAreRefused) {
  const HttpResult huge = http_get_with(api("/api/models/org/model"), {"X-Padding: " + std::string(32 * 1024, 'p')});
  EXPECT_EQ(huge.status, 431);

  RequestOptions delete_request;
  delete_request.method = "DELETE";
  const HttpResult deleted = http_get(api("/api/models/org/model"), delete_request);
  EXPECT_EQ(deleted.code, CURLE_OK);
  EXPECT_EQ(deleted.status, 405);
}

TEST_F(TestHubTest, ConcurrentClientsAreAllServedAndLogged) {
  constexpr int kClients = 8;
  constexpr int kRequestsEach = 10;
  std::atomic<int> served = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      CurlClient client;
      for (int r = 0; r < kRequestsEach; ++r) {
        if (client.request(api("/org/model/resolve/main/config.json")).body == kHello) ++served;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(served, kClients * kRequestsEach);
  EXPECT_EQ(hub_.requests().size(), static_cast<std::size_t>(kClients * kRequestsEach));
}

TEST(TestHubShutdown, DestructorClosesIdleKeepAliveConnections) {
  CurlClient client;  // outlives the hub, holding its connection open
  {
    TestHub hub;
    hub.commit("org/m", "main", {{"a.txt", "a", false}});
    EXPECT_EQ(client.request(hub.endpoint() + "/org/m/resolve/main/a.txt").body, "a");
    EXPECT_FALSE(hub.wait_for_no_connections(0ms));
  }
  SUCCEED();  // reaching here means the destructor did not wait for the client
}

// ---- The test-hub binary ------------------------------------------------------------------------------

// A child process whose stdout this test reads; killed on destruction if still running.
class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& arguments) {
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[1]);
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    const int error = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_ends[1]);
    stdout_fd_ = pipe_ends[0];
    if (error != 0) throw std::runtime_error("posix_spawn failed for " + arguments[0]);
  }

  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(stdout_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line on its stdout; nullopt on end of file or when `timeout` passes.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (const std::size_t newline = pending_.find('\n'); newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      if (!wait_readable(deadline)) return std::nullopt;
      char buffer[4096];
      const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
      if (n <= 0) return std::nullopt;
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }

  // Sends `signal` and waits (bounded) for the exit; the exit status, or -1 when it did not exit in time.
  int stop(int signal, std::chrono::milliseconds timeout) {
    ::kill(pid_, signal);
    // The process closes its stdout when it exits; wait for that end of file, then reap it.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (wait_readable(deadline)) {
      if (::read(stdout_fd_, buffer, sizeof buffer) <= 0) {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

 private:
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd watched{stdout_fd_, POLLIN, 0};
    return ::poll(&watched, 1, static_cast<int>(left.count())) > 0;
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
};

TEST(TestHubBinary, ServesAFolderOfRepositoriesUntilSigterm) {
  TempDir root;
  std::filesystem::create_directories(root / "org" / "model" / "original");
  write_file(root / "org" / "model" / "config.json", std::string_view(kHello));
  write_file(root / "org" / "model" / "model.safetensors", std::string_view("weights!"));
  write_file(root / "org" / "model" / "original" / "params.json", std::string_view("{}"));
  std::filesystem::create_directories(root / "other" / "repo");
  write_file(root / "other" / "repo" / "README.md", std::string_view("# hi"));

  ChildProcess hub({TEST_HUB_BINARY, "--root", root.path().string(), "--token", "tok"});
  const std::optional<std::string> banner = hub.read_line(30s);
  ASSERT_TRUE(banner.has_value());
  const std::string serving = "test-hub: serving ";
  ASSERT_THAT(*banner, StartsWith(serving + "http://127.0.0.1:"));
  const std::string endpoint = banner->substr(serving.size(), banner->find(' ', serving.size()) - serving.size());
  EXPECT_THAT(*banner, HasSubstr("(lfs http://localhost:"));

  EXPECT_EQ(http_get(endpoint + "/api/models/org/model/refs").status, 401);  // --token gates every repository
  const std::vector<std::string> authorized = {"Authorization: Bearer tok"};
  const HttpResult info = http_get_with(endpoint + "/api/models/org/model", authorized);
  ASSERT_EQ(info.status, 200);
  EXPECT_THAT(string_members(parse_json(info.body)["siblings"], "rfilename"),
              ElementsAre("config.json", "model.safetensors", "original/params.json"));
  EXPECT_EQ(http_get_with(endpoint + "/org/model/resolve/main/config.json", authorized).body, kHello);
  const HttpResult redirect = http_get_with(endpoint + "/org/model/resolve/main/model.safetensors", authorized);
  EXPECT_EQ(redirect.status, 302);
  EXPECT_EQ(http_get(redirect.header("location")).body, "weights!");
  EXPECT_EQ(http_get_with(endpoint + "/other/repo/resolve/main/README.md", authorized).body, "# hi");

  EXPECT_EQ(hub.stop(SIGTERM, 15s), 0);
}

TEST(TestHubBinary, ServesLfsFilesAsXetWithTheXetFlag) {
  TempDir root;
  std::filesystem::create_directories(root / "org" / "model");
  const std::string weights = pattern_bytes(300000);
  write_file(root / "org" / "model" / "model.safetensors", std::string_view(weights));

  ChildProcess hub({TEST_HUB_BINARY, "--root", root.path().string(), "--xet"});
  const std::optional<std::string> banner = hub.read_line(30s);
  ASSERT_TRUE(banner.has_value());
  EXPECT_THAT(*banner, HasSubstr(", cas http://127.0.0.1:"));
  EXPECT_THAT(*banner, HasSubstr(", gateway http://localhost:"));
  const std::string serving = "test-hub: serving ";
  const std::string endpoint = banner->substr(serving.size(), banner->find(' ', serving.size()) - serving.size());
  const HttpResult redirect = http_get(endpoint + "/org/model/resolve/main/model.safetensors");
  EXPECT_EQ(redirect.status, 302);
  EXPECT_EQ(redirect.header("x-xet-hash").size(), 64u);
  EXPECT_EQ(redirect.header("location"), endpoint + "/xet/files/" + redirect.header("x-xet-hash"));
  EXPECT_TRUE(http_get(redirect.header("location")).body == weights);
  EXPECT_EQ(hub.stop(SIGTERM, 15s), 0);
}

TEST(TestHubBinary, RefusesAMissingRoot) {
  std::string output;
  EXPECT_EQ(run_command(std::string(TEST_HUB_BINARY) + " --root /nonexistent/test-hub-root", output), 2);
  EXPECT_THAT(output, HasSubstr("usage:"));
}

}  // namespace
}  // namespace testing_support
