#pragma once

// JSON Schema to GBNF: a grammar whose every match is a JSON text the schema validates (docs/engine.md,
// "JSON Schema and regex support", lists the keywords applied, ignored and refused).
//
// Choices that shape the language, where JSON Schema leaves room or vLLM's xgrammar backend decides:
// - additionalProperties absent on an object schema that lists properties means false, as in xgrammar's
//   strict mode (its default, which vLLM uses); an object schema listing none ({"type":"object"},
//   response_format json_object) takes any members. Likewise prefixItems without items closes the tuple.
// - Properties come in the order the schema lists them, required ones always, optional ones skippable;
//   additional properties (where allowed) after them, under names that differ from the listed ones.
// - oneOf is generated as anyOf: where branches overlap, an output may match more than one.
// - pattern is matched whole (a subset of JSON Schema's search semantics); with minLength/maxLength, or
//   with format, it is refused, as is format with lengths (their intersection is not built).
// - Whitespace between tokens is bounded (random weights would otherwise emit it without end): nothing, one
//   space, or a newline and up to 20 spaces or tabs of indentation, at each place JSON allows it. A
//   whitespace pattern (vLLM's guided_whitespace_pattern, a regex) replaces that rule.

#include <optional>
#include <string>
#include <string_view>

namespace engine::grammar {

// Throws GrammarError naming the JSON pointer of the offending keyword ("#/properties/a/patternProperties").
std::string json_schema_to_gbnf(std::string_view schema_json, const std::optional<std::string>& whitespace_pattern);

}  // namespace engine::grammar
