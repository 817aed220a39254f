#include "serverd/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/printable.h"

namespace serverd::http::detail {

namespace {

namespace ssl = boost::asio::ssl;

std::string quoted(const std::string& path) {
  return "'" + base::printable(path) + "'";
}

// OpenSSL's reasons for the last failure, oldest first ("PEM routines: no start line", "No such file or
// directory"), clearing its queue.
std::string openssl_reasons() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    std::string text;
    if (ERR_GET_LIB(code) == ERR_LIB_SYS) {
      text = std::strerror(ERR_GET_REASON(code));  // the errno of a failed open or read
    } else {
      const char* reason = ERR_reason_error_string(code);
      if (reason != nullptr && std::string_view(reason) == "system lib") continue;  // said by the errno above
      const char* library = ERR_lib_error_string(code);
      text = std::string(library ? library : "OpenSSL") + ": " +
             (reason ? reason : "error " + std::to_string(ERR_GET_REASON(code)));
    }
    if (out.find(text) == std::string::npos) out += (out.empty() ? "" : "; ") + text;
  }
  return out.empty() ? "no reason given" : out;
}

void check_combination(const ServerOptions& o) {
  if (o.ssl_cert_reqs < 0 || o.ssl_cert_reqs > 2) {
    throw std::invalid_argument("--ssl-cert-reqs is " + std::to_string(o.ssl_cert_reqs) +
                                "; it must be 0 (CERT_NONE: no client certificate), 1 (CERT_OPTIONAL) or 2 "
                                "(CERT_REQUIRED)");
  }
  if (o.ssl_certfile.empty()) {
    const char* orphan = !o.ssl_keyfile.empty()    ? "--ssl-keyfile"
                         : !o.ssl_ca_certs.empty() ? "--ssl-ca-certs"
                         : o.ssl_cert_reqs != 0    ? "--ssl-cert-reqs"
                                                   : nullptr;
    if (orphan) {
      throw std::invalid_argument(std::string(orphan) +
                                  " is set but --ssl-certfile is empty: TLS needs the server's certificate "
                                  "chain; set --ssl-certfile, or drop " +
                                  orphan + " for plain HTTP");
    }
    return;
  }
  if (o.ssl_cert_reqs != 0 && o.ssl_ca_certs.empty()) {
    throw std::invalid_argument("--ssl-cert-reqs is " + std::to_string(o.ssl_cert_reqs) +
                                ", which asks clients for a certificate, but --ssl-ca-certs is empty: give the CA "
                                "certificates to verify them against");
  }
  if (o.ssl_cert_reqs == 0 && !o.ssl_ca_certs.empty()) {
    throw std::invalid_argument(
        "--ssl-ca-certs is set but --ssl-cert-reqs is 0 (CERT_NONE), so no client "
        "certificate would be asked for: set --ssl-cert-reqs to 1 (optional) or 2 "
        "(required), or drop --ssl-ca-certs");
  }
}

}  // namespace

std::unique_ptr<ssl::context> make_tls_context(const ServerOptions& o) {
  check_combination(o);
  if (o.ssl_certfile.empty()) return nullptr;

  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // An encrypted key would make OpenSSL prompt on the terminal; failing names the file instead.
  SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });

  if (SSL_CTX_use_certificate_chain_file(ctx, o.ssl_certfile.c_str()) != 1) {
    throw std::runtime_error("--ssl-certfile " + quoted(o.ssl_certfile) +
                             ": cannot load a PEM certificate chain from it: " + openssl_reasons());
  }
  const std::string& key_file = o.ssl_keyfile.empty() ? o.ssl_certfile : o.ssl_keyfile;
  const char* key_option = o.ssl_keyfile.empty() ? "--ssl-certfile" : "--ssl-keyfile";
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // Loading the key also checks it against the certificate loaded before it.
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    throw std::runtime_error(
        std::string(key_option) + " " + quoted(key_file) +
        (mismatch ? ": the private key does not match the certificate in --ssl-certfile " + quoted(o.ssl_certfile)
                  : std::string(": cannot load an unencrypted PEM private key from it")) +
        ": " + openssl_reasons());
  }
  if (o.ssl_cert_reqs != 0) {
    if (SSL_CTX_load_verify_locations(ctx, o.ssl_ca_certs.c_str(), nullptr) != 1) {
      throw std::runtime_error("--ssl-ca-certs " + quoted(o.ssl_ca_certs) +
                               ": cannot load PEM CA certificates from it: " + openssl_reasons());
    }
    // CERT_OPTIONAL verifies a certificate the client sends; CERT_REQUIRED also refuses a client without one.
    // Resuming a session needs an id context once client certificates are verified; one server, one context.
    static constexpr unsigned char kSessionContext[] = "serverd";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
    SSL_CTX_set_verify(ctx, o.ssl_cert_reqs == 2 ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
                       nullptr);
  }
  return context;
}

}  // namespace serverd::http::detail
