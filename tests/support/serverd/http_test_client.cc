#include "tests/support/serverd/http_test_client.h"

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <algorithm>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cctype>
#include <stdexcept>
#include <utility>

namespace serverd_test {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using Socket = net::generic::stream_protocol::socket;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string HttpReply::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

bool HttpReply::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return h.first == name; });
}

class HttpConnection::Impl {
 public:
  explicit Impl(const ClientOptions& options) : timeout_(options.timeout) {
    Socket socket(context_);
    if (options.uds.empty()) {
      socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), options.port));
    } else {
      socket.connect(net::local::stream_protocol::endpoint(options.uds));
    }
    if (!options.tls) {
      plain_.emplace(std::move(socket));
      return;
    }
    tls_context_.emplace(ssl::context::tls_client);
    if (!options.ca_file.empty()) {
      tls_context_->load_verify_file(options.ca_file);
      tls_context_->set_verify_mode(ssl::verify_peer);
    }
    if (!options.certificate_file.empty()) {
      tls_context_->use_certificate_chain_file(options.certificate_file);
      tls_context_->use_private_key_file(options.key_file, ssl::context::pem);
    }
    auto& tls = tls_.emplace(std::move(socket), *tls_context_);
    if (!options.ca_file.empty()) tls.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    const auto ec = run([&](auto handler) { tls.async_handshake(ssl::stream_base::client, handler); });
    if (ec) throw std::runtime_error("TLS handshake failed: " + ec.message());
  }

  // Runs one asynchronous operation to completion or until the timeout, which closes the socket and throws.
  template <typename Start>
  beast::error_code run(Start&& start) {
    beast::error_code result;
    bool done = false;
    start([&](const beast::error_code& ec, auto&&...) {
      result = ec;
      done = true;
    });
    context_.restart();
    context_.run_for(timeout_);
    if (!done) {
      beast::error_code ignored;
      socket().close(ignored);
      context_.restart();
      context_.run();
      throw std::runtime_error("the server did not answer in time");
    }
    return result;
  }

  // Calls `fn` with the stream: the TLS one, or the socket itself.
  template <typename Fn>
  void on_stream(Fn&& fn) {
    if (tls_) {
      fn(*tls_);
    } else {
      fn(*plain_);
    }
  }

  Socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }

  void send(std::string_view raw) {
    const auto ec = run([&](auto handler) {
      on_stream([&](auto& stream) { net::async_write(stream, net::buffer(raw.data(), raw.size()), handler); });
    });
    if (ec) throw std::runtime_error("write failed: " + ec.message());
  }

  void new_parser() {
    parser_.emplace();
    parser_->body_limit(std::uint64_t{1} << 30);
    consumed_ = 0;
  }

  HttpReply reply() const {
    HttpReply r;
    const auto& message = parser_->get();
    r.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      r.headers.emplace_back(lower({field.name_string().data(), field.name_string().size()}),
                             std::string(field.value().data(), field.value().size()));
    }
    return r;
  }

  HttpReply read_response() {
    new_parser();
    const auto ec = run(
        [&](auto handler) { on_stream([&](auto& stream) { bhttp::async_read(stream, buffer_, *parser_, handler); }); });
    if (ec) throw std::runtime_error("reading the response failed: " + ec.message());
    HttpReply r = reply();
    r.body = parser_->get().body();
    return r;
  }

  HttpReply read_response_header() {
    new_parser();
    const auto ec = run([&](auto handler) {
      on_stream([&](auto& stream) { bhttp::async_read_header(stream, buffer_, *parser_, handler); });
    });
    if (ec) throw std::runtime_error("reading the response header failed: " + ec.message());
    return reply();
  }

  std::optional<std::string> next_event() {
    for (;;) {
      const std::string& body = parser_->get().body();
      const auto end = body.find("\n\n", consumed_);
      if (end != std::string::npos) {
        std::string event = body.substr(consumed_, end - consumed_);
        consumed_ = end + 2;
        // The Responses API names each event ("event: TYPE" before its data); the data says the type too.
        if (event.rfind("event: ", 0) == 0 && event.find('\n') != std::string::npos) {
          event.erase(0, event.find('\n') + 1);
        }
        if (event.rfind("data: ", 0) != 0) throw std::runtime_error("not a data event: " + event);
        return event.substr(6);
      }
      if (parser_->is_done()) {
        if (consumed_ != body.size()) throw std::runtime_error("the stream ended inside an event");
        return std::nullopt;
      }
      const auto ec = run([&](auto handler) {
        on_stream([&](auto& stream) { bhttp::async_read_some(stream, buffer_, *parser_, handler); });
      });
      if (ec && !parser_->is_done()) throw std::runtime_error("reading the stream failed: " + ec.message());
    }
  }

  bool wait_closed() {
    char scratch[4096];
    try {
      for (;;) {
        const auto ec = run([&](auto handler) {
          on_stream([&](auto& stream) { stream.async_read_some(net::buffer(scratch), handler); });
        });
        if (ec) {
          // Over TLS, end of stream means close_notify came; a TCP close without it reads as truncated.
          close_notify_ = tls_ && ec == net::error::eof;
          return ec == net::error::eof || ec == net::error::connection_reset || ec == ssl::error::stream_truncated;
        }
      }
    } catch (const std::runtime_error&) {
      return false;
    }
  }

  bool closed_with_close_notify() const { return close_notify_; }

  void close() {
    beast::error_code ignored;
    socket().shutdown(Socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  net::io_context context_;
  std::chrono::milliseconds timeout_;
  std::optional<ssl::context> tls_context_;
  std::optional<Socket> plain_;  // exactly one of these two
  std::optional<beast::ssl_stream<Socket>> tls_;
  bool close_notify_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  std::size_t consumed_ = 0;  // body bytes next_event() has returned
};

HttpConnection::HttpConnection(std::uint16_t port, std::chrono::milliseconds timeout)
    : HttpConnection(ClientOptions{.port = port, .timeout = timeout}) {}
HttpConnection::HttpConnection(const ClientOptions& options) : impl_(std::make_unique<Impl>(options)) {}
HttpConnection::~HttpConnection() = default;

void HttpConnection::send(std::string_view raw) {
  impl_->send(raw);
}

void HttpConnection::send_request(std::string_view method, std::string_view target, std::string_view body,
                                  const std::vector<std::string>& headers) {
  std::string raw = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& header : headers) raw += header + "\r\n";
  if (!body.empty() || method == "POST")
    raw += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  raw += "\r\n";
  raw += body;
  impl_->send(raw);
}

HttpReply HttpConnection::read_response() {
  return impl_->read_response();
}
HttpReply HttpConnection::read_response_header() {
  return impl_->read_response_header();
}
std::optional<std::string> HttpConnection::next_event() {
  return impl_->next_event();
}
bool HttpConnection::wait_closed() {
  return impl_->wait_closed();
}
bool HttpConnection::closed_with_close_notify() const {
  return impl_->closed_with_close_notify();
}
void HttpConnection::close() {
  impl_->close();
}

HttpReply http_request(std::uint16_t port, std::string_view method, std::string_view target, std::string_view body,
                       const std::vector<std::string>& headers) {
  return http_request(ClientOptions{.port = port}, method, target, body, headers);
}

HttpReply http_request(const ClientOptions& options, std::string_view method, std::string_view target,
                       std::string_view body, const std::vector<std::string>& headers) {
  HttpConnection connection(options);
  connection.send_request(method, target, body, headers);
  return connection.read_response();
}

}  // namespace serverd_test
