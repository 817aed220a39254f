#include "serverd/http/http_server.h"

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

#include "base/printable.h"
#include "serverd/http/request_framing.h"

namespace serverd::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

constexpr std::size_t kReadChunk = 4096;
// How long a connection closed after an error response keeps reading (and discarding) what the client still
// sends, so the kernel does not reset the connection before the client has read the response.
constexpr std::chrono::milliseconds kLinger{2000};

std::string text_of(beast::string_view view) {
  return std::string(view.data(), view.size());
}

// Every header field of a request, names and values as sent.
std::vector<Header> header_fields(const bhttp::request_header<>& message) {
  std::vector<Header> fields;
  for (const auto& field : message) fields.push_back({text_of(field.name_string()), text_of(field.value())});
  return fields;
}

// Header names and values go on the wire verbatim; a CR or LF in them would split the response.
std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

Response plain_error(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  r.body = std::string(message) + "\n";
  return r;
}

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

}  // namespace

namespace detail {

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
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  void for_each_connection(void (Connection::*method)());

  ServerOptions options_;
  Handler handler_;
  net::io_context context_;
  std::shared_ptr<Gate> gate_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
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

}  // namespace detail

using detail::ServerImpl;

namespace {

class ExchangeImpl;

// One TCP connection; every member function runs on its strand. Exactly one read is outstanding at a time:
// waiting for a request's first bytes (which doubles as disconnect detection while a response is pending),
// the header, or the body.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerImpl* server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()) {}

  net::any_io_executor executor() { return socket_.get_executor(); }

  void start() {
    beast::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);  // SSE chunks are small and latency matters
    wait_for_request();
  }

  // The server is shutting down: an idle connection closes now, a busy one after its response.
  void drain() {
    keep_alive_ = false;
    if (phase_ == Phase::kIdle) close();
  }

  // Ends everything now; a pending exchange is aborted.
  void close();

  // Called through ExchangeImpl, on the strand.
  void send_full(ExchangeImpl& exchange, Response response);
  void send_head(ExchangeImpl& exchange, Response head);
  void send_chunk(ExchangeImpl& exchange, std::string data);
  void send_end(ExchangeImpl& exchange);

 private:
  enum class Phase { kIdle, kHeader, kBody, kHandling, kClosing, kClosed };

  void wait_for_request();
  void watch();
  void on_watch(const beast::error_code& ec, std::size_t bytes);
  void read_header();
  void parse_header();
  void on_header_bytes(const beast::error_code& ec, std::size_t bytes);
  void on_header();
  void on_body(const beast::error_code& ec);
  // The common end of a header or body read: false when the connection closed or the read failed (handled).
  bool read_completed(const beast::error_code& ec);
  void on_read_error(const beast::error_code& ec);
  void dispatch();
  void reject(int status, std::string_view message);
  void queue(std::string bytes);
  void flush();
  void on_write(const beast::error_code& ec);
  void response_done();
  void abort_exchange();
  void linger_close();
  std::string head(int status, const std::vector<Header>& headers, std::optional<std::size_t> content_length);

  template <typename Duration>
  void arm(net::steady_timer& timer, std::uint64_t& generation, Duration duration, void (Connection::*on_expiry)()) {
    const std::uint64_t armed = ++generation;
    timer.expires_after(duration);
    timer.async_wait([self = shared_from_this(), &generation, armed, on_expiry](const beast::error_code& ec) {
      if (!ec && generation == armed) ((*self).*on_expiry)();
    });
  }
  void disarm(net::steady_timer& timer, std::uint64_t& generation) {
    ++generation;
    timer.cancel();
  }
  void on_read_timeout() { close(); }
  void on_write_timeout() {
    abort_exchange();
    close();
  }

  ServerImpl* server_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  std::uint64_t read_generation_ = 0;
  std::uint64_t write_generation_ = 0;
  Phase phase_ = Phase::kIdle;
  bool read_pending_ = false;

  std::shared_ptr<ExchangeImpl> exchange_;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool chunked_ = false;

  std::string out_;      // queued, not yet handed to the socket
  std::string writing_;  // being written
  bool write_pending_ = false;
  bool response_queued_ = false;  // the response's last bytes are in out_ or writing_
};

