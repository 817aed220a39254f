// serverd's HTTP/1.1 server over loopback: keep-alive, limits, timeouts, pipelining, 100-continue, chunked
// streaming from other threads, client-disconnect detection and graceful shutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "serverd/http/http_server.h"
#include "tests/support/serverd/http_test_client.h"

namespace serverd::http {
namespace {

using serverd_test::http_request;
using serverd_test::HttpConnection;
using ::testing::HasSubstr;

// Exchanges a handler has parked, for tests that answer later or watch for aborts.
class Parked {
 public:
  void add(std::shared_ptr<Exchange> exchange) {
    std::lock_guard lock(mutex_);
    exchanges_.push_back(std::move(exchange));
    changed_.notify_all();
  }
  std::shared_ptr<Exchange> wait(std::size_t index) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::seconds(10), [&] { return exchanges_.size() > index; })) return nullptr;
    return exchanges_[index];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<Exchange>> exchanges_;
};

Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain"});
  r.body = std::move(body);
  return r;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) {
    server_ = std::make_unique<Server>(std::move(options), [this](std::shared_ptr<Exchange> exchange) {
      ++handled_;
      const auto& request = exchange->request();
      if (request.path() == "/park") {
        parked_.add(exchange);
      } else {
        exchange->respond(text(200, request.method + " " + request.target + " " + request.body));
      }
    });
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->shutdown(std::chrono::milliseconds(0));
  }

  Parked parked_;
  std::atomic<int> handled_{0};  // requests that reached the handler
  std::unique_ptr<Server> server_;
};

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  start();
  HttpConnection c(server_->port());
  for (int i = 0; i < 3; ++i) {
    c.send_request("POST", "/echo?i=" + std::to_string(i), "body");
    const auto reply = c.read_response();
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, "POST /echo?i=" + std::to_string(i) + " body");
    EXPECT_EQ(reply.header("connection"), "keep-alive");
  }
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  HttpConnection c(server_->port());
  c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_response().body, "GET /a ");
  EXPECT_EQ(c.read_response().body, "GET /b ");
}

TEST_F(HttpServerTest, ConnectionCloseAndHttp10EndTheConnection) {
  start();
  HttpConnection c(server_->port());
  c.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(c.read_response().header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  HttpConnection old(server_->port());
  old.send("GET /b HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.read_response().body, "GET /b ");
  EXPECT_TRUE(old.wait_closed());
}

TEST_F(HttpServerTest, OversizedBodyGets413) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  start(options);
  const auto reply = http_request(server_->port(), "POST", "/echo", std::string(2000, 'x'));
  EXPECT_EQ(reply.status, 413);
  // A chunked body without a length is stopped when it passes the limit.
  HttpConnection c(server_->port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + std::string(0x800, 'y') +
         "\r\n0\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 413);
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(http_request(server_->port(), "POST", "/echo", "ok").status, 200);
}

TEST_F(HttpServerTest, OversizedHeaderGets431AndMalformedRequestsGet400) {
  start();
  HttpConnection big(server_->port());
  big.send("GET /a HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'h') + "\r\n\r\n");
  EXPECT_EQ(big.read_response().status, 431);
  HttpConnection bad(server_->port());
  bad.send("NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(bad.read_response().status, 400);
  EXPECT_TRUE(bad.wait_closed());
}

// Framing that a proxy in front could read differently from serverd is refused and the connection closed,
// so the bytes after the header are never served as a second request (RFC 9112 sections 3.2, 5.2, 6).
TEST_F(HttpServerTest, AmbiguousFramingIsRefusedAndClosesTheConnection) {
  ServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);  // bounds the linger after each refusal
  start(options);
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string chunked_end = "0\r\n\r\n";
  struct Case {
    std::string head;  // the request line and headers, without the blank line
    std::string body;
    int status;
    const char* message;  // a part of it
  };
  const std::string post = "POST /echo HTTP/1.1\r\nHost: x\r\n";
  const Case cases[] = {
      {post + "Transfer-Encoding: gzip", smuggled, 501, "'gzip' is not supported"},
      {post + "Transfer-Encoding: chunked, chunked\r\nContent-Length: 5", chunked_end + smuggled, 400,
       "chunked more than once"},
      {post + "Transfer-Encoding: chunked, gzip\r\nContent-Length: 5", chunked_end + smuggled, 501, "not supported"},
      {post + "Transfer-Encoding: gzip, chunked", chunked_end + smuggled, 501, "not supported"},
      {post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", chunked_end + smuggled, 400,
       "Transfer-Encoding is repeated"},
      {post + "Transfer-Encoding: chunked\r\nContent-Length: 5", chunked_end + smuggled, 400, "Content-Length"},
      {post + "Content-Length: 5\r\nTransfer-Encoding: chunked", chunked_end + smuggled, 400, "Transfer-Encoding"},
      {post + "Transfer-Encoding: gzip\r\nContent-Length: 5", chunked_end + smuggled, 501, "not supported"},
      {post + "Content-Length: 5\r\nContent-Length: 5", chunked_end + smuggled, 400, "Content-Length"},
      {post + "Host: y\r\nContent-Length: 0", smuggled, 400, "more than one Host"},
      {post + "X-Folded: a\r\n b\r\nContent-Length: 0", smuggled, 400, "folded"},
      {"POST /echo HTTP/1.1\r\n Host: x\r\nContent-Length: 0", smuggled, 400, "folded"},
      {"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked", chunked_end + smuggled, 400, "HTTP/1.0"},
      {post + "Transfer-Encoding: chunked", "zz\r\n\r\n" + smuggled, 400, "Malformed"},  // a bad chunk size
  };
  for (const auto& c : cases) {
    HttpConnection connection(server_->port());
    connection.send(c.head + "\r\n\r\n" + c.body);
    const auto reply = connection.read_response();
    EXPECT_EQ(reply.status, c.status) << c.head;
    EXPECT_THAT(reply.body, HasSubstr(c.message)) << c.head;
    EXPECT_EQ(reply.header("connection"), "close") << c.head;
    EXPECT_TRUE(connection.wait_closed()) << c.head;
  }
  EXPECT_EQ(handled_.load(), 0);  // neither the refused requests nor what followed them were served
  // A plain chunked body (the coding's name is case-insensitive) still works and keeps the connection.
  HttpConnection c(server_->port());
  c.send(post + "Transfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n");
  const auto reply = c.read_response();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "POST /echo ok");
  EXPECT_EQ(reply.header("connection"), "keep-alive");
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimResponse) {
  start();
  HttpConnection c(server_->port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 100);
  c.send("data");
  EXPECT_EQ(c.read_response().body, "POST /echo data");
}

TEST_F(HttpServerTest, IdleAndSlowClientsAreDisconnected) {
  ServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);
  options.header_timeout = std::chrono::milliseconds(200);
  options.body_timeout = std::chrono::milliseconds(200);
  start(options);
  HttpConnection idle(server_->port());
  EXPECT_TRUE(idle.wait_closed());
  HttpConnection slow_header(server_->port());
  slow_header.send("GET /a HTTP/1.1\r\nHo");
  EXPECT_TRUE(slow_header.wait_closed());
  HttpConnection slow_body(server_->port());
  slow_body.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_TRUE(slow_body.wait_closed());
}

TEST_F(HttpServerTest, ManyConcurrentConnectionsOnTwoThreads) {
  ServerOptions options;
  options.io_threads = 2;
  start(options);
  constexpr int kConnections = 64;
  std::vector<std::unique_ptr<HttpConnection>> connections;
  for (int i = 0; i < kConnections; ++i) {
    connections.push_back(std::make_unique<HttpConnection>(server_->port()));
    connections.back()->send_request("GET", "/c" + std::to_string(i));
  }
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_EQ(connections[i]->read_response().body, "GET /c" + std::to_string(i) + " ");
  }
  EXPECT_EQ(server_->open_connections(), static_cast<std::size_t>(kConnections));
}

