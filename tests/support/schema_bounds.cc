#include "tests/support/schema_bounds.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>

namespace testing_support {
namespace {

constexpr std::int64_t kStringBound = 16;
constexpr std::int64_t kArrayBound = 4;

using Value = rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;

bool has_type(const Value& node, const char* type) {
  const auto found = node.FindMember("type");
  if (found == node.MemberEnd()) return false;
  const Value& t = found->value;
  if (t.IsString()) return std::string_view(t.GetString()) == type;
  if (!t.IsArray()) return false;
  return std::any_of(t.Begin(), t.End(),
                     [&](const Value& v) { return v.IsString() && std::string_view(v.GetString()) == type; });
}

bool has_any(const Value& node, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* key) { return node.HasMember(key); });
}

std::int64_t integer_or(const Value& node, const char* key, std::int64_t fallback) {
  const auto found = node.FindMember(key);
  return found != node.MemberEnd() && found->value.IsInt64() ? found->value.GetInt64() : fallback;
}

// Calls visit(node) for the schema, then for every subschema under it (the keywords the header names).
template <typename Node, typename Visit>
void for_each_subschema(Node& node, const Visit& visit) {
  visit(node);
  if (!node.IsObject()) return;
  const auto each = [&](auto& list_or_map) {
    if (list_or_map.IsArray()) {
      for (auto& element : list_or_map.GetArray()) for_each_subschema(element, visit);
    } else if (list_or_map.IsObject()) {
      for (auto& member : list_or_map.GetObject()) for_each_subschema(member.value, visit);
    }
  };
  for (const char* key : {"properties", "$defs", "definitions", "prefixItems", "anyOf", "oneOf", "allOf"}) {
    if (const auto found = node.FindMember(key); found != node.MemberEnd()) each(found->value);
  }
  for (const char* key : {"items", "additionalProperties", "additionalItems"}) {
    if (const auto found = node.FindMember(key); found != node.MemberEnd()) {
      if (found->value.IsArray()) {
        each(found->value);  // draft-07 tuple items
      } else {
        for_each_subschema(found->value, visit);
      }
    }
  }
}

void bound(Value& node, Allocator& allocator) {
  if (!node.IsObject()) return;  // true/false schemas
  if (has_type(node, "string") && !has_any(node, {"maxLength", "pattern", "format", "enum", "const"})) {
    const std::int64_t max_length = std::max(kStringBound, integer_or(node, "minLength", 0) + 8);
    node.AddMember("maxLength", Value(max_length), allocator);
  }
  if (has_type(node, "array") && !has_any(node, {"maxItems", "enum", "const"})) {
    const auto prefix = node.FindMember("prefixItems");
    const std::int64_t prefix_count =
        prefix != node.MemberEnd() && prefix->value.IsArray() ? static_cast<std::int64_t>(prefix->value.Size()) : 0;
    const std::int64_t max_items = std::max({kArrayBound, integer_or(node, "minItems", 0), prefix_count});
    node.AddMember("maxItems", Value(max_items), allocator);
  }
}

// Keywords after which a schema is not "any value".
constexpr const char* kConstraining[] = {"type",  "enum",       "const",       "$ref",  "anyOf",   "oneOf",
                                         "allOf", "properties", "prefixItems", "items", "required"};

bool unbounded_text_at(const Value& node) {
  if (node.IsBool()) return node.GetBool();
  if (!node.IsObject()) return false;
  if (std::none_of(std::begin(kConstraining), std::end(kConstraining),
                   [&](const char* key) { return node.HasMember(key); })) {
    return true;  // any value
  }
  if (has_type(node, "string")) {
    const auto format = node.FindMember("format");
    return format != node.MemberEnd() && format->value.IsString() &&
           std::string_view(format->value.GetString()) == "email";
  }
  if (!has_type(node, "object")) return false;
  const auto additional = node.FindMember("additionalProperties");
  if (additional == node.MemberEnd()) return !node.HasMember("properties");
  return !(additional->value.IsBool() && !additional->value.GetBool());
}

rapidjson::Document parsed(std::string_view schema) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseFullPrecisionFlag>(schema.data(), schema.size());
  if (document.HasParseError()) {
    throw std::invalid_argument("schema_bounds: the schema is not JSON (" +
                                std::string(rapidjson::GetParseError_En(document.GetParseError())) + " at offset " +
                                std::to_string(document.GetErrorOffset()) + ")");
  }
  return document;
}

}  // namespace

std::string bounded_for_random_weights(std::string_view schema) {
  rapidjson::Document document = parsed(schema);
  Allocator& allocator = document.GetAllocator();
  for_each_subschema(static_cast<Value&>(document), [&](Value& node) { bound(node, allocator); });
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  document.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool allows_unbounded_text(std::string_view schema) {
  const rapidjson::Document document = parsed(schema);
  bool unbounded = false;
  for_each_subschema(static_cast<const Value&>(document),
                     [&](const Value& node) { unbounded = unbounded || unbounded_text_at(node); });
  return unbounded;
}

}  // namespace testing_support

namespace testing_support {

std::size_t listed_properties(std::string_view schema) {
  const rapidjson::Document document = parsed(schema);
  std::size_t count = 0;
  for_each_subschema(static_cast<const Value&>(document), [&](const Value& node) {
    if (!node.IsObject()) return;
    const auto properties = node.FindMember("properties");
    if (properties != node.MemberEnd() && properties->value.IsObject()) count += properties->value.MemberCount();
  });
  return count;
}

}  // namespace testing_support
