// serverd's HTTP/1.1 server over loopback: keep-alive, limits, timeouts, pipelining, 100-continue, chunked
// streaming from other threads, client-disconnect detection and graceful shutdown; a Unix socket listener,
// CORS as Starlette answers it, and the root path. TLS: serverd_http_tls_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "serverd/http/http_server.h"
#include "tests/support/serverd/echo_server.h"
#include "tests/support/serverd/http_test_client.h"
#include "tests/support/temp_dir.h"

namespace serverd::http {
namespace {

using serverd_test::ClientOptions;
using serverd_test::http_request;
using serverd_test::HttpConnection;
using serverd_test::text;
using ::testing::HasSubstr;

class HttpServerTest : public serverd_test::EchoServerTest {};

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
  // The refusal carries CORS headers, so a browser's script can read it.
  const auto cross_origin =
      http_request(server_->port(), "POST", "/echo", std::string(2000, 'x'), {"Origin: https://app.example"});
  EXPECT_EQ(cross_origin.status, 413);
  EXPECT_EQ(cross_origin.header("access-control-allow-origin"), "*");
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

// ---- Unix domain socket (vLLM's --uds) ----

// A socket file nobody listens on, as a server that died leaves behind.
void leave_stale_socket(const std::filesystem::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
  ASSERT_TRUE(std::filesystem::is_socket(path));
}

TEST_F(HttpServerTest, ServesOnAUnixSocketAndRemovesItAtShutdown) {
  testing_support::TempDir dir;
  const auto path = dir / "serverd.sock";
  ServerOptions options;
  options.uds = path.string();
  start(options);
  EXPECT_EQ(server_->port(), 0u);
  // As uvicorn leaves it: any local user may connect, as to a TCP port.
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::group_write |
                std::filesystem::perms::others_read | std::filesystem::perms::others_write);
  HttpConnection c(ClientOptions{.uds = path.string()});
  for (int i = 0; i < 2; ++i) {  // keep-alive works as over TCP
    c.send_request("POST", "/echo", "over uds");
    EXPECT_EQ(c.read_response().body, "POST /echo over uds");
  }
  c.close();
  server_->shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path)));
}

TEST_F(HttpServerTest, AStaleSocketFileIsReplacedButNothingElse) {
  testing_support::TempDir dir;
  const auto stale = dir / "stale.sock";
  leave_stale_socket(stale);
  ServerOptions options;
  options.uds = stale.string();
  start(options);
  EXPECT_EQ(http_request(ClientOptions{.uds = stale.string()}, "GET", "/a").body, "GET /a ");

  // A live server's socket is not taken over.
  options.uds = stale.string();
  try {
    Server second(options, [](std::shared_ptr<Exchange>) {});
    ADD_FAILURE() << "a second server took the live socket";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("another server is listening on it"));
    EXPECT_THAT(e.what(), HasSubstr(stale.string()));
  }
  EXPECT_EQ(http_request(ClientOptions{.uds = stale.string()}, "GET", "/b").body, "GET /b ");

  // Nor is a file that is not a socket.
  const auto regular = dir / "notes.txt";
  testing_support::write_file(regular, "keep me");
  options.uds = regular.string();
  try {
    Server refused(options, [](std::shared_ptr<Exchange>) {});
    ADD_FAILURE() << "a regular file was replaced";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(regular.string() + "' exists and is not a socket"));
  }
  EXPECT_TRUE(std::filesystem::is_regular_file(regular));
}

TEST_F(HttpServerTest, AUnixSocketPathTooLongForSunPathIsRefusedByName) {
  ServerOptions options;
  options.uds = "/tmp/" + std::string(sizeof(sockaddr_un::sun_path), 'x');
  try {
    Server refused(options, [](std::shared_ptr<Exchange>) {});
    ADD_FAILURE() << "the long path was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("uds path '" + options.uds + "' is " + std::to_string(options.uds.size()) +
                                    " bytes; a Unix socket path holds at most " +
                                    std::to_string(sizeof(sockaddr_un::sun_path) - 1)));
  }
}