class ExchangeImpl final : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  enum class State { kPending, kStreaming, kResponded, kComplete, kAborted };

  ExchangeImpl(std::weak_ptr<Connection> connection, std::shared_ptr<Gate> gate, Request request)
      : connection_(std::move(connection)), gate_(std::move(gate)), request_(std::move(request)) {}

  const Request& request() const override { return request_; }

  void respond(Response response) override {
    to_connection([response = std::move(response)](Connection& c, ExchangeImpl& x) mutable {
      c.send_full(x, std::move(response));
    });
  }
  void start_stream(Response head) override {
    to_connection(
        [head = std::move(head)](Connection& c, ExchangeImpl& x) mutable { c.send_head(x, std::move(head)); });
  }
  void write(std::string data) override {
    if (data.empty()) return;  // an empty chunk would end the chunked body
    to_connection(
        [data = std::move(data)](Connection& c, ExchangeImpl& x) mutable { c.send_chunk(x, std::move(data)); });
  }
  void finish() override {
    to_connection([](Connection& c, ExchangeImpl& x) { c.send_end(x); });
  }

  void on_abort(std::function<void()> callback) override {
    {
      std::lock_guard lock(mutex_);
      if (!aborted_) {
        abort_callback_ = std::move(callback);
        return;
      }
    }
    callback();
  }

  void post(std::function<void()> task) override {
    gate_->with_open([&](net::io_context& context) { net::post(context, std::move(task)); });
  }

  // Strand-only from here on.
  State state = State::kPending;
  bool counted = true;  // still counted in the server's exchanges in flight

  void fire_abort() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mutex_);
      aborted_ = true;
      callback = std::move(abort_callback_);
    }
    if (callback) callback();
  }

 private:
  template <typename Fn>
  void to_connection(Fn&& fn) {
    gate_->with_open([&](net::io_context&) {
      if (auto connection = connection_.lock()) {
        net::post(connection->executor(), [connection, self = shared_from_this(), fn = std::forward<Fn>(fn)]() mutable {
          fn(*connection, *self);
        });
      }
    });
  }

  std::weak_ptr<Connection> connection_;
  std::shared_ptr<Gate> gate_;
  Request request_;
  std::mutex mutex_;
  bool aborted_ = false;
  std::function<void()> abort_callback_;
};

}  // namespace

void Connection::wait_for_request() {
  if (!keep_alive_ || server_->draining()) {
    linger_close();
    return;
  }
  parser_.emplace();
  parser_->header_limit(
      static_cast<std::uint32_t>(std::min<std::size_t>(server_->options().max_header_bytes, UINT32_MAX)));
  parser_->body_limit(server_->options().max_body_bytes);
  if (buffer_.size() > 0 && !read_pending_) {
    read_header();  // a pipelined request is already here
    return;
  }
  phase_ = Phase::kIdle;
  arm(read_timer_, read_generation_, server_->options().idle_timeout, &Connection::on_read_timeout);
  if (!read_pending_) watch();
}

void Connection::watch() {
  read_pending_ = true;
  socket_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](const beast::error_code& ec, std::size_t bytes) { self->on_watch(ec, bytes); });
}

void Connection::on_watch(const beast::error_code& ec, std::size_t bytes) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();  // end of stream or a broken connection: a pending exchange is aborted
    return;
  }
  buffer_.commit(bytes);
  switch (phase_) {
    case Phase::kIdle: read_header(); return;
    case Phase::kClosing:
      buffer_.consume(buffer_.size());
      watch();
      return;
    case Phase::kHandling:
      // A pipelined request: it waits in the buffer until the response is done. Watching stops here (so the
      // buffer stays bounded); a client that pipelines loses disconnect detection for this exchange only.
      return;
    default: return;
  }
}

void Connection::read_header() {
  phase_ = Phase::kHeader;
  arm(read_timer_, read_generation_, server_->options().header_timeout, &Connection::on_read_timeout);
  parse_header();
}

