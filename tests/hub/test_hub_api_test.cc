// The test hub's API host through real HTTP on loopback: refs, model info at every kind of revision, tree
// listings, resolve of plain and LFS files, and the hub's error codes for what is unknown or gated.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub.h"
#include "tests/hub/test_hub_fixture.h"

namespace testing_support {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

}  // namespace
}  // namespace testing_support
