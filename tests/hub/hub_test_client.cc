#include "tests/hub/hub_test_client.h"

#include <gtest/gtest.h>

namespace testing_support {

HttpResult http_get(const std::string& url, const RequestOptions& options) {
  CurlClient client;
  return client.request(url, options);
}

HttpResult http_head(const std::string& url) {
  RequestOptions options;
  options.head = true;
  return http_get(url, options);
}

HttpResult http_get_with(const std::string& url, std::vector<std::string> headers) {
  RequestOptions options;
  options.headers = std::move(headers);
  return http_get(url, options);
}

rapidjson::Document parse_json(const std::string& text) {
  rapidjson::Document document;
  document.Parse(text.c_str(), text.size());
  EXPECT_FALSE(document.HasParseError()) << text;
  return document;
}

}  // namespace testing_support
