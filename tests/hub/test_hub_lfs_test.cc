// The test hub's LFS host, the second origin that resolve redirects LFS files to: ranges, and signed URLs
// that need no authorization.

#include <gtest/gtest.h>

#include <string>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub_fixture.h"

namespace testing_support {
namespace {

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

}  // namespace
}  // namespace testing_support