// ---- CORS, as Starlette's CORSMiddleware with vLLM's defaults ----

constexpr const char* kOrigin = "Origin: https://app.example";

TEST_F(HttpServerTest, PreflightWithTheDefaultsAllowsEverythingWithoutTheHandler) {
  start();
  HttpConnection c(server_->port());
  c.send_request(
      "OPTIONS", "/v1/chat/completions", {},
      {kOrigin, "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: authorization, x-custom"});
  const auto reply = c.read_response();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "OK");
  EXPECT_EQ(reply.header("access-control-allow-origin"), "*");
  EXPECT_EQ(reply.header("access-control-allow-methods"), "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_EQ(reply.header("access-control-allow-headers"), "authorization, x-custom");  // echoed
  EXPECT_EQ(reply.header("access-control-max-age"), "600");
  EXPECT_FALSE(reply.has_header("vary"));
  EXPECT_FALSE(reply.has_header("access-control-allow-credentials"));
  EXPECT_EQ(reply.header("connection"), "keep-alive");
  // Without requested headers there is no Allow-Headers to echo.
  c.send_request("OPTIONS", "/v1/models", {}, {kOrigin, "Access-Control-Request-Method: GET"});
  const auto bare = c.read_response();
  EXPECT_EQ(bare.status, 200);
  EXPECT_FALSE(bare.has_header("access-control-allow-headers"));
  EXPECT_EQ(handled_.load(), 0);
  c.send_request("GET", "/after");
  EXPECT_EQ(c.read_response().body, "GET /after ");
}