TEST_F(HttpServerTest, StreamsChunksWrittenFromAnotherThread) {
  start();
  HttpConnection c(server_->port());
  c.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  std::thread writer([exchange] {
    Response head;
    head.headers.push_back({"Content-Type", "text/event-stream"});
    exchange->start_stream(head);
    for (int i = 0; i < 3; ++i) exchange->write("data: " + std::to_string(i) + "\n\n");
    exchange->finish();
  });
  const auto head = c.read_response_header();
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("transfer-encoding"), "chunked");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.next_event(), std::to_string(i));
  EXPECT_EQ(c.next_event(), std::nullopt);
  writer.join();
  // The connection carries on.
  c.send_request("GET", "/after");
  EXPECT_EQ(c.read_response().body, "GET /after ");
}

TEST_F(HttpServerTest, ClientDisconnectAbortsThePendingExchange) {
  start();
  HttpConnection c(server_->port());
  c.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  std::promise<void> aborted;
  exchange->on_abort([&aborted] { aborted.set_value(); });
  exchange->start_stream({});
  exchange->write("data: 1\n\n");
  c.read_response_header();
  EXPECT_EQ(c.next_event(), "1");
  c.close();
  EXPECT_EQ(aborted.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  exchange->write("data: 2\n\n");  // ignored now
  exchange->finish();
  std::promise<void> late;
  exchange->on_abort([&late] { late.set_value(); });  // after the fact: runs at once
  EXPECT_EQ(late.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
}

TEST_F(HttpServerTest, GracefulShutdownFinishesExchangesInFlight) {
  start();
  HttpConnection busy(server_->port());
  busy.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  HttpConnection idle(server_->port());
  idle.send_request("GET", "/x");
  idle.read_response();

  std::thread stopper([this] { server_->shutdown(std::chrono::seconds(30)); });
  EXPECT_TRUE(idle.wait_closed());  // idle keep-alive connections close at once
  exchange->respond(text(200, "late"));
  const auto reply = busy.read_response();
  EXPECT_EQ(reply.body, "late");
  EXPECT_EQ(reply.header("connection"), "close");
  stopper.join();
  EXPECT_EQ(server_->exchanges_in_flight(), 0u);
}

TEST_F(HttpServerTest, ShutdownAbortsWhatOutlivesTheGracePeriod) {
  start();
  HttpConnection busy(server_->port());
  busy.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  std::promise<void> aborted;
  exchange->on_abort([&aborted] { aborted.set_value(); });
  server_->shutdown(std::chrono::milliseconds(50));
  EXPECT_EQ(aborted.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(busy.wait_closed());
  exchange->respond(text(200, "too late"));  // dropped, no crash
}

TEST_F(HttpServerTest, HandlerExceptionsBecome500) {
  server_ = std::make_unique<Server>(ServerOptions{},
                                     [](std::shared_ptr<Exchange>) -> void { throw std::runtime_error("boom"); });
  server_->start();
  const auto reply = http_request(server_->port(), "GET", "/");
  EXPECT_EQ(reply.status, 500);
  EXPECT_THAT(reply.body, HasSubstr("Internal server error"));
}

}  // namespace
}  // namespace serverd::http
