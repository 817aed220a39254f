#include "engine/grammar/json_schema_keywords.h"

#include <map>
#include <set>
#include <string>

namespace engine::grammar {
namespace {

const std::set<std::string, std::less<>>& applied() {
  static const std::set<std::string, std::less<>> names{"type",
                                                        "enum",
                                                        "const",
                                                        "properties",
                                                        "required",
                                                        "additionalProperties",
                                                        "items",
                                                        "prefixItems",
                                                        "additionalItems",
                                                        "minItems",
                                                        "maxItems",
                                                        "anyOf",
                                                        "oneOf",
                                                        "allOf",
                                                        "$ref",
                                                        "pattern",
                                                        "minLength",
                                                        "maxLength",
                                                        "format",
                                                        "minimum",
                                                        "maximum",
                                                        "exclusiveMinimum",
                                                        "exclusiveMaximum"};
  return names;
}

const std::set<std::string, std::less<>>& annotations() {
  static const std::set<std::string, std::less<>> names{
      "title",   "description",     "default",          "examples",    "$schema",
      "$id",     "$comment",        "deprecated",       "readOnly",    "writeOnly",
      "$anchor", "contentEncoding", "contentMediaType", "$vocabulary", "discriminator",
      "example"};
  return names;
}

const std::map<std::string, std::string, std::less<>>& refused() {
  static const std::map<std::string, std::string, std::less<>> reasons{
      {"patternProperties", "list the properties in \"properties\" instead"},
      {"propertyNames", ""},
      {"dependentSchemas", ""},
      {"dependentRequired", ""},
      {"dependencies", ""},
      {"if", "conditional schemas are not generated; use anyOf"},
      {"then", "conditional schemas are not generated; use anyOf"},
      {"else", "conditional schemas are not generated; use anyOf"},
      {"not", ""},
      {"unevaluatedProperties", "use additionalProperties"},
      {"unevaluatedItems", "use items"},
      {"minProperties", ""},
      {"maxProperties", ""},
      {"uniqueItems", ""},
      {"multipleOf", ""},
      {"contains", ""},
      {"minContains", ""},
      {"maxContains", ""},
      {"$dynamicRef", "use $ref"},
      {"$dynamicAnchor", "use $ref"},
      {"$recursiveRef", "use $ref"},
      {"$recursiveAnchor", "use $ref"},
      {"contentSchema", ""},
  };
  return reasons;
}

}  // namespace

KeywordUse keyword_use(std::string_view keyword) {
  if (applied().count(keyword) != 0) return KeywordUse::Applied;
  if (annotations().count(keyword) != 0 || keyword.starts_with("x-")) return KeywordUse::Annotation;
  if (keyword == "$defs" || keyword == "definitions") return KeywordUse::Container;
  if (refused().count(keyword) != 0) return KeywordUse::Refused;
  return KeywordUse::Unknown;
}

std::string_view refusal_reason(std::string_view keyword) {
  const auto found = refused().find(keyword);
  return found == refused().end() ? std::string_view() : std::string_view(found->second);
}

}  // namespace engine::grammar
