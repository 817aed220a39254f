#include "tests/hub/hub_http.h"

#include <algorithm>
#include <charconv>

namespace testing_support::hub {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void write_string(JsonWriter& json, std::string_view text) {
  json.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

std::string percent_decode(std::string_view text) {
  std::string decoded;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      decoded.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
      i += 2;
    } else {
      decoded.push_back(text[i]);
    }
  }
  return decoded;
}

std::optional<std::uint64_t> parse_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::string quoted(const std::string& text) {
  return "\"" + text + "\"";
}

HttpResponse json_response(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.add_header("Content-Type", "application/json; charset=utf-8");
  response.set_body(std::move(body));
  return response;
}

HttpResponse hub_error(int status, std::string_view code, const std::string& message) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  json.Key("error");
  write_string(json, message);
  json.EndObject();
  HttpResponse response = json_response(status, buffer.GetString());
  if (!code.empty()) response.add_header("X-Error-Code", std::string(code));
  response.add_header("X-Error-Message", message);
  return response;
}

HttpResponse not_found() {
  return hub_error(404, "", "Not Found");
}

RequestTarget::RequestTarget(const std::string& target) {
  const std::size_t question = target.find('?');
  raw_path = target.substr(0, question);
  for (std::size_t start = 0; start <= raw_path.size();) {
    const std::size_t end = std::min(raw_path.find('/', start), raw_path.size());
    if (end > start) segments.push_back(percent_decode(std::string_view(raw_path).substr(start, end - start)));
    start = end + 1;
  }
  if (question == std::string::npos) return;
  const std::string_view query_text = std::string_view(target).substr(question + 1);
  for (std::size_t start = 0; start < query_text.size();) {
    const std::size_t end = std::min(query_text.find('&', start), query_text.size());
    const std::string_view pair = query_text.substr(start, end - start);
    const std::size_t equals = pair.find('=');
    std::string name(pair.substr(0, equals));
    std::string value(equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1));
    if (!name.empty()) {
      query[percent_decode(name)] = percent_decode(value);
      raw_query.emplace_back(std::move(name), std::move(value));
    }
    start = end + 1;
  }
}

bool RequestTarget::flag(const std::string& name) const {
  const auto found = query.find(name);
  return found != query.end() && (found->second == "true" || found->second == "1" || found->second == "True");
}

std::string RequestTarget::query_value(const std::string& name) const {
  const auto found = query.find(name);
  return found == query.end() ? std::string() : found->second;
}

}  // namespace testing_support::hub
