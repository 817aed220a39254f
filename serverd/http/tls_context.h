#pragma once

// The server side of TLS from ServerOptions' ssl_* fields (vLLM's --ssl-keyfile, --ssl-certfile,
// --ssl-ca-certs, --ssl-cert-reqs), through OpenSSL. Internal to serverd/http.

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <algorithm>
#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "serverd/http/http_server.h"

namespace serverd::http::detail {

// nullptr when ssl_certfile is empty (plain HTTP). Throws std::invalid_argument for a combination of the
// options that cannot work, naming them, and std::runtime_error naming the file and OpenSSL's reason when a
// certificate or key does not load or the key does not match the certificate.
std::unique_ptr<boost::asio::ssl::context> make_tls_context(const ServerOptions& options);

}  // namespace serverd::http::detail
