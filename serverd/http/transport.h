#pragma once

// The byte stream under one HTTP connection: a TCP or Unix socket, in plain text or wrapped in TLS. The
// connection's state machine (connection.cc) is written once against this interface, so both transports
// keep every behaviour of it. Internal to serverd/http.

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <algorithm>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <functional>
#include <memory>
#include <string>

namespace serverd::http::detail {

namespace net = boost::asio;
namespace beast = boost::beast;

// A TCP or Unix stream socket (the listener decides which).
using Socket = net::generic::stream_protocol::socket;
using IoHandler = std::function<void(const beast::error_code&, std::size_t)>;

// Every call is made on the connection's strand, and every handler runs there. At most one read and one
// write are outstanding at a time.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual net::any_io_executor executor() = 0;

  // Readies the stream for HTTP: TLS runs its server handshake, plain text is ready at once.
  virtual void handshake(std::function<void(const beast::error_code&)> done) = 0;
  virtual void read_some(net::mutable_buffer buffer, IoHandler handler) = 0;
  // Writes all of `buffer`.
  virtual void write(net::const_buffer buffer, IoHandler handler) = 0;
  // After the last response: tells the client nothing more follows (TLS sends close_notify first) while
  // reads go on, only to be discarded (over TLS they return the raw bytes). `owner` is held until that has
  // been sent, so the transport outlives it.
  virtual void shutdown_send(std::shared_ptr<void> owner) = 0;
  // Ends the stream now; pending operations complete with an error.
  virtual void close() = 0;

  // The client's address for logs ("127.0.0.1:40112", "unix socket").
  virtual std::string peer() = 0;
};

std::unique_ptr<Transport> make_plain_transport(Socket socket);
// `context` must outlive the transport.
std::unique_ptr<Transport> make_tls_transport(Socket socket, net::ssl::context& context);

}  // namespace serverd::http::detail
