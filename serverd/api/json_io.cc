#include "serverd/api/json_io.h"

#include <rapidjson/error/en.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/format/json.h"
#include "serverd/api/api_error.h"

namespace serverd::api {

JsonWriter& JsonWriter::begin_object() {
  writer_.StartObject();
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  writer_.EndObject();
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  writer_.StartArray();
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  writer_.EndArray();
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view name) {
  writer_.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view text) {
  writer_.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return *this;
}
JsonWriter& JsonWriter::value(bool b) {
  writer_.Bool(b);
  return *this;
}
JsonWriter& JsonWriter::value(std::int64_t i) {
  writer_.Int64(i);
  return *this;
}
JsonWriter& JsonWriter::value(std::uint64_t u) {
  writer_.Uint64(u);
  return *this;
}
JsonWriter& JsonWriter::value(double d) {
  if (std::isfinite(d)) {
    writer_.Double(d);
  } else {
    writer_.Null();
  }
  return *this;
}
JsonWriter& JsonWriter::null() {
  writer_.Null();
  return *this;
}
JsonWriter& JsonWriter::value(const rapidjson::Value& json) {
  json.Accept(writer_);
  return *this;
}
JsonWriter& JsonWriter::raw(std::string_view json) {
  writer_.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  return *this;
}
std::string JsonWriter::take() {
  return std::string(buffer_.GetString(), buffer_.GetSize());
}

namespace {

int depth_of(const rapidjson::Value& root) {
  // Iterative, so a hostile depth cannot overflow this walk either.
  std::vector<std::pair<const rapidjson::Value*, int>> stack{{&root, 1}};
  int deepest = 0;
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    if (value->IsObject()) {
      deepest = std::max(deepest, depth);
      if (depth > kMaxJsonDepth) return depth;
      for (const auto& member : value->GetObject()) stack.emplace_back(&member.value, depth + 1);
    } else if (value->IsArray()) {
      deepest = std::max(deepest, depth);
      if (depth > kMaxJsonDepth) return depth;
      for (const auto& item : value->GetArray()) stack.emplace_back(&item, depth + 1);
    }
  }
  return deepest;
}

[[noreturn]] void wrong_type(std::string_view name, std::string_view expected, const rapidjson::Value& got) {
  throw_bad_request(
      "'" + std::string(name) + "' must be " + std::string(expected) + ", got " + std::string(json_type_name(got)),
      std::string(name));
}

}  // namespace

void parse_request_body(std::string_view body, rapidjson::Document& document) {
  constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
  document.Parse<kFlags>(body.data(), body.size());
  if (document.HasParseError()) {
    throw_bad_request(
        "Invalid JSON in the request body: " + std::string(rapidjson::GetParseError_En(document.GetParseError())) +
        " (at byte " + std::to_string(document.GetErrorOffset()) + ")");
  }
  if (!document.IsObject()) throw_bad_request("The request body must be a JSON object");
  if (depth_of(document) > kMaxJsonDepth) {
    throw_bad_request("The request body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth));
  }
  engine::format::keep_last_duplicate_members(document);  // a repeated key means its last value, as in Python
}

const rapidjson::Value* field(const rapidjson::Value& object, std::string_view name) {
  const auto found = object.FindMember(rapidjson::Value(rapidjson::StringRef(name.data(), name.size())));
  if (found == object.MemberEnd() || found->value.IsNull()) return nullptr;
  return &found->value;
}

std::string_view json_type_name(const rapidjson::Value& value) {
  return engine::format::json_type_name(value);
}

std::optional<bool> bool_field(const rapidjson::Value& object, std::string_view name) {
  const auto* value = field(object, name);
  if (value == nullptr) return std::nullopt;
  if (!value->IsBool()) wrong_type(name, "a boolean", *value);
  return value->GetBool();
}

std::int64_t as_int(const rapidjson::Value& value, std::string_view what) {
  if (value.IsInt64()) return value.GetInt64();
  if (value.IsUint64()) {
    throw_bad_request("'" + std::string(what) + "' is out of range", std::string(what));
  }
  if (value.IsDouble()) {
    const double d = value.GetDouble();
    // 2^63 itself is out of range; every double below it converts exactly.
    if (std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
      return static_cast<std::int64_t>(d);
    }
    throw_bad_request("'" + std::string(what) + "' must be an integer, got a number with a fractional part",
                      std::string(what));
  }
  wrong_type(what, "an integer", value);
}

std::optional<std::int64_t> int_field(const rapidjson::Value& object, std::string_view name) {
  const auto* value = field(object, name);
  if (value == nullptr) return std::nullopt;
  return as_int(*value, name);
}

std::optional<double> number_field(const rapidjson::Value& object, std::string_view name) {
  const auto* value = field(object, name);
  if (value == nullptr) return std::nullopt;
  if (!value->IsNumber()) wrong_type(name, "a number", *value);
  return value->GetDouble();
}

std::optional<std::string> string_field(const rapidjson::Value& object, std::string_view name) {
  const auto* value = field(object, name);
  if (value == nullptr) return std::nullopt;
  if (!value->IsString()) wrong_type(name, "a string", *value);
  return std::string(value->GetString(), value->GetStringLength());
}

std::string to_json(const rapidjson::Value& value) {
  JsonWriter w;
  w.value(value);
  return w.take();
}

http::Response json_response(std::string body, std::vector<http::Header> headers) {
  http::Response response;
  response.headers = std::move(headers);
  response.headers.push_back({"Content-Type", "application/json"});
  response.body = std::move(body);
  return response;
}

}  // namespace serverd::api
