#pragma once

// What the JSON Schema converter does with each keyword: applies it, ignores it because it constrains
// nothing (annotations), or refuses it by name (with the reason), so that no constraint is silently lost.

#include <string_view>

namespace engine::grammar {

enum class KeywordUse {
  Applied,     // the converter builds it into the grammar
  Annotation,  // constrains nothing: title, description, default, examples, $schema, $id, x-* ...
  Container,   // $defs / definitions: schemas that apply only through $ref
  Refused,     // a JSON Schema keyword this server does not generate
  Unknown,     // not a keyword this server knows (a typo would otherwise drop a constraint)
};

KeywordUse keyword_use(std::string_view keyword);
// For Refused keywords: why, or what to write instead (empty when there is nothing to add).
std::string_view refusal_reason(std::string_view keyword);

}  // namespace engine::grammar