TEST_F(HttpServerTest, PreflightAgainstListedOriginsMethodsAndHeaders) {
  ServerOptions options;
  options.allowed_origins = {"https://app.example"};
  options.allowed_methods = {"GET", "POST"};
  options.allowed_headers = {"X-Api-Key"};
  options.allow_credentials = true;
  start(options);
  const auto preflight = [&](std::string origin, std::string method, std::string headers) {
    std::vector<std::string> lines = {"Origin: " + origin, "Access-Control-Request-Method: " + method};
    if (!headers.empty()) lines.push_back("Access-Control-Request-Headers: " + headers);
    return http_request(server_->port(), "OPTIONS", "/v1/completions", {}, lines);
  };
  const auto allowed = preflight("https://app.example", "POST", "x-api-key, Content-Type");
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.body, "OK");
  EXPECT_EQ(allowed.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(allowed.header("vary"), "Origin");
  EXPECT_EQ(allowed.header("access-control-allow-methods"), "GET, POST");
  EXPECT_EQ(allowed.header("access-control-allow-headers"),
            "Accept, Accept-Language, Content-Language, Content-Type, X-Api-Key");
  EXPECT_EQ(allowed.header("access-control-max-age"), "600");
  EXPECT_EQ(allowed.header("access-control-allow-credentials"), "true");

  struct Refused {
    std::string origin, method, headers, text;
  };
  const Refused refused[] = {
      {"https://evil.example", "POST", "", "Disallowed CORS origin"},
      {"https://app.example", "DELETE", "", "Disallowed CORS method"},
      {"https://app.example", "POST", "x-api-key, x-other", "Disallowed CORS headers"},
      {"https://evil.example", "PUT", "x-other", "Disallowed CORS origin, method, headers"},
  };
  for (const auto& r : refused) {
    const auto reply = preflight(r.origin, r.method, r.headers);
    EXPECT_EQ(reply.status, 400) << r.text;
    EXPECT_EQ(reply.body, r.text);
    EXPECT_EQ(reply.header("vary"), "Origin") << r.text;
    // A refused origin is not named back.
    EXPECT_EQ(reply.has_header("access-control-allow-origin"), r.origin == "https://app.example") << r.text;
  }
  // Any origin with credentials: the origin is named, not "*".
  options.allowed_origins = {"*"};
  server_->shutdown(std::chrono::milliseconds(0));
  start(options);
  const auto any = preflight("https://other.example", "GET", "");
  EXPECT_EQ(any.status, 200);
  EXPECT_EQ(any.header("access-control-allow-origin"), "https://other.example");
  EXPECT_EQ(any.header("vary"), "Origin");
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpServerTest, ResponsesToCrossOriginRequestsCarryAllowOrigin) {
  start();
  const auto plain = http_request(server_->port(), "GET", "/a", {}, {kOrigin});
  EXPECT_EQ(plain.header("access-control-allow-origin"), "*");
  EXPECT_FALSE(plain.has_header("vary"));
  EXPECT_FALSE(http_request(server_->port(), "GET", "/a").has_header("access-control-allow-origin"));
  // A request with cookies is answered with its own origin: browsers ignore "*" there.
  const auto cookie = http_request(server_->port(), "GET", "/vary", {}, {kOrigin, "Cookie: s=1"});
  EXPECT_EQ(cookie.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(cookie.header("vary"), "Accept-Encoding, Origin");
  // OPTIONS without Access-Control-Request-Method is no preflight: the handler answers it.
  const auto options_request = http_request(server_->port(), "OPTIONS", "/a", {}, {kOrigin});
  EXPECT_EQ(options_request.body, "OPTIONS /a ");
  EXPECT_EQ(options_request.header("access-control-allow-origin"), "*");

  // Streams too.
  HttpConnection c(server_->port());
  c.send_request("GET", "/park", {}, {kOrigin});
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  exchange->start_stream({});
  exchange->write("data: 1\n\n");
  exchange->finish();
  EXPECT_EQ(c.read_response_header().header("access-control-allow-origin"), "*");
  EXPECT_EQ(c.next_event(), "1");
}

TEST_F(HttpServerTest, ListedOriginsAreEchoedWithVaryAndOthersGetNoAllowOrigin) {
  ServerOptions options;
  options.allowed_origins = {"https://app.example"};
  options.allow_credentials = true;
  start(options);
  const auto listed = http_request(server_->port(), "GET", "/vary", {}, {kOrigin});
  EXPECT_EQ(listed.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(listed.header("vary"), "Accept-Encoding, Origin");
  EXPECT_EQ(listed.header("access-control-allow-credentials"), "true");
  const auto other = http_request(server_->port(), "GET", "/a", {}, {"Origin: https://evil.example"});
  EXPECT_EQ(other.status, 200);
  EXPECT_FALSE(other.has_header("access-control-allow-origin"));
  EXPECT_FALSE(other.has_header("vary"));
}

// ---- root path (vLLM's --root-path) ----

TEST_F(HttpServerTest, TheRootPathIsStrippedAndUnprefixedPathsStillWork) {
  ServerOptions options;
  options.root_path = "/api";
  start(options);
  const std::pair<const char*, const char*> cases[] = {
      {"/api/v1/models?x=1", "/v1/models?x=1"},
      {"/v1/models", "/v1/models"},
      {"/api", "/"},
      {"/api?x=1", "/?x=1"},
      {"/apiary/v1", "/apiary/v1"},  // not under /api
      {"/api/api/v1", "/api/v1"},    // stripped once
  };
  HttpConnection c(server_->port());
  for (const auto& [sent, seen] : cases) {
    c.send_request("GET", sent);
    EXPECT_EQ(c.read_response().body, std::string("GET ") + seen + " ") << sent;
  }
}

TEST_F(HttpServerTest, ARootPathThatCouldNeverMatchIsRefusedByName) {
  for (const char* root_path : {"api", "/api/", "/", "/api?x"}) {
    ServerOptions options;
    options.root_path = root_path;
    try {
      Server refused(options, [](std::shared_ptr<Exchange>) {});
      ADD_FAILURE() << root_path << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("root_path '") + root_path + "' must begin with '/'"));
    }
  }
}

}  // namespace
}  // namespace serverd::http
