#include "fetchd/transfer/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "fetchd/request/fetch_error.h"

namespace fetchd::transfer {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

void global_init() {
  // libcurl's global state must be set up once before any handle, and before threads race to it.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct UrlHandle {
  CURLU* h = curl_url();
  ~UrlHandle() { curl_url_cleanup(h); }
  std::string get(CURLUPart part, unsigned flags = 0) const {
    char* out = nullptr;
    if (curl_url_get(h, part, &out, flags) != CURLUE_OK) return {};
    std::string text(out);
    curl_free(out);
    return text;
  }
};

}  // namespace

void HttpHeaders::add(std::string name, std::string value) {
  entries_.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> HttpHeaders::get(std::string_view name) const {
  for (const auto& [k, v] : entries_) {
    if (iequals(k, name)) return v;
  }
  return std::nullopt;
}

std::vector<std::string> HttpHeaders::get_all(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) {
    if (iequals(k, name)) out.push_back(v);
  }
  return out;
}

struct HttpClient::Impl {
  CURL* curl = nullptr;
  const CancelToken* cancel = nullptr;

  // Per-request state, reset by perform().
  HttpResult* result = nullptr;
  const BodySink* sink = nullptr;
  std::size_t max_collected = 0;
  bool headers_delivered = false;
  TransferFailure failure = TransferFailure::None;
  std::chrono::milliseconds stall_timeout{0};
  std::chrono::steady_clock::time_point last_progress;
  curl_off_t last_bytes = -1;

  bool deliver_headers() {
    if (headers_delivered) return true;
    headers_delivered = true;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    result->response.status = status;
    if (sink == nullptr) {
      // Collecting: one allocation for an announced body instead of a series of doublings and copies.
      curl_off_t length = -1;
      curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (length > 0 && static_cast<std::uint64_t>(length) <= max_collected) {
        result->response.body.reserve(static_cast<std::size_t>(length));
      }
    }
    if (sink != nullptr && sink->on_headers && !sink->on_headers(result->response)) {
      failure = TransferFailure::Refused;
      return false;
    }
    return true;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* self_ptr) {
    auto* self = static_cast<Impl*>(self_ptr);
    const std::string_view line(data, size * count);
    if (line.starts_with("HTTP/")) {
      self->result->response.headers.clear();  // a new response (after 100 Continue) starts afresh
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
      self->result->response.headers.add(std::string(trim(line.substr(0, colon))),
                                         std::string(trim(line.substr(colon + 1))));
    }
    return size * count;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self_ptr) {
    auto* self = static_cast<Impl*>(self_ptr);
    const std::size_t n = size * count;
    if (!self->deliver_headers()) return 0;
    self->result->body_bytes += n;
    if (self->sink != nullptr) {
      if (!self->sink->on_data(std::as_bytes(std::span(data, n)))) {
        self->failure = TransferFailure::Refused;
        return 0;
      }
      return n;
    }
    auto& body = self->result->response.body;
    if (body.size() + n > self->max_collected) {
      self->failure = TransferFailure::TooLarge;
      return 0;
    }
    body.append(data, n);
    return n;
  }

  // Called by libcurl about once a second and on every chunk: cancellation and stall detection.
  static int on_progress(void* self_ptr, curl_off_t, curl_off_t now_bytes, curl_off_t, curl_off_t) {
    auto* self = static_cast<Impl*>(self_ptr);
    if (self->cancel != nullptr && self->cancel->cancelled()) {
      self->failure = TransferFailure::Cancelled;
      return 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now_bytes != self->last_bytes) {
      self->last_bytes = now_bytes;
      self->last_progress = now;
    } else if (now - self->last_progress > self->stall_timeout) {
      self->failure = TransferFailure::Stalled;
      return 1;
    }
    return 0;
  }
};

HttpClient::HttpClient(const CancelToken* cancel) : impl_(std::make_unique<Impl>()) {
  global_init();
  impl_->curl = curl_easy_init();
  impl_->cancel = cancel;
  if (impl_->curl == nullptr) throw std::runtime_error("curl_easy_init failed");
}

HttpClient::~HttpClient() {
  curl_easy_cleanup(impl_->curl);
}

