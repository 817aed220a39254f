#pragma once

// A small HTTP/1.1 server on Boost.Beast and Asio for serverd: keep-alive, bounded request parsing, idle and
// slow-client timeouts, asynchronous handlers that answer from any thread, chunked streaming responses, and
// client-disconnect detection while a response is pending; over TCP or a Unix socket, in plain text or TLS,
// with CORS and a root path as vLLM's server has them. Beast, Asio and OpenSSL stay behind this header
// (connection.cc, transport.cc, server_impl.h).

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

// Options named after the vLLM flags they mirror (`--ssl-keyfile` -> ssl_keyfile) follow vLLM's meaning and
// defaults. A combination that cannot work is refused by name when the Server is constructed.
struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: the kernel picks (see Server::port())
  // A Unix domain socket path to listen on instead of host:port (vLLM's --uds). A stale socket file there is
  // replaced; any other file, or a socket a live server listens on, is refused. Mode 0666 (as uvicorn),
  // removed at shutdown.
  std::string uds;

  // TLS (vLLM's --ssl-*): with ssl_certfile set, every connection is TLS 1.2 or later, else plain HTTP.
  std::string ssl_certfile;  // PEM certificate chain, the server's certificate first
  std::string ssl_keyfile;   // PEM private key (unencrypted); empty: the key is in ssl_certfile
  std::string ssl_ca_certs;  // PEM CA certificates client certificates are verified against
  int ssl_cert_reqs = 0;     // as Python's ssl: 0 CERT_NONE, 1 CERT_OPTIONAL, 2 CERT_REQUIRED

  // CORS as Starlette's CORSMiddleware answers it, with vLLM's defaults. "*" in a list allows everything.
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;

  // The path prefix a proxy in front serves this server under (vLLM's --root-path, e.g. "/api"): a request
  // for "/api/v1/models" reaches the handler as "/v1/models"; "/v1/models" still works. Empty, or begins
  // with '/' and does not end with one.
  std::string root_path;

  bool verbose = false;  // logs connection-level failures (TLS handshakes) to stderr

  std::size_t io_threads = 2;
  std::size_t max_header_bytes = 16 * 1024;                      // request line and headers; more: 431
  std::size_t max_body_bytes = std::size_t{32} << 20;            // more: 413
  std::chrono::milliseconds idle_timeout{5000};                  // keep-alive wait for the next request
  std::chrono::milliseconds header_timeout{10000};               // first byte to end of header; also the TLS handshake
  std::chrono::milliseconds body_timeout{30000};                 // the whole body
  std::chrono::milliseconds write_timeout{30000};                // one write to a client that stops reading
  std::size_t max_pending_output_bytes = std::size_t{16} << 20;  // unsent stream data: beyond, the client is dropped
  std::size_t max_connections = 4096;                            // more are closed on accept
  // Builds the server's own error responses (400, 413, 431, 500); the default is plain text.
  std::function<Response(int status, std::string_view message)> error_response;
};

class Server {
 public:
  // Binds and listens (so port() is known at once). Throws std::invalid_argument for options refused by
  // name, std::runtime_error for a TLS file OpenSSL cannot load or a Unix socket path that is taken, and
  // std::system_error when binding fails.
  Server(ServerOptions options, Handler handler);
  // shutdown() with no grace period.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The TCP port listened on; 0 on a Unix socket.
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
