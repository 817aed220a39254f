#pragma once

// A raw HTTP/1.1 client for serverd's tests: it writes exactly the bytes a test gives (malformed requests,
// pipelining, half a header), reads responses with Beast's parser (chunked bodies decoded), reads
// server-sent events one at a time, and bounds every wait so a server bug fails a test instead of hanging it.
// It reaches the server over loopback TCP or a Unix socket, in plain text or TLS.

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

// Where and how a connection reaches the server.
struct ClientOptions {
  std::uint16_t port = 0;  // on 127.0.0.1
  std::string uds{};       // a Unix socket path instead of the port
  bool tls = false;
  std::string ca_file{};           // TLS: verify the server's certificate for 127.0.0.1 against it; empty: no check
  std::string certificate_file{};  // TLS: a client certificate chain and its key (PEM), when given
  std::string key_file{};
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Throws std::runtime_error when connecting or the TLS handshake fails.
  explicit HttpConnection(const ClientOptions& options);
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
  // After wait_closed() over TLS: whether the server ended with close_notify rather than just the TCP close.
  bool closed_with_close_notify() const;
  // Closes this side at once.
  void close();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// One request on a fresh connection.
HttpReply http_request(std::uint16_t port, std::string_view method, std::string_view target, std::string_view body = {},
                       const std::vector<std::string>& headers = {});
HttpReply http_request(const ClientOptions& options, std::string_view method, std::string_view target,
                       std::string_view body = {}, const std::vector<std::string>& headers = {});

}  // namespace serverd_test