HttpResult HttpClient::perform(const HttpRequest& request, const BodySink* sink, std::size_t max_collected_body) {
  HttpResult result;
  Impl& s = *impl_;
  s.result = &result;
  s.sink = sink;
  s.max_collected = max_collected_body;
  s.headers_delivered = false;
  s.failure = TransferFailure::None;
  s.stall_timeout = request.stall_timeout;
  s.last_progress = std::chrono::steady_clock::now();
  s.last_bytes = -1;

  // Credentials travel only as headers the caller chose for an origin, never inside a URL (libcurl would
  // turn userinfo into Basic authentication for whichever host the URL names).
  if (has_userinfo(request.url)) {
    throw FetchError(ErrorKind::Usage, "refusing to request a URL that carries a user name or password (" +
                                           url_origin(request.url) + "); give credentials as HF_TOKEN");
  }
  CURL* c = s.curl;
  curl_easy_reset(c);  // keeps the connection cache, clears every option
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "fetchd/0.1");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);  // fewer, larger reads on fast links
  if (request.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept-Encoding: identity");  // sizes and hashes are of raw bytes
  for (const auto& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &Impl::on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Impl::on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &Impl::on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);

  const CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (code == CURLE_OK) {
    s.deliver_headers();  // a response without a body still reaches on_headers
  } else if (s.failure == TransferFailure::None) {
    s.failure = TransferFailure::Network;
    result.error = curl_easy_strerror(code);
  }
  if (result.response.status == 0) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &result.response.status);
  result.failure = s.failure;
  s.result = nullptr;
  s.sink = nullptr;
  return result;
}

std::optional<std::string> find_link(const HttpHeaders& headers, std::string_view rel) {
  const std::string quoted = "rel=\"" + std::string(rel) + "\"";
  const std::string bare = "rel=" + std::string(rel);
  for (const auto& value : headers.get_all("Link")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const auto open = rest.find('<');
      const auto close = rest.find('>', open);
      if (open == std::string_view::npos || close == std::string_view::npos) break;
      const auto target = rest.substr(open + 1, close - open - 1);
      const auto next = rest.find('<', close);
      const auto params = rest.substr(close, next == std::string_view::npos ? std::string_view::npos : next - close);
      for (std::size_t at = params.find(';'); at != std::string_view::npos; at = params.find(';', at + 1)) {
        auto param = trim(params.substr(at + 1, params.find(';', at + 1) - at - 1));
        while (!param.empty() && param.back() == ',') param.remove_suffix(1);
        if (param == quoted || param == bare) return std::string(target);
      }
      if (next == std::string_view::npos) break;
      rest = rest.substr(next);
    }
  }
  return std::nullopt;
}

bool curl_supports_https() {
  global_init();
  const auto* info = curl_version_info(CURLVERSION_NOW);
  return info != nullptr && (info->features & CURL_VERSION_SSL) != 0;
}

std::string resolve_url(std::string_view base, std::string_view location) {
  UrlHandle url;
  if (curl_url_set(url.h, CURLUPART_URL, std::string(base).c_str(), 0) != CURLUE_OK) return std::string(location);
  // With a base already set, libcurl resolves a relative reference per RFC 3986.
  if (curl_url_set(url.h, CURLUPART_URL, std::string(location).c_str(), 0) != CURLUE_OK) return {};
  // A target's userinfo would become an Authorization header for whatever host it names: dropped.
  curl_url_set(url.h, CURLUPART_USER, nullptr, 0);
  curl_url_set(url.h, CURLUPART_PASSWORD, nullptr, 0);
  curl_url_set(url.h, CURLUPART_OPTIONS, nullptr, 0);
  return url.get(CURLUPART_URL);
}

bool has_userinfo(std::string_view text) {
  UrlHandle url;
  if (curl_url_set(url.h, CURLUPART_URL, std::string(text).c_str(), 0) != CURLUE_OK) return false;
  return !url.get(CURLUPART_USER).empty() || !url.get(CURLUPART_PASSWORD).empty() ||
         !url.get(CURLUPART_OPTIONS).empty();
}

std::string url_origin(std::string_view text) {
  UrlHandle url;
  if (curl_url_set(url.h, CURLUPART_URL, std::string(text).c_str(), 0) != CURLUE_OK) return {};
  std::string origin =
      url.get(CURLUPART_SCHEME) + "://" + url.get(CURLUPART_HOST) + ":" + url.get(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  std::transform(origin.begin(), origin.end(), origin.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return origin;
}

}  // namespace fetchd::transfer