// Offers the buffered bytes to the parser, after checking them raw for what the parser would hide; reads
// more until the header is complete (the parser bounds its size).
void Connection::parse_header() {
  const std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  if (has_obs_fold(data)) {
    disarm(read_timer_, read_generation_);
    reject(400, "A request header is folded over two lines (obsolete line folding)");
    return;
  }
  beast::error_code ec = bhttp::error::need_more;
  const std::size_t used = data.empty() ? 0 : parser_->put(buffer_.data(), ec);
  if (ec == bhttp::error::need_more) {
    read_pending_ = true;
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](const beast::error_code& read_ec, std::size_t bytes) {
                              self->on_header_bytes(read_ec, bytes);
                            });
    return;
  }
  buffer_.consume(used);
  if (read_completed(ec)) on_header();
}

void Connection::on_header_bytes(const beast::error_code& ec, std::size_t bytes) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();  // the client left mid-header
    return;
  }
  buffer_.commit(bytes);
  parse_header();
}

bool Connection::read_completed(const beast::error_code& ec) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return false;
  disarm(read_timer_, read_generation_);
  if (ec) {
    on_read_error(ec);
    return false;
  }
  return true;
}

void Connection::on_header() {
  const auto& message = parser_->get();
  if (auto refusal = framing_refusal(header_fields(message), message.version() < 11)) {
    reject(refusal->status, refusal->message);
    return;
  }
  const auto length = parser_->content_length();
  if (length && *length > server_->options().max_body_bytes) {
    reject(413, "Request body too large");
    return;
  }
  if (parser_->is_done()) {
    dispatch();
    return;
  }
  if (const auto expect = message[bhttp::field::expect];
      ascii_iequals({expect.data(), expect.size()}, "100-continue")) {
    queue("HTTP/1.1 100 Continue\r\n\r\n");
  }
  phase_ = Phase::kBody;
  arm(read_timer_, read_generation_, server_->options().body_timeout, &Connection::on_read_timeout);
  read_pending_ = true;
  bhttp::async_read(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](const beast::error_code& read_ec, std::size_t) { self->on_body(read_ec); });
}

void Connection::on_body(const beast::error_code& ec) {
  if (read_completed(ec)) dispatch();
}

void Connection::on_read_error(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    reject(431, "Request header fields too large");
  } else if (ec == bhttp::error::body_limit) {
    reject(413, "Request body too large");
  } else if (ec == bhttp::error::bad_content_length) {
    reject(400,
           "The request's Content-Length is malformed, repeated with another value, or beside "
           "Transfer-Encoding");
  } else if (ec == bhttp::error::bad_transfer_encoding) {
    reject(400, "The request's Transfer-Encoding is repeated or beside Content-Length");
  } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
             ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    reject(400, "Malformed HTTP request");
  } else {
    close();  // the client left, or the read timed out
  }
}

void Connection::dispatch() {
  auto message = parser_->release();
  Request request;
  request.method = text_of(message.method_string());
  request.target = text_of(message.target());
  request.headers = header_fields(message);
  request.body = std::move(message.body());
  keep_alive_ = keep_alive_ && message.keep_alive() && !server_->draining();
  http10_ = message.version() < 11;

  phase_ = Phase::kHandling;
  exchange_ = std::make_shared<ExchangeImpl>(weak_from_this(), server_->gate(), std::move(request));
  server_->exchange_started();
  if (buffer_.size() == 0 && !read_pending_) watch();  // notices a client that leaves before the response

  const auto exchange = exchange_;
  try {
    server_->handle(exchange);
  } catch (const std::exception& e) {
    std::cerr << "serverd: handler failed: " << base::printable(e.what()) << '\n';
    exchange->respond(server_->error_response(500, "Internal server error"));
  }
}

std::string Connection::head(int status, const std::vector<Header>& headers,
                             std::optional<std::size_t> content_length) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  for (const auto& header : headers) {
    if (ascii_iequals(header.name, "content-length") || ascii_iequals(header.name, "transfer-encoding") ||
        ascii_iequals(header.name, "connection")) {
      continue;
    }
    out += sanitize(header.name) + ": " + sanitize(header.value) + "\r\n";
  }
  if (content_length) {
    out += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  } else if (chunked_) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

