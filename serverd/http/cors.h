#pragma once

// CORS as Starlette's CORSMiddleware answers it, which vLLM's server installs with its --allowed-origins,
// --allowed-methods, --allowed-headers and --allow-credentials options (ServerOptions' fields of those
// names; max age 600 s). Only requests with an Origin header are touched.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/http/http_server.h"

namespace serverd::http {

class CorsPolicy {
 public:
  explicit CorsPolicy(const ServerOptions& options);

  // The answer to a preflight request (OPTIONS with Origin and Access-Control-Request-Method), which is
  // never handed to the handler: 200 "OK" when origin, method and every requested header are allowed, else
  // 400 "Disallowed CORS origin, method, headers" (those that failed). nullopt for any other request.
  std::optional<Response> preflight(const Request& request) const;

  // Adds what a response to any other request with an Origin header carries: Access-Control-Allow-Origin
  // ("*", or the origin itself with Vary: Origin when origins are listed or the request has a cookie) and
  // Access-Control-Allow-Credentials when allowed. Replaces the handler's own values of those.
  void add_response_headers(const Request& request, std::vector<Header>& headers) const;

 private:
  bool allowed_origin(std::string_view origin) const;

  std::vector<std::string> origins_;
  std::vector<std::string> methods_;
  std::vector<std::string> headers_;  // lower case, the CORS-safelisted ones included
  bool all_origins_;
  bool all_headers_;
  bool explicit_origin_;  // a preflight answer names the origin (with Vary: Origin) instead of "*"
  bool credentials_;
  std::vector<Header> preflight_headers_;  // what every preflight answer carries
};

}  // namespace serverd::http
