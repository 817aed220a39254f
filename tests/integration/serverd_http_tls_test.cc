// serverd's HTTP server over TLS (vLLM's --ssl-certfile, --ssl-keyfile, --ssl-ca-certs, --ssl-cert-reqs),
// with certificates made fresh for each test: round trips and streams, client certificates optional and
// required, clients that fail the handshake or speak plain HTTP, the timeouts and closes that the TLS
// transport carries out itself, and start-up errors for files and options that cannot work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include "serverd/http/http_server.h"
#include "tests/support/serverd/echo_server.h"
#include "tests/support/serverd/http_test_client.h"
#include "tests/support/serverd/test_certificates.h"
#include "tests/support/temp_dir.h"

namespace serverd::http {
namespace {

using serverd_test::ClientOptions;
using serverd_test::http_request;
using serverd_test::HttpConnection;
using ::testing::HasSubstr;

class HttpTlsTest : public serverd_test::EchoServerTest {
 protected:
  ServerOptions tls_options() const {
    ServerOptions options;
    options.ssl_certfile = certificates_.server_certificate;
    options.ssl_keyfile = certificates_.server_key;
    return options;
  }
  // A client that verifies the server's certificate.
  ClientOptions client() const {
    return ClientOptions{.port = server_->port(), .tls = true, .ca_file = certificates_.ca_certificate};
  }
  ClientOptions client_with(const std::string& certificate, const std::string& key) const {
    auto options = client();
    options.certificate_file = certificate;
    options.key_file = key;
    return options;
  }
  // True when a request over `options` is refused during or right after the handshake (TLS 1.3 reports a
  // refused client certificate on the first read).
  bool refused(const ClientOptions& options) {
    try {
      HttpConnection c(options);
      c.send_request("GET", "/refused");
      c.read_response();
      return false;
    } catch (const std::runtime_error&) {
      return true;
    }
  }
  // Expects Server construction with `options` to throw E with every part of `expected` in its message.
  template <typename E>
  void expect_refusal(const ServerOptions& options, std::initializer_list<std::string> expected) {
    try {
      Server server(options, [](std::shared_ptr<Exchange>) {});
      ADD_FAILURE() << "the server started";
    } catch (const E& e) {
      for (const auto& part : expected) EXPECT_THAT(e.what(), HasSubstr(part));
    }
  }

