#pragma once

// A small HTTP/1.1 server on Boost.Beast and Asio for serverd: keep-alive, bounded request parsing, idle and
// slow-client timeouts, asynchronous handlers that answer from any thread, chunked streaming responses, and
// client-disconnect detection while a response is pending. Beast stays behind this header (connection.cc,
// server_impl.h).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace serverd::http {

namespace detail {
class ServerImpl;
}

struct Header {
  std::string name;
  std::string value;
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::vector<Header> headers;
  std::string body;

  // The target without its query string.
  std::string_view path() const;
  // The first value of a header, compared case-insensitively; nullopt when absent.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::vector<Header> headers;  // Content-Length, Transfer-Encoding and Connection are the server's
  std::string body;
};

// One request and its response. The handler receives it on an I/O thread and may answer at once or later
// from any thread; every method is thread-safe. Exactly one of respond() or start_stream() ... finish()
// completes the exchange; calls after that, or after the client went away, do nothing.
class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const Request& request() const = 0;

  virtual void respond(Response response) = 0;

  // Sends the status and headers of a chunked response (head.body is ignored), then each write() as a chunk.
  virtual void start_stream(Response head) = 0;
  virtual void write(std::string data) = 0;
  virtual void finish() = 0;

  // `callback` runs once, on an I/O thread, when the client disconnects, stops reading, or the server gives
  // up on the exchange at the end of a shutdown, before the response is complete. Runs at once if that has
  // already happened.
  virtual void on_abort(std::function<void()> callback) = 0;

  // Runs `task` on one of the server's I/O threads (dropped once the server has stopped).
  virtual void post(std::function<void()> task) = 0;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: the kernel picks (see Server::port())
  std::size_t io_threads = 2;
  std::size_t max_header_bytes = 16 * 1024;                      // request line and headers; more: 431
  std::size_t max_body_bytes = std::size_t{32} << 20;            // more: 413
  std::chrono::milliseconds idle_timeout{5000};                  // keep-alive wait for the next request
  std::chrono::milliseconds header_timeout{10000};               // first byte of a request to the end of its header
  std::chrono::milliseconds body_timeout{30000};                 // the whole body
  std::chrono::milliseconds write_timeout{30000};                // one write to a client that stops reading
  std::size_t max_pending_output_bytes = std::size_t{16} << 20;  // unsent stream data: beyond, the client is dropped
  std::size_t max_connections = 4096;                            // more are closed on accept
  // Builds the server's own error responses (400, 413, 431, 500); the default is plain text.
  std::function<Response(int status, std::string_view message)> error_response;
};

class Server {
 public:
  // Binds and listens (so port() is known at once); throws std::system_error.
  Server(ServerOptions options, Handler handler);
  // shutdown() with no grace period.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;

  // Starts the I/O threads and accepting.
  void start();

  // Stops accepting and closes idle keep-alive connections at once; later responses carry Connection: close.
  // Does not wait. Idempotent.
  void begin_shutdown();

  // begin_shutdown(), then waits up to `grace` for exchanges in flight to complete, aborts those left (their
  // on_abort callbacks run), closes every connection and joins the I/O threads. Call it from a thread of
  // your own, never from a handler. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  // Connections open now and exchanges in flight (for tests and logs).
  std::size_t open_connections() const;
  std::size_t exchanges_in_flight() const;

 private:
  std::shared_ptr<detail::ServerImpl> impl_;
};

// The reason phrase of a status code ("Not Found").
std::string_view reason_phrase(int status);

}  // namespace serverd::http
