// The test hub's fault switches through real HTTP on loopback: ignored ranges, truncated and stalled
// bodies, injected statuses, overridden and paged tree listings, redirects of the API and of LFS, and
// corrupted LFS downloads.

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub.h"
#include "tests/hub/test_hub_fixture.h"

namespace testing_support {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// The URL a hub redirect points at, absolute even when Location is relative.
std::string follow(const TestHub& hub, const std::string& location) {
  return location.starts_with("/") ? hub.endpoint() + location : location;
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

TEST_F(TestHubTest, FailAfterServesTheFirstMatchesThenFails) {
  hub_.faults().fail_after("config.json", 2, 1, 500);
  EXPECT_EQ(http_get(api("/api/models/org/model/refs")).status, 200);  // does not match, does not count
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 200);
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 200);
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 500);
  EXPECT_EQ(http_get(api("/org/model/resolve/main/config.json")).status, 200);
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

}  // namespace
}  // namespace testing_support