  testing_support::TempDir dir_;
  serverd_test::TestCertificates certificates_ = serverd_test::write_test_certificates(dir_.path());
};

TEST_F(HttpTlsTest, RoundTripsOnOneVerifiedConnection) {
  start(tls_options());
  HttpConnection c(client());
  for (int i = 0; i < 3; ++i) {
    c.send_request("POST", "/echo?i=" + std::to_string(i), "secret");
    const auto reply = c.read_response();
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, "POST /echo?i=" + std::to_string(i) + " secret");
    EXPECT_EQ(reply.header("connection"), "keep-alive");
  }
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(HttpTlsTest, TheKeyMayBeInTheCertificateFile) {
  const auto combined = dir_ / "combined.pem";
  auto chain = testing_support::read_file(certificates_.server_certificate);
  const auto key = testing_support::read_file(certificates_.server_key);
  chain.insert(chain.end(), key.begin(), key.end());
  testing_support::write_file(combined, chain);
  ServerOptions options;
  options.ssl_certfile = combined.string();
  start(options);
  EXPECT_EQ(http_request(client(), "GET", "/one-file").body, "GET /one-file ");
}

TEST_F(HttpTlsTest, StreamsChunksOverTls) {
  start(tls_options());
  HttpConnection c(client());
  c.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  Response head;
  head.headers.push_back({"Content-Type", "text/event-stream"});
  exchange->start_stream(head);
  const auto header = c.read_response_header();
  EXPECT_EQ(header.header("transfer-encoding"), "chunked");
  for (int i = 0; i < 3; ++i) {
    exchange->write("data: " + std::to_string(i) + "\n\n");
    EXPECT_EQ(c.next_event(), std::to_string(i));  // each chunk arrives before the next is written
  }
  exchange->finish();
  EXPECT_EQ(c.next_event(), std::nullopt);
  c.send_request("GET", "/after");
  EXPECT_EQ(c.read_response().body, "GET /after ");
}

TEST_F(HttpTlsTest, AClientThatLeavesAbortsItsExchange) {
  start(tls_options());
  HttpConnection c(client());
  c.send_request("GET", "/park");
  const auto exchange = parked_.wait(0);
  ASSERT_NE(exchange, nullptr);
  std::promise<void> aborted;
  exchange->on_abort([&aborted] { aborted.set_value(); });
  c.close();
  EXPECT_EQ(aborted.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST_F(HttpTlsTest, ConnectionCloseEndsWithCloseNotify) {
  start(tls_options());
  HttpConnection c(client());
  c.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const auto reply = c.read_response();
  EXPECT_EQ(reply.body, "GET /a ");
  EXPECT_EQ(reply.header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  EXPECT_TRUE(c.closed_with_close_notify());
}

TEST_F(HttpTlsTest, ARefusedRequestIsAnsweredThenTheConnectionCloses) {
  auto options = tls_options();
  options.max_body_bytes = 1024;
  options.idle_timeout = std::chrono::milliseconds(200);  // bounds the linger
  start(options);
  HttpConnection c(client());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" + std::string(2000, 'x'));
  const auto reply = c.read_response();
  EXPECT_EQ(reply.status, 413);
  EXPECT_EQ(reply.header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  EXPECT_TRUE(c.closed_with_close_notify());
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpTlsTest, ASilentClientIsClosedAtTheHeaderTimeoutAndAnIdleOneAtTheIdleTimeout) {
  auto options = tls_options();
  options.header_timeout = std::chrono::milliseconds(200);
  options.idle_timeout = std::chrono::milliseconds(200);
  start(options);
  HttpConnection silent(server_->port());  // TCP only: it never starts the handshake
  EXPECT_TRUE(silent.wait_closed());
  HttpConnection idle(client());
  EXPECT_TRUE(idle.wait_closed());
}

TEST_F(HttpTlsTest, PlainHttpOnTheTlsPortClosesThatConnectionOnly) {
  auto options = tls_options();
  options.verbose = true;
  start(options);
  ::testing::internal::CaptureStderr();
  HttpConnection plain(server_->port());
  plain.send_request("GET", "/plain");
  EXPECT_TRUE(plain.wait_closed());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("serverd: TLS handshake with 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("failed: "));
  EXPECT_EQ(handled_.load(), 0);
  EXPECT_EQ(http_request(client(), "GET", "/still").body, "GET /still ");
}

TEST_F(HttpTlsTest, ARequiredClientCertificateMustBeSentAndSignedByTheCa) {
  auto options = tls_options();
  options.ssl_ca_certs = certificates_.ca_certificate;
  options.ssl_cert_reqs = 2;
  start(options);
  EXPECT_TRUE(refused(client()));
  EXPECT_TRUE(refused(client_with(certificates_.stranger_certificate, certificates_.stranger_key)));
  EXPECT_EQ(handled_.load(), 0);
  EXPECT_EQ(http_request(client_with(certificates_.client_certificate, certificates_.client_key), "GET", "/mtls").body,
            "GET /mtls ");
}

TEST_F(HttpTlsTest, AnOptionalClientCertificateIsVerifiedWhenSent) {
  auto options = tls_options();
  options.ssl_ca_certs = certificates_.ca_certificate;
  options.ssl_cert_reqs = 1;
  start(options);
  EXPECT_EQ(http_request(client(), "GET", "/anonymous").body, "GET /anonymous ");
  EXPECT_TRUE(refused(client_with(certificates_.stranger_certificate, certificates_.stranger_key)));
  EXPECT_EQ(http_request(client_with(certificates_.client_certificate, certificates_.client_key), "GET", "/known").body,
            "GET /known ");
}

TEST_F(HttpTlsTest, TlsOnAUnixSocket) {
  auto options = tls_options();
  options.uds = (dir_ / "tls.sock").string();
  start(options);
  auto c = client();
  c.uds = options.uds;
  EXPECT_EQ(http_request(c, "GET", "/uds").body, "GET /uds ");
}

TEST_F(HttpTlsTest, FilesThatDoNotLoadStopStartUpNamingTheFileAndOpenSslsReason) {
  const auto garbage = dir_ / "garbage.pem";
  testing_support::write_file(garbage, "not a certificate\n");
  const auto missing = (dir_ / "missing.pem").string();

  auto options = tls_options();
  options.ssl_certfile = garbage.string();
  expect_refusal<std::runtime_error>(options, {"--ssl-certfile '" + garbage.string() + "'", "no start line"});
  options.ssl_certfile = missing;
  expect_refusal<std::runtime_error>(options, {"--ssl-certfile '" + missing + "'", "No such file"});

  options = tls_options();
  options.ssl_keyfile = garbage.string();
  expect_refusal<std::runtime_error>(options, {"--ssl-keyfile '" + garbage.string() + "'", "private key"});
  options.ssl_keyfile = certificates_.client_key;  // another certificate's key
  expect_refusal<std::runtime_error>(options, {"--ssl-keyfile '" + certificates_.client_key + "'",
                                               "does not match the certificate", "key values mismatch"});

  options = tls_options();
  options.ssl_ca_certs = garbage.string();
  options.ssl_cert_reqs = 2;
  expect_refusal<std::runtime_error>(options, {"--ssl-ca-certs '" + garbage.string() + "'"});
}

TEST_F(HttpTlsTest, OptionCombinationsThatCannotWorkAreRefusedByName) {
  ServerOptions key_only;
  key_only.ssl_keyfile = certificates_.server_key;
  expect_refusal<std::invalid_argument>(key_only, {"--ssl-keyfile is set but --ssl-certfile is empty"});

  ServerOptions ca_only;
  ca_only.ssl_ca_certs = certificates_.ca_certificate;
  ca_only.ssl_cert_reqs = 2;
  expect_refusal<std::invalid_argument>(ca_only, {"--ssl-ca-certs is set but --ssl-certfile is empty"});

  auto options = tls_options();
  options.ssl_cert_reqs = 3;
  expect_refusal<std::invalid_argument>(options, {"--ssl-cert-reqs is 3", "0 (CERT_NONE", "2 (CERT_REQUIRED)"});
  options.ssl_cert_reqs = 2;
  expect_refusal<std::invalid_argument>(options, {"--ssl-cert-reqs is 2", "--ssl-ca-certs is empty"});
  options.ssl_cert_reqs = 0;
  options.ssl_ca_certs = certificates_.ca_certificate;
  expect_refusal<std::invalid_argument>(options, {"--ssl-ca-certs is set but --ssl-cert-reqs is 0"});
}

}  // namespace
}  // namespace serverd::http
