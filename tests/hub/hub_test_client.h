#pragma once

// A small libcurl client for the test hub's own tests: one request at a time, no redirects followed, every
// request bounded in time, headers collected with lower-case names.

#include <curl/curl.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace testing_support {

struct RequestOptions {
  bool head = false;
  std::string method;                // another method than GET or HEAD
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when not empty (with `method` "POST", say)
  long timeout_ms = 15000;           // every request is bounded, so a hub bug fails a test instead of hanging CI
  std::function<bool(std::size_t received)> on_body;  // after each piece; false aborts the transfer
};

struct HttpResult {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::multimap<std::string, std::string> headers;  // lower-case names
  std::string body;

  std::string header(const std::string& lower_case_name) const {
    const auto found = headers.find(lower_case_name);
    return found == headers.end() ? std::string() : found->second;
  }
  bool has_header(const std::string& lower_case_name) const { return headers.contains(lower_case_name); }
};

inline std::string trim_header_value(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// One easy handle: requests made through the same client reuse its connection (keep-alive).
class CurlClient {
 public:
  CurlClient() : handle_(curl_easy_init()) {
    if (handle_ == nullptr) throw std::runtime_error("curl_easy_init failed");
  }
  ~CurlClient() { curl_easy_cleanup(handle_); }
  CurlClient(const CurlClient&) = delete;
  CurlClient& operator=(const CurlClient&) = delete;

  HttpResult request(const std::string& url, const RequestOptions& options = {}) {
    HttpResult result;
    Transfer transfer{&result, &options};
    curl_easy_reset(handle_);
    curl_easy_setopt(handle_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle_, CURLOPT_FOLLOWLOCATION, 0L);  // the tests look at every redirect themselves
    curl_easy_setopt(handle_, CURLOPT_TIMEOUT_MS, options.timeout_ms);
    curl_easy_setopt(handle_, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (options.head) curl_easy_setopt(handle_, CURLOPT_NOBODY, 1L);
    if (!options.method.empty()) curl_easy_setopt(handle_, CURLOPT_CUSTOMREQUEST, options.method.c_str());
    if (!options.body.empty()) {
      curl_easy_setopt(handle_, CURLOPT_POSTFIELDSIZE, static_cast<long>(options.body.size()));
      curl_easy_setopt(handle_, CURLOPT_POSTFIELDS, options.body.c_str());
    }
    curl_slist* headers = nullptr;
    for (const std::string& header : options.headers) headers = curl_slist_append(headers, header.c_str());
    curl_easy_setopt(handle_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle_, CURLOPT_HEADERFUNCTION, &CurlClient::on_header);
    curl_easy_setopt(handle_, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(handle_, CURLOPT_WRITEFUNCTION, &CurlClient::on_body);
    curl_easy_setopt(handle_, CURLOPT_WRITEDATA, &transfer);
    result.code = curl_easy_perform(handle_);
    curl_easy_getinfo(handle_, CURLINFO_RESPONSE_CODE, &result.status);
    curl_slist_free_all(headers);
    return result;
  }

  // Connections this handle opened for its last request (0 when it reused one).
  long connections_opened_by_last_request() const {
    long count = -1;
    curl_easy_getinfo(handle_, CURLINFO_NUM_CONNECTS, &count);
    return count;
  }

 private:
  struct Transfer {
    HttpResult* result;
    const RequestOptions* options;
  };

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    const std::string line(data, size * count);
    if (line.starts_with("HTTP/")) {
      transfer->result->headers.clear();
    } else if (const std::size_t colon = line.find(':'); colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      transfer->result->headers.emplace(name, trim_header_value(line.substr(colon + 1)));
    }
    return size * count;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    transfer->result->body.append(data, size * count);
    if (transfer->options->on_body && !transfer->options->on_body(transfer->result->body.size())) return 0;
    return size * count;
  }

  CURL* handle_;
};

HttpResult http_get(const std::string& url, const RequestOptions& options = {});
HttpResult http_head(const std::string& url);
HttpResult http_get_with(const std::string& url, std::vector<std::string> headers);
// Parses `text`, failing the current test (not aborting it) when it is not JSON.
rapidjson::Document parse_json(const std::string& text);

}  // namespace testing_support
