#pragma once

// Random weights, constrained, wander: inside a JSON string nearly every token is allowed and the closing
// quote is one of hundreds, so a string without maxLength runs to thousands of tokens, and so do arrays
// without maxItems whose items open more arrays. The structured-outputs corpus test asks the engine for
// bounded versions of such schemas (and validates against the same bounded schema), so every output ends
// well before max_tokens without skipping a schema.

#include <cstddef>
#include <string>
#include <string_view>

namespace testing_support {

// Every subschema typed "string" with no maxLength, pattern, format, enum or const gets maxLength (16, or
// minLength + 8 when that is more); every subschema typed "array" with no maxItems gets maxItems (4, or
// minItems or the prefixItems' count when more). Other keywords are kept; subschemas are found under
// properties, $defs, definitions, items, prefixItems, additionalProperties, additionalItems, anyOf, oneOf
// and allOf. Returns the schema as compact JSON. Throws std::invalid_argument for text that is not JSON.
std::string bounded_for_random_weights(std::string_view schema);

// Whether the schema still lets the model write text no keyword of it can bound: property names beyond
// the listed ones (additionalProperties not false, or an object schema listing no properties), any value
// (a subschema that is {} or true), or an email (format takes no maxLength). Such outputs end only when
// the model closes them. Throws like bounded_for_random_weights.
bool allows_unbounded_text(std::string_view schema);

// How many properties the schema lists, over all its subschemas. Throws like bounded_for_random_weights.
std::size_t listed_properties(std::string_view schema);

}  // namespace testing_support
