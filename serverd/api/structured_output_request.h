#pragma once

// A request's structured-output constraint as vLLM reads it, from any of the places clients put one:
// `response_format` ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"name", "schema",
// "strict", "description"}}), vLLM's `structured_outputs` object (json, regex, choice, grammar, json_object,
// whitespace_pattern), and the older `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`,
// `guided_whitespace_pattern` and `guided_decoding_backend` fields. More than one constraint is a 400 (vLLM's
// message); options this server cannot honour (structural_tag, disable_any_whitespace,
// disable_additional_properties) are refused by name.

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>

#include "engine/grammar/structured_output.h"

namespace serverd::api {

struct StructuredOutputRequest {
  engine::grammar::StructuredOutputSpec spec;
  std::string field;  // where the constraint came from, as the client wrote it: "response_format", "guided_regex"
};

// The request's constraint; nullopt when it asks for none (response_format "text" included). Throws
// ApiException (400) naming the field.
std::optional<StructuredOutputRequest> parse_structured_output(const rapidjson::Value& body);

// vLLM's structured-output backends: "auto" and the names of the libraries vLLM can use. This server's own
// engine serves every one of them (the same constraints, compiled here).
bool is_known_structured_output_backend(std::string_view name);

}  // namespace serverd::api
