#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// A small HTTP/1.1 server for tests: one thread per connection, keep-alive, bounded request parsing, and
// response bodies written in fixed-size chunks so a response can stop at an exact byte (truncation, stall).
// Boost.Beast and Asio stay behind the pimpl so the hub's other files compile quickly.
namespace testing_support::hub {

struct HttpRequest {
  std::string method;
  std::string target;                          // path and query, as sent
  std::map<std::string, std::string> headers;  // lower-case names; a repeated field's values joined by ", "
  std::string body;

  // The value of `lower_case_name`, empty when absent.
  std::string header(const std::string& lower_case_name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Length is the server's to set

  // The body is a slice of a shared buffer, so serving a large file copies nothing.
  std::shared_ptr<const std::string> body;
  std::size_t body_offset = 0;
  std::size_t body_length = 0;

  // Delivery faults, counted in body bytes. Content-Length still announces body_length.
  std::optional<std::uint64_t> close_after;  // send at most this many bytes, then close the connection
  std::optional<std::uint64_t> stall_after;  // send this many, then nothing until the peer leaves or stop()
  std::optional<std::size_t> flip_byte_at;   // invert this byte of the body on the wire

  void add_header(std::string name, std::string value);
  void set_body(std::string text);
  void set_body(std::shared_ptr<const std::string> source, std::size_t offset, std::size_t length);
};

class LoopbackHttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds and listens at once (port 0: the kernel picks), so port() is known before start().
  LoopbackHttpServer(const std::string& address, std::uint16_t port);
  ~LoopbackHttpServer();  // stop()
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  std::uint16_t port() const;

  // Starts accepting; `handler` runs on connection threads, concurrently.
  void start(Handler handler);

  // Stops accepting, closes every connection (waking blocked reads, writes and stalls) and joins every
  // thread. Idempotent.
  void stop();

  // True once no connection is open; false when `timeout` passes first.
  bool wait_for_no_connections(std::chrono::milliseconds timeout) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace testing_support::hub
