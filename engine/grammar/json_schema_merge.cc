#include "engine/grammar/json_schema_merge.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <vector>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;

std::string_view name_of(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

[[noreturn]] void cannot_merge(const std::string& where, std::string_view keyword, const std::string& why) {
  throw GrammarError("allOf at " + where + ": cannot merge \"" + std::string(keyword) + "\": " + why);
}

std::vector<std::string> type_list(const Value& type) {
  std::vector<std::string> out;
  if (type.IsString()) out.emplace_back(name_of(type));
  if (type.IsArray()) {
    for (const Value& t : type.GetArray()) {
      if (t.IsString()) out.emplace_back(name_of(t));
    }
  }
  return out;
}

Value merged_types(const Value& a, const Value& b, Allocator& allocator, const std::string& where) {
  const std::vector<std::string> left = type_list(a);
  const std::vector<std::string> right = type_list(b);
  auto has = [](const std::vector<std::string>& list, const std::string& t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  Value out(rapidjson::kArrayType);
  for (const std::string& t : left) {
    // An integer is a number: integer in one branch and number in the other leaves integer.
    const bool kept = has(right, t) || (t == "integer" && has(right, "number"));
    if (kept) out.PushBack(Value(t.c_str(), allocator), allocator);
  }
  for (const std::string& t : right) {
    if (t == "integer" && has(left, "number") && !has(left, "integer"))
      out.PushBack(Value("integer", allocator), allocator);
  }
  if (out.Empty()) cannot_merge(where, "type", "the branches share no type, so no value satisfies all of them");
  return out;
}

Value all_of(const Value& a, const Value& b, Allocator& allocator) {
  Value list(rapidjson::kArrayType);
  list.PushBack(Value(a, allocator), allocator);
  list.PushBack(Value(b, allocator), allocator);
  Value out(rapidjson::kObjectType);
  out.AddMember("allOf", list, allocator);
  return out;
}

std::set<std::string> property_names(const Value& schema) {
  std::set<std::string> out;
  const auto found = schema.FindMember("properties");
  if (found != schema.MemberEnd() && found->value.IsObject()) {
    for (const auto& m : found->value.GetObject()) out.emplace(name_of(m.name));
  }
  return out;
}

// additionalProperties restricts the keys its own schema does not list; folding two schemas must not
// change which keys that restriction covers.
void check_additional_properties(const Value& a, const Value& b, const std::string& where) {
  for (const auto& [owner, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const auto additional = owner->FindMember("additionalProperties");
    if (additional == owner->MemberEnd() || additional->value.IsTrue()) continue;
    const std::set<std::string> own = property_names(*owner);
    for (const std::string& name : property_names(*other)) {
      if (own.count(name) == 0) {
        cannot_merge(where, "additionalProperties",
                     "one branch restricts additional properties and another lists property \"" + name +
                         "\" that the first does not");
      }
    }
  }
}

bool is_draft4_exclusive(const Value& v) {
  return v.IsBool();
}

}  // namespace

void merge_schema(Value& into, const Value& from, Allocator& allocator, const std::string& where) {
  check_additional_properties(into, from, where);
  for (const auto& member : from.GetObject()) {
    const std::string_view keyword = name_of(member.name);
    const Value& incoming = member.value;
    const auto existing = into.FindMember(member.name);
    if (existing == into.MemberEnd()) {
      into.AddMember(Value(member.name, allocator), Value(incoming, allocator), allocator);
      continue;
    }
    Value& current = existing->value;
    if (current == incoming) continue;
    if (keyword == "type") {
      current = merged_types(current, incoming, allocator, where);
    } else if (keyword == "properties") {
      if (!current.IsObject() || !incoming.IsObject()) cannot_merge(where, keyword, "it must be an object");
      for (const auto& property : incoming.GetObject()) {
        const auto same = current.FindMember(property.name);
        if (same == current.MemberEnd()) {
          current.AddMember(Value(property.name, allocator), Value(property.value, allocator), allocator);
        } else {
          same->value = all_of(same->value, property.value, allocator);
        }
      }
    } else if (keyword == "required") {
      if (!current.IsArray() || !incoming.IsArray()) cannot_merge(where, keyword, "it must be an array");
      for (const Value& name : incoming.GetArray()) {
        const bool present = std::any_of(current.Begin(), current.End(), [&](const Value& v) { return v == name; });
        if (!present) current.PushBack(Value(name, allocator), allocator);
      }
    } else if (keyword == "items" || keyword == "additionalProperties" || keyword == "additionalItems") {
      if (current.IsFalse() || incoming.IsTrue()) continue;
      if (incoming.IsFalse() || current.IsTrue()) {
        current.CopyFrom(incoming, allocator);
      } else if (current.IsObject() && incoming.IsObject()) {
        current = all_of(current, incoming, allocator);
      } else {
        cannot_merge(where, keyword, "it must be a schema in both branches");
      }
    } else if (keyword == "minimum" || keyword == "minLength" || keyword == "minItems" ||
               keyword == "exclusiveMinimum" || keyword == "maximum" || keyword == "maxLength" ||
               keyword == "maxItems" || keyword == "exclusiveMaximum") {
      if (is_draft4_exclusive(current) || is_draft4_exclusive(incoming)) {
        cannot_merge(where, keyword, "the branches give it different draft-4 boolean values");
      }
      if (!current.IsNumber() || !incoming.IsNumber()) cannot_merge(where, keyword, "it must be a number");
      const bool keep_larger = keyword.starts_with("min") || keyword == "exclusiveMinimum";
      const double a = current.GetDouble();
      const double b = incoming.GetDouble();
      if (keep_larger ? b > a : b < a) current.CopyFrom(incoming, allocator);
    } else if (keyword == "enum") {
      if (!current.IsArray() || !incoming.IsArray()) cannot_merge(where, keyword, "it must be an array");
      Value kept(rapidjson::kArrayType);
      for (const Value& v : current.GetArray()) {
        if (std::any_of(incoming.Begin(), incoming.End(), [&](const Value& w) { return v == w; })) {
          kept.PushBack(Value(v, allocator), allocator);
        }
      }
      if (kept.Empty()) cannot_merge(where, keyword, "the branches' enums share no value");
      current = kept;
    } else if (keyword == "const") {
      cannot_merge(where, keyword, "the branches require different values");
    } else {
      cannot_merge(where, keyword, "the branches give it different values and this server does not intersect them");
    }
  }
}

}  // namespace engine::grammar
