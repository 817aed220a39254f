#include "serverd/http/transport.h"

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstring>

#include "serverd/http/listener.h"

namespace serverd::http::detail {

namespace {

// What both transports do the same way; `Stream` is the socket itself or a TLS stream over it.
template <typename Stream>
class StreamTransport : public Transport {
 public:
  template <typename... Args>
  explicit StreamTransport(Args&&... args) : stream_(std::forward<Args>(args)...) {}

  net::any_io_executor executor() override { return stream_.get_executor(); }

  void read_some(net::mutable_buffer buffer, IoHandler handler) override {
    stream_.async_read_some(buffer, std::move(handler));
  }

  void write(net::const_buffer buffer, IoHandler handler) override {
    net::async_write(stream_, buffer, std::move(handler));
  }

  void close() override {
    beast::error_code ignored;
    socket().shutdown(Socket::shutdown_both, ignored);
    socket().close(ignored);
  }

  std::string peer() override {
    beast::error_code ec;
    const auto endpoint = socket().remote_endpoint(ec);
    if (ec) return "a client that has gone";
    if (const auto tcp = tcp_endpoint(endpoint)) {
      return tcp->address().to_string() + ":" + std::to_string(tcp->port());
    }
    return "unix socket";
  }

 protected:
  Socket& socket() { return beast::get_lowest_layer(stream_); }

  // SSE chunks are small and latency matters; a Unix socket has no Nagle to turn off.
  void no_delay() {
    beast::error_code ignored;
    if (tcp_endpoint(socket().local_endpoint(ignored))) {
      socket().set_option(net::ip::tcp::no_delay(true), ignored);
    }
  }

  Stream stream_;
};

class PlainTransport final : public StreamTransport<Socket> {
 public:
  explicit PlainTransport(Socket socket) : StreamTransport(std::move(socket)) {}

  void handshake(std::function<void(const beast::error_code&)> done) override {
    no_delay();
    done({});
  }

  void shutdown_send(std::shared_ptr<void>) override {
    beast::error_code ignored;
    socket().shutdown(Socket::shutdown_send, ignored);
  }
};

class TlsTransport final : public StreamTransport<beast::ssl_stream<Socket>> {
 public:
  TlsTransport(Socket socket, net::ssl::context& context) : StreamTransport(std::move(socket), context) {}

  void handshake(std::function<void(const beast::error_code&)> done) override {
    no_delay();
    stream_.async_handshake(net::ssl::stream_base::server,
                            [done = std::move(done)](const beast::error_code& ec) { done(ec); });
  }

  void read_some(net::mutable_buffer buffer, IoHandler handler) override {
    if (shut_down_) {
      socket().async_read_some(buffer, std::move(handler));  // only to be discarded: no TLS records now
    } else {
      stream_.async_read_some(buffer, std::move(handler));
    }
  }

  void shutdown_send(std::shared_ptr<void> owner) override {
    // A TLS shutdown normally waits for the client's close_notify too, reading while the connection may
    // have a read of its own outstanding. Marking the client's as received makes OpenSSL only send ours;
    // a TLS read still outstanding then ends with an error, and later reads take the raw bytes, which the
    // connection discards while it lingers (as over plain TCP, so unread bytes do not reset the
    // connection before the client has read the response).
    shut_down_ = true;
    SSL_set_shutdown(stream_.native_handle(), SSL_RECEIVED_SHUTDOWN);
    stream_.async_shutdown([this, owner = std::move(owner)](const beast::error_code&) {
      beast::error_code ignored;
      socket().shutdown(Socket::shutdown_send, ignored);
    });
  }

 private:
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_plain_transport(Socket socket) {
  return std::make_unique<PlainTransport>(std::move(socket));
}

std::unique_ptr<Transport> make_tls_transport(Socket socket, net::ssl::context& context) {
  return std::make_unique<TlsTransport>(std::move(socket), context);
}

}  // namespace serverd::http::detail
