#pragma once

// What every route of the test hub needs to read a request and write the hub's kind of answer: the split
// target, numbers, JSON bodies and the hub's error shape.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/hub/loopback_http_server.h"

namespace testing_support::hub {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void write_string(JsonWriter& json, std::string_view text);

// Percent-decoding; a malformed escape stays as it was sent.
std::string percent_decode(std::string_view text);

// A whole decimal number without sign or spaces; nullopt otherwise.
std::optional<std::uint64_t> parse_number(std::string_view text);

std::string quoted(const std::string& text);

HttpResponse json_response(int status, std::string body);

// The hub's error shape: X-Error-Code (what clients branch on, omitted when empty), X-Error-Message, and
// {"error": message}.
HttpResponse hub_error(int status, std::string_view code, const std::string& message);

HttpResponse not_found();

// A request target split into percent-decoded path segments and query parameters.
struct RequestTarget {
  std::string raw_path;
  std::vector<std::string> segments;                           // decoded; empty segments dropped
  std::vector<std::pair<std::string, std::string>> raw_query;  // as sent, in order
  std::map<std::string, std::string> query;                    // decoded

  explicit RequestTarget(const std::string& target);

  // A query flag given as true, True or 1.
  bool flag(const std::string& name) const;
  // The decoded query parameter, empty when absent.
  std::string query_value(const std::string& name) const;
};

}  // namespace testing_support::hub
