// The test hub as a server: its request log, keep-alive, what it refuses, concurrent clients, and a
// destructor that does not wait for idle connections.

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub.h"
#include "tests/hub/test_hub_fixture.h"

namespace testing_support {
namespace {

using namespace std::chrono_literals;

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

}  // namespace
}  // namespace testing_support
