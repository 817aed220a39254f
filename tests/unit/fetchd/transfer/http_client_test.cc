#include "fetchd/transfer/http_client.h"

#include <gtest/gtest.h>

#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/retry_policy.h"

namespace fetchd::transfer {
namespace {

TEST(ResolveUrl, FollowsRfc3986) {
  const std::string base = "http://a.test/b/c/d;p?q";
  EXPECT_EQ(resolve_url(base, "g"), "http://a.test/b/c/g");
  EXPECT_EQ(resolve_url(base, "/g?x=1"), "http://a.test/g?x=1");
  EXPECT_EQ(resolve_url(base, "../g"), "http://a.test/b/g");
  EXPECT_EQ(resolve_url(base, "//other.test/g"), "http://other.test/g");
  EXPECT_EQ(resolve_url(base, "https://x.test:8443/lfs/1?sig=abc&exp=2"), "https://x.test:8443/lfs/1?sig=abc&exp=2");
  EXPECT_EQ(resolve_url("http://h:1/repo/resolve/c/model.bin", "/lfs/objects/ab?sig=z"),
            "http://h:1/lfs/objects/ab?sig=z");
}

// No redirect or link target keeps userinfo: libcurl would turn it into Basic credentials for that host.
TEST(ResolveUrl, DropsUserinfo) {
  EXPECT_EQ(resolve_url("http://127.0.0.1:9/x", "http://127.0.0.1:9@other.test/y?q=1"), "http://other.test/y?q=1");
  EXPECT_EQ(resolve_url("http://h.test/x", "https://user:secret@cdn.test:8443/lfs"), "https://cdn.test:8443/lfs");
  EXPECT_EQ(resolve_url("http://user:secret@h.test/a/b", "c"), "http://h.test/a/c");
  EXPECT_FALSE(has_userinfo(resolve_url("http://h.test/", "//u:p@o.test/")));
  EXPECT_TRUE(has_userinfo("http://u@h.test/"));
  EXPECT_TRUE(has_userinfo("http://:p@h.test/"));
  EXPECT_FALSE(has_userinfo("http://h.test/a@b"));  // '@' in the path is not userinfo
}

// And the client itself never sends a URL that carries some, whoever built it (a reconstruction's URLs
// come from the hub).
TEST(HttpClient, RefusesUrlsWithUserinfo) {
  HttpClient client;
  HttpRequest request;
  request.url = "http://user:secret@127.0.0.1:9/x";
  try {
    client.perform(request);
    ADD_FAILURE() << "performed";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

TEST(UrlOrigin, IncludesSchemeHostAndPort) {
  EXPECT_EQ(url_origin("https://huggingface.co/api/models"), "https://huggingface.co:443");
  EXPECT_EQ(url_origin("http://127.0.0.1:8080/x"), "http://127.0.0.1:8080");
  EXPECT_EQ(url_origin("HTTP://Example.TEST/x"), "http://example.test:80");
  EXPECT_NE(url_origin("http://127.0.0.1:8080/"), url_origin("http://localhost:8080/"));
  EXPECT_NE(url_origin("http://127.0.0.1:8080/"), url_origin("http://127.0.0.1:8081/"));
}

HttpResult answer(long status, std::vector<std::pair<std::string, std::string>> headers = {},
                  TransferFailure failure = TransferFailure::None) {
  HttpResult r;
  r.response.status = status;
  for (auto& [k, v] : headers) r.response.headers.add(k, v);
  r.failure = failure;
  return r;
}

TEST(RetryPolicy, RetriesWhatRepeatingCanFix) {
  RetryPolicy p;
  p.initial_backoff = std::chrono::milliseconds(100);
  p.max_backoff = std::chrono::milliseconds(250);
  EXPECT_EQ(retry_delay(answer(503), 1, p), std::chrono::milliseconds(100));
  EXPECT_EQ(retry_delay(answer(500), 2, p), std::chrono::milliseconds(200));
  EXPECT_EQ(retry_delay(answer(502), 4, p), std::chrono::milliseconds(250));
  EXPECT_EQ(retry_delay(answer(408), 1, p), std::chrono::milliseconds(100));
  EXPECT_EQ(retry_delay(answer(0, {}, TransferFailure::Stalled), 1, p), std::chrono::milliseconds(100));
  EXPECT_EQ(retry_delay(answer(0, {}, TransferFailure::Network), 1, p), std::chrono::milliseconds(100));
  EXPECT_EQ(retry_delay(answer(429, {{"Retry-After", "7"}}), 1, p), std::chrono::seconds(7));
  EXPECT_EQ(retry_delay(answer(429, {{"RateLimit", "\"api\";r=0;t=3"}}), 1, p), std::chrono::seconds(3));
}

TEST(RetryPolicy, GivesUpOnFinalAnswers) {
  RetryPolicy p;
  EXPECT_FALSE(retry_delay(answer(200), 1, p));
  EXPECT_FALSE(retry_delay(answer(404), 1, p));
  EXPECT_FALSE(retry_delay(answer(401), 1, p));
  EXPECT_FALSE(retry_delay(answer(0, {}, TransferFailure::Cancelled), 1, p));
  EXPECT_FALSE(retry_delay(answer(503), p.max_attempts, p));
  EXPECT_FALSE(retry_delay(answer(429, {{"Retry-After", "100000"}}), 1, p));
}

}  // namespace
}  // namespace fetchd::transfer
