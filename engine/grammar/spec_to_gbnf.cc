#include "engine/grammar/spec_to_gbnf.h"

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "engine/tokenizer/unicode.h"

namespace engine::grammar {

std::string_view kind_name(StructuredOutputSpec::Kind kind) {
  switch (kind) {
    case StructuredOutputSpec::Kind::JsonSchema: return "json";
    case StructuredOutputSpec::Kind::JsonObject: return "json_object";
    case StructuredOutputSpec::Kind::Regex: return "regex";
    case StructuredOutputSpec::Kind::Choice: return "choice";
    case StructuredOutputSpec::Kind::Grammar: return "grammar";
  }
  return "unknown";
}

std::string choice_to_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) throw GrammarError("choice: the list of choices is empty; give at least one");
  std::string gbnf = "root ::= ";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (!tokenizer::unicode::is_valid_utf8(choices[i])) {
      throw GrammarError("choice: choice " + std::to_string(i) + " is not valid UTF-8");
    }
    gbnf += (i ? " | " : "") + gbnf_literal(choices[i]);
  }
  return gbnf + "\n";
}

std::string spec_to_gbnf(const StructuredOutputSpec& spec) {
  const std::string kind(kind_name(spec.kind));
  const bool json =
      spec.kind == StructuredOutputSpec::Kind::JsonSchema || spec.kind == StructuredOutputSpec::Kind::JsonObject;
  if (spec.whitespace_pattern && !json) {
    throw GrammarError("whitespace_pattern applies to JSON outputs only, not to " + kind);
  }
  if (!spec.choices.empty() && spec.kind != StructuredOutputSpec::Kind::Choice) {
    throw GrammarError("choices apply to the choice kind only, not to " + kind);
  }
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::Grammar: return spec.text;
    case StructuredOutputSpec::Kind::Choice: return choice_to_gbnf(spec.choices);
    case StructuredOutputSpec::Kind::JsonSchema: return json_schema_to_gbnf(spec.text, spec.whitespace_pattern);
    // Any JSON object, as vLLM's json_object is.
    case StructuredOutputSpec::Kind::JsonObject:
      return json_schema_to_gbnf(R"({"type": "object"})", spec.whitespace_pattern);
    case StructuredOutputSpec::Kind::Regex: return regex_to_gbnf(spec.text);
  }
  throw GrammarError("structured outputs of kind " + kind + " are unknown");
}

}  // namespace engine::grammar
