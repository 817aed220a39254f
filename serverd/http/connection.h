#pragma once

// One connection of serverd's HTTP server and the exchange (request and response) it carries. Internal to
// serverd/http.

#include "serverd/http/server_impl.h"

namespace serverd::http::detail {

class ExchangeImpl;

// One client connection, over whichever Transport the listener gave it (plain or TLS, TCP or Unix socket);
// every member function runs on its strand. Exactly one read is outstanding at a time: waiting for a
// request's first bytes (which doubles as disconnect detection while a response is pending), the header, or
// the body.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerImpl* server, std::unique_ptr<Transport> transport)
      : server_(server),
        transport_(std::move(transport)),
        read_timer_(transport_->executor()),
        write_timer_(transport_->executor()) {}

  net::any_io_executor executor() { return transport_->executor(); }

  // A TLS handshake first (bounded by the header timeout), then the first request.
  void start();

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

  void on_handshake(const beast::error_code& ec);
  void wait_for_request();
  void watch();
  void on_watch(const beast::error_code& ec, std::size_t bytes);
  void read_header();
  void parse_header();
  void on_header_bytes(const beast::error_code& ec, std::size_t bytes);
  void on_header();
  void parse_body();
  void on_body_bytes(const beast::error_code& ec, std::size_t bytes);
  // The common end of a header or body read: false when the connection closed or the read failed (handled).
  bool read_completed(const beast::error_code& ec);
  void on_read_error(const beast::error_code& ec);
  void dispatch();
  // Answers the request now, without the handler: a preflight, or (through reject) a refusal.
  void respond_now(const Response& response);
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
  std::unique_ptr<Transport> transport_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::vector<Header> fields_;  // the current request's header fields, from on_header() to dispatch()
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

}  // namespace serverd::http::detail