void Connection::reject(int status, std::string_view message) {
  // The request was not read to its end (or its end is in doubt), so the connection cannot carry another
  // one: after the response it closes, and what the client still sends is discarded.
  keep_alive_ = false;
  phase_ = Phase::kHandling;
  Response response = server_->error_response(status, message);
  queue(head(response.status, response.headers, response.body.size()) + response.body);
  response_queued_ = true;
}

void Connection::send_full(ExchangeImpl& exchange, Response response) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kPending) return;
  exchange.state = ExchangeImpl::State::kResponded;
  if (server_->draining()) keep_alive_ = false;
  queue(head(response.status, response.headers, response.body.size()) + response.body);
  response_queued_ = true;
}

void Connection::send_head(ExchangeImpl& exchange, Response head_only) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kPending) return;
  exchange.state = ExchangeImpl::State::kStreaming;
  if (server_->draining()) keep_alive_ = false;
  chunked_ = !http10_;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the body is the end of the connection
  queue(head(head_only.status, head_only.headers, std::nullopt));
}

void Connection::send_chunk(ExchangeImpl& exchange, std::string data) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kStreaming) return;
  if (chunked_) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    queue(size + std::move(data) + "\r\n");
  } else {
    queue(std::move(data));
  }
  if (out_.size() > server_->options().max_pending_output_bytes) {
    close();  // the client does not read what it asked for
  }
}

void Connection::send_end(ExchangeImpl& exchange) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kStreaming) return;
  exchange.state = ExchangeImpl::State::kResponded;
  queue(chunked_ ? "0\r\n\r\n" : "");
  response_queued_ = true;
  flush();  // an HTTP/1.0 stream queues nothing here, and still has to end
}

void Connection::queue(std::string bytes) {
  if (phase_ == Phase::kClosed) return;
  out_ += bytes;
  flush();
}

void Connection::flush() {
  if (write_pending_ || phase_ == Phase::kClosed) return;
  if (out_.empty()) {
    if (response_queued_) {
      response_queued_ = false;
      response_done();
    }
    return;
  }
  writing_.swap(out_);
  out_.clear();
  write_pending_ = true;
  arm(write_timer_, write_generation_, server_->options().write_timeout, &Connection::on_write_timeout);
  net::async_write(socket_, net::buffer(writing_),
                   [self = shared_from_this()](const beast::error_code& ec, std::size_t) { self->on_write(ec); });
}

void Connection::on_write(const beast::error_code& ec) {
  write_pending_ = false;
  disarm(write_timer_, write_generation_);
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();
    return;
  }
  writing_.clear();
  flush();
}

void Connection::response_done() {
  if (exchange_) {
    exchange_->state = ExchangeImpl::State::kComplete;
    if (exchange_->counted) {
      exchange_->counted = false;
      server_->exchange_finished();
    }
    exchange_.reset();
  }
  chunked_ = false;
  wait_for_request();
}

void Connection::abort_exchange() {
  if (!exchange_) return;
  const auto exchange = std::move(exchange_);
  const bool unanswered =
      exchange->state == ExchangeImpl::State::kPending || exchange->state == ExchangeImpl::State::kStreaming;
  exchange->state = ExchangeImpl::State::kAborted;
  if (exchange->counted) {
    exchange->counted = false;
    server_->exchange_finished();
  }
  if (unanswered) exchange->fire_abort();
}

void Connection::linger_close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosing;
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  arm(read_timer_, read_generation_, std::min<std::chrono::milliseconds>(kLinger, server_->options().idle_timeout),
      &Connection::on_read_timeout);
  if (!read_pending_) watch();
}

void Connection::close() {
  if (phase_ == Phase::kClosed) return;
  abort_exchange();
  phase_ = Phase::kClosed;
  disarm(read_timer_, read_generation_);
  disarm(write_timer_, write_generation_);
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  server_->remove(this);  // pending handlers hold the connection until they have run
}

