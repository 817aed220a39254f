#pragma once

// JSON in and out for the API layer: a writer that cannot produce invalid JSON (non-finite numbers are
// refused), a bounded parser, and typed readers for request fields whose errors name the field.

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/http/http_server.h"

namespace serverd::api {

class JsonWriter {
 public:
  JsonWriter() : writer_(buffer_) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool b);
  JsonWriter& value(std::int64_t i);
  JsonWriter& value(std::uint64_t u);
  JsonWriter& value(int i) { return value(static_cast<std::int64_t>(i)); }
  JsonWriter& value(double d);  // NaN and infinities are written as null
  JsonWriter& null();
  // A parsed value, copied as it is.
  JsonWriter& value(const rapidjson::Value& json);
  // JSON text that is already valid, inserted as it is (e.g. a cached fragment).
  JsonWriter& raw(std::string_view json);

  std::string take();

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

// Deepest nesting of arrays and objects a request body may have (so nothing that walks it recursively can
// exhaust the stack).
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body (UTF-8 checked, iteratively, depth bounded). Throws ApiException (400) on bad JSON or
// a body that is not an object.
void parse_request_body(std::string_view body, rapidjson::Document& document);

// The member `name` of `object`, or null when it is absent or JSON null (OpenAI clients send null for
// "default").
const rapidjson::Value* field(const rapidjson::Value& object, std::string_view name);

// Typed fields: nullopt when absent or null; ApiException (400, param = name) when of another type.
std::optional<bool> bool_field(const rapidjson::Value& object, std::string_view name);
std::optional<std::int64_t> int_field(const rapidjson::Value& object, std::string_view name);  // 3.0 counts
std::optional<double> number_field(const rapidjson::Value& object, std::string_view name);
std::optional<std::string> string_field(const rapidjson::Value& object, std::string_view name);

// The same checks on a value already in hand (`what` names it in the error).
std::int64_t as_int(const rapidjson::Value& value, std::string_view what);
std::string_view json_type_name(const rapidjson::Value& value);

// Serializes a parsed value.
std::string to_json(const rapidjson::Value& value);

// A JSON response: `headers`, then Content-Type application/json, and `body`.
http::Response json_response(std::string body, std::vector<http::Header> headers);

}  // namespace serverd::api
