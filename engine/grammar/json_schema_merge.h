#pragma once

// allOf as one schema: the keywords of several schemas folded into one object where the result means the
// same as all of them together (types intersected, properties and required joined, the tighter bound of
// each pair, enums intersected, same-named properties and items as allOf of both). What does not reduce so
// (two different patterns or formats, anyOf in two branches, additionalProperties that one branch applies
// to another branch's properties) is refused by name.

#include <rapidjson/document.h>

#include <string>

namespace engine::grammar {

// Folds the keywords of schema object `from` into `into`. `from` has no $ref or allOf of its own (the
// caller resolves and flattens them) and no annotations. `where` names the allOf in errors.
void merge_schema(rapidjson::Value& into, const rapidjson::Value& from, rapidjson::Document::AllocatorType& allocator,
                  const std::string& where);

}  // namespace engine::grammar
