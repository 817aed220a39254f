#include "serverd/api/structured_output_request.h"

#include <array>
#include <vector>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"

namespace serverd::api {
namespace {

using engine::grammar::StructuredOutputSpec;
using Kind = StructuredOutputSpec::Kind;
using rapidjson::Value;

constexpr std::array<std::string_view, 6> kBackends = {"auto",     "xgrammar",           "guidance",
                                                       "outlines", "lm-format-enforcer", "lm_format_enforcer"};

std::string text(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// What the request asked for so far: every constraint found, so that two of them are refused together.
struct Found {
  std::vector<StructuredOutputRequest> constraints;
  std::optional<std::string> whitespace_pattern;
  std::string whitespace_field;

  void add(Kind kind, std::string body, std::string field) {
    StructuredOutputRequest r;
    r.spec.kind = kind;
    r.spec.text = std::move(body);
    r.field = std::move(field);
    constraints.push_back(std::move(r));
  }
};

// A JSON schema given as an object or as the JSON text of one (vLLM takes both).
std::string schema_text(const Value& schema, const std::string& name) {
  if (schema.IsString()) return text(schema);
  if (schema.IsObject() || (schema.IsBool())) return to_json(schema);
  throw_bad_request(
      "'" + name + "' must be a JSON schema (an object, or its JSON text), got " + std::string(json_type_name(schema)),
      name);
}

std::string string_value(const Value& v, const std::string& name) {
  if (!v.IsString()) {
    throw_bad_request("'" + name + "' must be a string, got " + std::string(json_type_name(v)), name);
  }
  return text(v);
}

std::vector<std::string> choice_list(const Value& v, const std::string& name) {
  if (!v.IsArray() || v.Empty()) throw_bad_request("'" + name + "' must be a non-empty array of strings", name);
  std::vector<std::string> choices;
  for (const auto& item : v.GetArray()) {
    if (!item.IsString()) {
      throw_bad_request("'" + name + "' must be an array of strings; it holds " + std::string(json_type_name(item)),
                        name);
    }
    choices.push_back(text(item));
  }
  return choices;
}

// The members json, regex, choice, grammar (as in structured_outputs; the guided_* fields use the same
// shapes under their own names).
void read_kind(const Value& object, std::string_view member, const std::string& name, Found& found) {
  const auto* v = field(object, member);
  if (v == nullptr) return;
  if (member.ends_with("json")) {
    found.add(Kind::JsonSchema, schema_text(*v, name), name);
  } else if (member.ends_with("regex")) {
    found.add(Kind::Regex, string_value(*v, name), name);
  } else if (member.ends_with("grammar")) {
    found.add(Kind::Grammar, string_value(*v, name), name);
  } else {
    found.add(Kind::Choice, {}, name);
    found.constraints.back().spec.choices = choice_list(*v, name);
  }
}

void read_response_format(const Value& body, Found& found) {
  const auto* format = field(body, "response_format");
  if (format == nullptr) return;
  if (!format->IsObject()) throw_bad_request("'response_format' must be an object", "response_format");
  const auto type = string_field(*format, "type");
  if (!type)
    throw_bad_request("'response_format' needs a 'type': \"text\", \"json_object\" or \"json_schema\"",
                      "response_format");
  if (*type == "text") return;
  if (*type == "json_object") {
    found.add(Kind::JsonObject, {}, "response_format");
    return;
  }
  if (*type == "structural_tag") {
    throw_bad_request("'response_format' of type 'structural_tag' is not supported by this server", "response_format");
  }
  if (*type != "json_schema") {
    throw_bad_request(
        "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got '" + *type + "'",
        "response_format");
  }
  const auto* json_schema = field(*format, "json_schema");
  if (json_schema == nullptr || !json_schema->IsObject()) {
    throw_bad_request("'response_format' of type 'json_schema' needs a 'json_schema' object", "response_format");
  }
  const auto name = string_field(*json_schema, "name");  // type-checked: OpenAI requires it, vLLM does too
  if (!name) throw_bad_request("'response_format.json_schema' needs a 'name' string", "response_format");
  string_field(*json_schema, "description");  // type-checked; the schema alone constrains the output
  // strict is honoured either way: the output always matches the schema exactly.
  bool_field(*json_schema, "strict");
  const auto* schema = field(*json_schema, "schema");
  if (schema == nullptr) {
    throw_bad_request("'response_format.json_schema' needs a 'schema' (the JSON schema the output must match)",
                      "response_format");
  }
  found.add(Kind::JsonSchema, schema_text(*schema, "response_format.json_schema.schema"), "response_format");
}

void read_structured_outputs(const Value& body, Found& found) {
  const auto* so = field(body, "structured_outputs");
  if (so == nullptr) return;
  if (!so->IsObject()) throw_bad_request("'structured_outputs' must be an object", "structured_outputs");
  for (const std::string_view member : {"json", "regex", "choice", "grammar"}) {
    read_kind(*so, member, "structured_outputs." + std::string(member), found);
  }
  // vLLM counts json_object when it is given at all; false asks for nothing, so it is not a constraint here.
  if (bool_field(*so, "json_object").value_or(false)) found.add(Kind::JsonObject, {}, "structured_outputs.json_object");
  for (const char* refused : {"structural_tag"}) {
    if (field(*so, refused) != nullptr) {
      throw_bad_request("'structured_outputs." + std::string(refused) + "' is not supported by this server",
                        "structured_outputs");
    }
  }
  for (const char* refused : {"disable_any_whitespace", "disable_additional_properties"}) {
    if (bool_field(*so, refused).value_or(false)) {
      throw_bad_request("'structured_outputs." + std::string(refused) +
                            "' is not supported by this server; give a whitespace_pattern or a schema with "
                            "\"additionalProperties\": false instead",
                        "structured_outputs");
    }
  }
  if (const auto pattern = string_field(*so, "whitespace_pattern")) {
    found.whitespace_pattern = pattern;
    found.whitespace_field = "structured_outputs.whitespace_pattern";
  }
}

void read_guided_fields(const Value& body, Found& found) {
  for (const std::string_view member : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    read_kind(body, member, std::string(member), found);
  }
  if (const auto pattern = string_field(body, "guided_whitespace_pattern")) {
    if (found.whitespace_pattern) {
      throw_bad_request("'guided_whitespace_pattern' and 'structured_outputs.whitespace_pattern' are both given",
                        "guided_whitespace_pattern");
    }
    found.whitespace_pattern = pattern;
    found.whitespace_field = "guided_whitespace_pattern";
  }
  if (const auto backend = string_field(body, "guided_decoding_backend")) {
    if (!is_known_structured_output_backend(*backend)) {
      throw_bad_request(
          "'guided_decoding_backend' must be one of auto, xgrammar, guidance, outlines, "
          "lm-format-enforcer (this server's own engine serves each), got '" +
              *backend + "'",
          "guided_decoding_backend");
    }
  }
}

}  // namespace

bool is_known_structured_output_backend(std::string_view name) {
  for (const auto known : kBackends) {
    if (name == known) return true;
  }
  return false;
}

std::optional<StructuredOutputRequest> parse_structured_output(const Value& body) {
  Found found;
  read_response_format(body, found);
  read_structured_outputs(body, found);
  read_guided_fields(body, found);
  if (found.constraints.size() > 1) {
    std::string names;
    for (const auto& c : found.constraints) names += (names.empty() ? "" : ", ") + c.field;
    throw_bad_request("You can only use one kind of structured outputs constraint but multiple are specified: " + names,
                      found.constraints[1].field);
  }
  if (found.constraints.empty()) {
    if (found.whitespace_pattern) {
      throw_bad_request("'" + found.whitespace_field + "' needs a JSON constraint (json, json_object) to apply to",
                        found.whitespace_field);
    }
    return std::nullopt;
  }
  StructuredOutputRequest r = std::move(found.constraints.front());
  if (found.whitespace_pattern) {
    if (r.spec.kind != Kind::JsonSchema && r.spec.kind != Kind::JsonObject) {
      throw_bad_request("'" + found.whitespace_field + "' applies to JSON constraints only, not to '" + r.field + "'",
                        found.whitespace_field);
    }
    r.spec.whitespace_pattern = found.whitespace_pattern;
  }
  return r;
}

}  // namespace serverd::api
