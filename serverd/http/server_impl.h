#pragma once

// serverd's HTTP server inside: the shared state of a running server (ServerImpl) and the gate through which
// other threads post into its io_context. Internal to serverd/http: Beast, Asio and OpenSSL stay here.

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "serverd/http/cors.h"
#include "serverd/http/http_server.h"
#include "serverd/http/listener.h"
#include "serverd/http/transport.h"

namespace serverd::http::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

// Posting into the io_context from other threads is only safe while it exists and runs; the gate closes
// before the server stops it, and later posts are dropped.
class Gate {
 public:
  explicit Gate(net::io_context& context) : context_(&context) {}

  template <typename Fn>
  bool with_open(Fn&& fn) {
    std::lock_guard lock(mutex_);
    if (context_ == nullptr) return false;
    fn(*context_);
    return true;
  }
  void close() {
    std::lock_guard lock(mutex_);
    context_ = nullptr;
  }

 private:
  std::mutex mutex_;
  net::io_context* context_;
};

class Connection;

// The server's shared state. Connections point back to it with a raw pointer: it owns them (through the
// registry and the io_context's pending handlers) and outlives them.
class ServerImpl {
 public:
  ServerImpl(ServerOptions options, Handler handler);
  ~ServerImpl();

  void start();
  void begin_shutdown();
  void shutdown(std::chrono::milliseconds grace);

  const ServerOptions& options() const { return options_; }
  const CorsPolicy& cors() const { return cors_; }
  bool draining() const { return draining_.load(); }
  const std::shared_ptr<Gate>& gate() const { return gate_; }
  void handle(std::shared_ptr<Exchange> exchange) { handler_(std::move(exchange)); }
  Response error_response(int status, std::string_view message) const {
    return options_.error_response(status, message);
  }

  void exchange_started() {
    std::lock_guard lock(mutex_);
    ++exchanges_;
  }
  void exchange_finished() {
    std::lock_guard lock(mutex_);
    --exchanges_;
    changed_.notify_all();
  }
  void remove(Connection* connection);

  std::size_t open_connections() const {
    std::lock_guard lock(mutex_);
    return connections_.size();
  }
  std::size_t exchanges_in_flight() const {
    std::lock_guard lock(mutex_);
    return exchanges_;
  }

  std::uint16_t port() const { return port_; }

 private:
  void accept();
  void on_accept(const beast::error_code& ec, Socket socket);
  void for_each_connection(void (Connection::*method)());

  ServerOptions options_;
  std::unique_ptr<net::ssl::context> tls_;  // null: plain HTTP
  CorsPolicy cors_;
  Handler handler_;
  net::io_context context_;
  std::shared_ptr<Gate> gate_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  Acceptor acceptor_;
  UnixSocketFile socket_file_;  // listening on a Unix socket (options_.uds)
  net::steady_timer accept_retry_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> draining_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::mutex shutdown_mutex_;  // one shutdown at a time

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;
  std::size_t exchanges_ = 0;
};

}  // namespace serverd::http::detail