ServerImpl::ServerImpl(ServerOptions options, Handler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      gate_(std::make_shared<Gate>(context_)),
      work_(net::make_work_guard(context_)),
      acceptor_(net::make_strand(context_)),
      accept_retry_(acceptor_.get_executor()) {
  if (!options_.error_response) options_.error_response = plain_error;
  if (options_.io_threads == 0) options_.io_threads = 1;
  net::ip::address address;
  beast::error_code ec;
  address = net::ip::make_address(options_.host, ec);
  if (ec) {
    // A host name ("localhost"): the first address it resolves to.
    tcp::resolver resolver(context_);
    const auto results = resolver.resolve(options_.host, std::to_string(options_.port));
    address = results.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(net::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(net::socket_base::max_listen_connections);
  port_ = acceptor_.local_endpoint().port();
}

ServerImpl::~ServerImpl() {
  shutdown(std::chrono::milliseconds(0));
  std::lock_guard lock(mutex_);
  connections_.clear();
}

void ServerImpl::start() {
  std::lock_guard lock(shutdown_mutex_);
  if (started_ || stopped_) return;
  started_ = true;
  net::post(acceptor_.get_executor(), [this] { accept(); });
  for (std::size_t i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          context_.run();
          return;
        } catch (const std::exception& e) {
          std::cerr << "serverd: I/O thread: " << base::printable(e.what()) << '\n';
        }
      }
    });
  }
}

void ServerImpl::accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(net::make_strand(context_),
                         [this](const beast::error_code& ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void ServerImpl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (!acceptor_.is_open() || draining_) return;
  if (ec) {
    // Out of descriptors, say: try again shortly instead of spinning.
    accept_retry_.expires_after(std::chrono::milliseconds(100));
    accept_retry_.async_wait([this](const beast::error_code& wait_ec) {
      if (!wait_ec) accept();
    });
    return;
  }
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mutex_);
    if (connections_.size() < options_.max_connections) {
      connection = std::make_shared<Connection>(this, std::move(socket));
      connections_.emplace(connection.get(), connection);
    }
  }
  if (connection) {
    net::dispatch(connection->executor(), [connection] { connection->start(); });
  } else {
    beast::error_code ignored;
    socket.close(ignored);
  }
  accept();
}

void ServerImpl::remove(Connection* connection) {
  std::lock_guard lock(mutex_);
  connections_.erase(connection);
  changed_.notify_all();
}

void ServerImpl::for_each_connection(void (Connection::*method)()) {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, connection] : connections_) all.push_back(connection);
  }
  for (const auto& connection : all) {
    net::post(connection->executor(), [connection, method] { ((*connection).*method)(); });
  }
}

void ServerImpl::begin_shutdown() {
  if (draining_.exchange(true)) return;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  for_each_connection(&Connection::drain);
}

void ServerImpl::shutdown(std::chrono::milliseconds grace) {
  std::lock_guard shutdown_lock(shutdown_mutex_);
  if (stopped_) return;
  stopped_ = true;
  begin_shutdown();
  if (started_) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, grace, [this] { return exchanges_ == 0; });
    lock.unlock();
    for_each_connection(&Connection::close);
    lock.lock();
    // Closing runs on the I/O threads and takes a moment; it never blocks, so this wait is short.
    changed_.wait_for(lock, std::chrono::seconds(5), [this] { return connections_.empty(); });
  }
  gate_->close();
  work_.reset();
  context_.stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_shared<ServerImpl>(std::move(options), std::move(handler))) {}

Server::~Server() = default;

std::uint16_t Server::port() const {
  return impl_->port();
}
void Server::start() {
  impl_->start();
}
void Server::begin_shutdown() {
  impl_->begin_shutdown();
}
void Server::shutdown(std::chrono::milliseconds grace) {
  impl_->shutdown(grace);
}
std::size_t Server::open_connections() const {
  return impl_->open_connections();
}
std::size_t Server::exchanges_in_flight() const {
  return impl_->exchanges_in_flight();
}

std::string_view Request::path() const {
  const std::string_view target_view(target);
  return target_view.substr(0, target_view.find('?'));
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& header : headers) {
    if (ascii_iequals(header.name, name)) return std::string_view(header.value);
  }
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  const auto phrase = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return {phrase.data(), phrase.size()};
}

}  // namespace serverd::http
