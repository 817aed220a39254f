#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fetchd/transfer/cancel_token.h"

namespace fetchd::transfer {

// Response headers, looked up case-insensitively.
class HttpHeaders {
 public:
  void add(std::string name, std::string value);
  void clear() { entries_.clear(); }
  std::optional<std::string> get(std::string_view name) const;
  std::vector<std::string> get_all(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds stall_timeout{10'000};  // no byte received for this long ends the transfer
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;
  std::string body;  // collected only when no BodySink is given
};

// Why a transfer ended without a complete response.
enum class TransferFailure {
  None,
  Network,    // connect failed, connection reset, body shorter than announced, ...
  Stalled,    // no byte for stall_timeout
  Cancelled,  // the CancelToken fired
  Refused,    // the BodySink refused the response or a chunk
  TooLarge,   // a collected body passed its limit
};

struct HttpResult {
  HttpResponse response;
  TransferFailure failure = TransferFailure::None;
  std::string error;  // libcurl's words for a Network failure
  std::uint64_t body_bytes = 0;
};

// Streams a body. on_headers runs once, after the status and headers arrive and before the first body
// byte; returning false ends the transfer (Refused) before anything is consumed.
struct BodySink {
  std::function<bool(const HttpResponse&)> on_headers;
  std::function<bool(std::span<const std::byte>)> on_data;
};

// One libcurl handle (connections are kept alive between requests). Performs exactly one request: no
// redirect is followed, so callers decide, hop by hop, where credentials may go. Not thread-safe; use
// one client per thread.
class HttpClient {
 public:
  explicit HttpClient(const CancelToken* cancel = nullptr);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult perform(const HttpRequest& request, const BodySink* sink = nullptr,
                     std::size_t max_collected_body = 64u << 20);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The target of the Link header entry with rel="`rel`" (RFC 8288), if any: `<url>; rel="next"`.
std::optional<std::string> find_link(const HttpHeaders& headers, std::string_view rel);

// True when this libcurl can speak TLS (it was built with an SSL backend).
bool curl_supports_https();

// RFC 3986 reference resolution: `location` (absolute, scheme-relative, absolute-path or relative)
// against `base`. The reference's own query is kept; any userinfo (user:password@) is dropped, so that no
// redirect or link can carry credentials to another host.
std::string resolve_url(std::string_view base, std::string_view location);

// True when the URL holds userinfo (a user name, password or login options before the host).
bool has_userinfo(std::string_view url);

// "scheme://host:port" of a URL, with the default port made explicit, lower-cased: two URLs may share
// credentials only when their origins are equal.
std::string url_origin(std::string_view url);

}  // namespace fetchd::transfer
