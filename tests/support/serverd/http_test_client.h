#pragma once

// A raw HTTP/1.1 client for serverd's tests: it writes exactly the bytes a test gives (malformed requests,
// pipelining, half a header), reads responses with Beast's parser (chunked bodies decoded), reads
// server-sent events one at a time, and bounds every wait so a server bug fails a test instead of hanging it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace serverd_test {

struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  std::string body;

  // The first value of a header (lower-case name); empty when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  void send(std::string_view raw);
  // An HTTP/1.1 request with Host and Content-Length; `headers` are "Name: value" lines.
  void send_request(std::string_view method, std::string_view target, std::string_view body = {},
                    const std::vector<std::string>& headers = {});

  HttpReply read_response();
  // The status and headers only; the body then comes through next_event().
  HttpReply read_response_header();
  // The next server-sent event's data (without "data: "); nullopt once the body has ended.
  std::optional<std::string> next_event();

  // True when the server closes the connection within the timeout (anything it still sends is discarded).
  bool wait_closed();
  // Closes this side at once.
  void close();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// One request on a fresh connection.
HttpReply http_request(std::uint16_t port, std::string_view method, std::string_view target, std::string_view body = {},
                       const std::vector<std::string>& headers = {});

}  // namespace serverd_test
