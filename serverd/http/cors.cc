#include "serverd/http/cors.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "serverd/http/request_framing.h"

namespace serverd::http {

namespace {

// What "*" in allowed_methods stands for, and the request headers a browser may always send.
constexpr std::string_view kAllMethods[] = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"};
constexpr std::string_view kSafelistedHeaders[] = {"Accept", "Accept-Language", "Content-Language", "Content-Type"};
constexpr std::string_view kMaxAgeSeconds = "600";

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string joined(const auto& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Sets a header, replacing every value it had.
void set_header(std::vector<Header>& headers, std::string_view name, std::string value) {
  std::erase_if(headers, [&](const Header& h) { return ascii_iequals(h.name, name); });
  headers.push_back({std::string(name), std::move(value)});
}

// Names Origin in Vary after what is there already.
void vary_on_origin(std::vector<Header>& headers) {
  const auto existing =
      std::find_if(headers.begin(), headers.end(), [](const Header& h) { return ascii_iequals(h.name, "vary"); });
  set_header(headers, "Vary", existing == headers.end() ? "Origin" : existing->value + ", Origin");
}

}  // namespace

CorsPolicy::CorsPolicy(const ServerOptions& options)
    : origins_(options.allowed_origins),
      all_origins_(contains(options.allowed_origins, "*")),
      all_headers_(contains(options.allowed_headers, "*")),
      explicit_origin_(!all_origins_ || options.allow_credentials),
      credentials_(options.allow_credentials) {
  if (contains(options.allowed_methods, "*")) {
    methods_.assign(std::begin(kAllMethods), std::end(kAllMethods));
  } else {
    methods_ = options.allowed_methods;
  }
  std::set<std::string> header_names(std::begin(kSafelistedHeaders), std::end(kSafelistedHeaders));
  header_names.insert(options.allowed_headers.begin(), options.allowed_headers.end());
  for (const auto& name : header_names) headers_.push_back(lowercase(name));

  // A listed origin, or any origin with credentials, is echoed per request, so caches must key on Origin.
  if (explicit_origin_) {
    preflight_headers_.push_back({"Vary", "Origin"});
  } else {
    preflight_headers_.push_back({"Access-Control-Allow-Origin", "*"});
  }
  preflight_headers_.push_back({"Access-Control-Allow-Methods", joined(methods_, ", ")});
  preflight_headers_.push_back({"Access-Control-Max-Age", std::string(kMaxAgeSeconds)});
  if (!all_headers_) preflight_headers_.push_back({"Access-Control-Allow-Headers", joined(header_names, ", ")});
  if (credentials_) preflight_headers_.push_back({"Access-Control-Allow-Credentials", "true"});
}

bool CorsPolicy::allowed_origin(std::string_view origin) const {
  return all_origins_ || contains(origins_, origin);
}

std::optional<Response> CorsPolicy::preflight(const Request& request) const {
  if (request.method != "OPTIONS") return std::nullopt;
  const auto origin = request.header("origin");
  const auto method = request.header("access-control-request-method");
  if (!origin || !method) return std::nullopt;
  const auto requested_headers = request.header("access-control-request-headers");

  Response response;
  response.headers = preflight_headers_;
  std::vector<std::string_view> failures;
  if (!allowed_origin(*origin)) {
    failures.push_back("origin");
  } else if (explicit_origin_) {
    set_header(response.headers, "Access-Control-Allow-Origin", std::string(*origin));
  }
  if (!contains(methods_, *method)) failures.push_back("method");
  if (requested_headers && all_headers_) {
    // Everything is allowed, and "*" is no wildcard once credentials are, so the request's list is echoed.
    set_header(response.headers, "Access-Control-Allow-Headers", std::string(*requested_headers));
  } else if (requested_headers) {
    for (std::size_t start = 0;;) {
      const std::size_t comma = requested_headers->find(',', start);
      if (!contains(headers_, lowercase(trimmed(requested_headers->substr(start, comma - start))))) {
        failures.push_back("headers");
        break;
      }
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  response.status = failures.empty() ? 200 : 400;
  response.body = failures.empty() ? "OK" : "Disallowed CORS " + joined(failures, ", ");
  response.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  return response;
}

void CorsPolicy::add_response_headers(const Request& request, std::vector<Header>& headers) const {
  const auto origin = request.header("origin");
  if (!origin) return;
  if (all_origins_) set_header(headers, "Access-Control-Allow-Origin", "*");
  if (credentials_) set_header(headers, "Access-Control-Allow-Credentials", "true");
  // A browser ignores "*" on a request that carried cookies; a listed origin is echoed as it came.
  const bool echo = all_origins_ ? request.header("cookie").has_value() : allowed_origin(*origin);
  if (echo) {
    set_header(headers, "Access-Control-Allow-Origin", std::string(*origin));
    vary_on_origin(headers);
  }
}

}  // namespace serverd::http
