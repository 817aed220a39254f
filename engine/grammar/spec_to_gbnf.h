#pragma once

// Every structured-output kind reduces to GBNF text before compilation: grammars are GBNF already, choices
// become an alternation of literals, JSON schemas and regexes go through their converters.

#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {

// vLLM's name of the kind: "json", "json_object", "regex", "choice", "grammar".
std::string_view kind_name(StructuredOutputSpec::Kind kind);

// root ::= "a" | "b" | ... with each choice escaped. Throws GrammarError for an empty list or a choice that
// is not valid UTF-8.
std::string choice_to_gbnf(const std::vector<std::string>& choices);

// The GBNF text `spec` stands for. Throws GrammarError for fields the kind does not take and for invalid or
// unsupported schemas, regexes and choices.
std::string spec_to_gbnf(const StructuredOutputSpec& spec);

}  // namespace engine::grammar
