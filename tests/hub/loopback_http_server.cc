#include "tests/hub/loopback_http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

namespace testing_support::hub {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Requests are small (a method, a target, a few headers); the limits keep a broken client from growing
// a connection thread's memory without bound.
constexpr std::uint32_t kHeaderLimit = 16 * 1024;
constexpr std::uint64_t kBodyLimit = 1024 * 1024;
// Bodies go out in pieces of this size, so large files stream and a fault can stop at an exact byte.
constexpr std::size_t kWriteChunk = 64 * 1024;
// How often a stalled response looks whether its peer has gone; stop() wakes it at once.
constexpr std::chrono::milliseconds kPeerCheckInterval{20};

std::string lower_case(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lowered;
}

// The peer has closed or reset its end: nothing it is waiting for will be read.
bool peer_has_closed(int socket_fd) {
  pollfd watched{socket_fd, POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::string to_string(boost::beast::string_view text) {
  return std::string(text.data(), text.size());
}

HttpRequest to_request(const http::request<http::string_body>& message) {
  HttpRequest request;
  request.method = to_string(message.method_string());
  request.target = to_string(message.target());
  for (const auto& field : message) {
    auto [entry, inserted] =
        request.headers.try_emplace(lower_case(to_string(field.name_string())), to_string(field.value()));
    if (!inserted) entry->second += ", " + to_string(field.value());
  }
  request.body = message.body();
  return request;
}

HttpResponse plain_error(int status, std::string message) {
  HttpResponse response;
  response.status = status;
  response.add_header("Content-Type", "text/plain");
  response.set_body(std::move(message) + "\n");
  return response;
}

}  // namespace

std::string HttpRequest::header(const std::string& lower_case_name) const {
  const auto found = headers.find(lower_case_name);
  return found == headers.end() ? std::string() : found->second;
}

void HttpResponse::add_header(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::set_body(std::string text) {
  body_length = text.size();
  body_offset = 0;
  body = std::make_shared<const std::string>(std::move(text));
}

void HttpResponse::set_body(std::shared_ptr<const std::string> source, std::size_t offset, std::size_t length) {
  body = std::move(source);
  body_offset = offset;
  body_length = length;
}

class LoopbackHttpServer::Impl {
 public:
  Impl(const std::string& address, std::uint16_t port) : acceptor_(io_) {
    const tcp::endpoint endpoint(asio::ip::make_address(address), port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));  // a fixed port can be rebound at once
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
  }

  ~Impl() { stop(); }

  std::uint16_t port() const { return port_; }

  void start(Handler handler) {
    handler_ = std::move(handler);
    accept_next();
    accept_thread_ = std::thread([this] { io_.run(); });
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      // shutdown(2) rather than close: the serving thread still owns the descriptor, and shutdown wakes
      // whatever it is blocked in (read, write) without freeing a number another socket could reuse.
      for (const auto& connection : connections_) {
        if (connection->open) ::shutdown(connection->socket.native_handle(), SHUT_RDWR);
      }
    }
    changed_.notify_all();  // stalled responses
    // The acceptor belongs to the accept thread's io_context; close it there.
    asio::post(io_, [this] {
      error_code ignored;
      acceptor_.close(ignored);
    });
    if (accept_thread_.joinable()) accept_thread_.join();

    std::list<std::unique_ptr<Connection>> remaining;
    {
      std::lock_guard lock(mutex_);
      remaining.swap(connections_);
    }
    for (const auto& connection : remaining) connection->thread.join();
  }

  bool wait_for_no_connections(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] {
      return std::none_of(connections_.begin(), connections_.end(), [](const auto& c) { return c->open; });
    });
  }

 private:
  struct Connection {
    explicit Connection(tcp::socket accepted) : socket(std::move(accepted)) {}
    tcp::socket socket;
    std::thread thread;
    bool open = true;  // guarded by mutex_; false once the serving thread has closed the socket
  };

  void accept_next() {
    acceptor_.async_accept([this](const error_code& error, tcp::socket socket) {
      if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;  // stop()
      join_finished_connections();
      if (!error) launch(std::move(socket));
      accept_next();
    });
  }

  void launch(tcp::socket socket) {
    error_code ignored;
    // Without Nagle's delay the last small piece before a stall or truncation reaches the client at once.
    socket.set_option(tcp::no_delay(true), ignored);
    auto connection = std::make_unique<Connection>(std::move(socket));
    Connection& serving = *connection;
    std::lock_guard lock(mutex_);
    if (stopping_) return;  // the socket closes with `connection`
    try {
      serving.thread = std::thread([this, &serving] { serve(serving); });
    } catch (const std::system_error&) {
      return;  // no thread to be had: drop this connection, keep accepting
    }
    connections_.push_back(std::move(connection));
  }

  // Threads of closed connections are joined here, as new ones arrive, so a long test does not pile them up.
  void join_finished_connections() {
    std::list<std::unique_ptr<Connection>> finished;
    {
      std::lock_guard lock(mutex_);
      for (auto it = connections_.begin(); it != connections_.end();) {
        const auto next = std::next(it);
        if (!(*it)->open) finished.splice(finished.end(), connections_, it);
        it = next;
      }
    }
    for (const auto& connection : finished) connection->thread.join();
  }

  void serve(Connection& connection) {
    boost::beast::flat_buffer buffer;
    try {
      while (serve_one_request(connection, buffer)) {
      }
    } catch (const std::exception&) {
      // A connection that fails ends; the client sees the close.
    }
    std::lock_guard lock(mutex_);
    error_code ignored;
    connection.socket.shutdown(tcp::socket::shutdown_both, ignored);
    connection.socket.close(ignored);
    connection.open = false;
    changed_.notify_all();
  }

  // Reads one request and answers it; false when the connection should close.
  bool serve_one_request(Connection& connection, boost::beast::flat_buffer& buffer) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    error_code error;
    http::read(connection.socket, buffer, parser, error);
    if (error == http::error::end_of_stream) return false;
    if (error == http::error::header_limit) {
      write_response(connection, plain_error(431, "request header fields too large"), false, false);
      return false;
    }
    if (error == http::error::body_limit) {
      write_response(connection, plain_error(413, "request body too large"), false, false);
      return false;
    }
    if (error) {
      if (error.category() == make_error_code(http::error::bad_target).category()) {
        write_response(connection, plain_error(400, "malformed request"), false, false);
      }
      return false;
    }

    const HttpRequest request = to_request(parser.get());
    HttpResponse response;
    try {
      response = handler_(request);
    } catch (const std::exception& failure) {
      response = plain_error(500, std::string("test hub handler failed: ") + failure.what());
    }
    return write_response(connection, response, request.method == "HEAD", parser.get().keep_alive());
  }

  // Writes `response`; true when the connection may serve another request.
  bool write_response(Connection& connection, const HttpResponse& response, bool head_request, bool keep_alive) {
    http::response<http::empty_body> header;
    header.version(11);
    header.result(static_cast<unsigned>(response.status));
    for (const auto& [name, value] : response.headers) header.insert(name, value);
    // Set by hand, not prepare_payload(): the body is written below, and HEAD announces GET's length.
    header.content_length(response.body_length);
    header.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> serializer(header);
    error_code error;
    http::write_header(connection.socket, serializer, error);
    if (error) return false;
    if (head_request || response.body_length == 0) return keep_alive;

    std::size_t to_send = response.body_length;
    if (response.close_after) to_send = std::min<std::uint64_t>(to_send, *response.close_after);
    const bool stall = response.stall_after && *response.stall_after < to_send;
    if (stall) to_send = *response.stall_after;

    std::string patched;
    for (std::size_t sent = 0; sent < to_send;) {
      const std::size_t piece = std::min(kWriteChunk, to_send - sent);
      const char* data = response.body->data() + response.body_offset + sent;
      if (response.flip_byte_at && *response.flip_byte_at >= sent && *response.flip_byte_at < sent + piece) {
        patched.assign(data, piece);
        patched[*response.flip_byte_at - sent] = static_cast<char>(~patched[*response.flip_byte_at - sent]);
        data = patched.data();
      }
      asio::write(connection.socket, asio::buffer(data, piece), error);
      if (error) return false;
      sent += piece;
    }
    if (stall) {
      wait_for_peer_close_or_stop(connection);
      return false;
    }
    return keep_alive && !response.close_after;
  }

  void wait_for_peer_close_or_stop(Connection& connection) {
    std::unique_lock lock(mutex_);
    while (!stopping_ && !peer_has_closed(connection.socket.native_handle())) {
      changed_.wait_for(lock, kPeerCheckInterval);
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  Handler handler_;
  std::thread accept_thread_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // stop() began, or a connection closed
  bool stopping_ = false;
  std::list<std::unique_ptr<Connection>> connections_;
};

LoopbackHttpServer::LoopbackHttpServer(const std::string& address, std::uint16_t port)
    : impl_(std::make_unique<Impl>(address, port)) {}

LoopbackHttpServer::~LoopbackHttpServer() = default;

std::uint16_t LoopbackHttpServer::port() const {
  return impl_->port();
}

void LoopbackHttpServer::start(Handler handler) {
  impl_->start(std::move(handler));
}

void LoopbackHttpServer::stop() {
  impl_->stop();
}

bool LoopbackHttpServer::wait_for_no_connections(std::chrono::milliseconds timeout) const {
  return impl_->wait_for_no_connections(timeout);
}

}  // namespace testing_support::hub
