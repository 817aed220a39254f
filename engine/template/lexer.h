#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/template/error.h"

namespace engine::template_::detail {

enum class TokenType {
  kText,           // template data, whitespace control already applied
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // value holds the unescaped text
  kInteger,
  kFloat,
  kOperator,
  kEnd,
};

struct Token {
  TokenType type;
  std::string value;
  Location location;
};

struct LexerOptions {
  bool trim_blocks = true;    // drop the first newline after a block or comment tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block or comment tag that starts a line
};

// Splits a template into tokens the way Jinja's lexer does (newlines normalized to \n, one trailing newline
// dropped, {% raw %} kept verbatim, comments removed). Throws TemplateError(kSyntax).
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace engine::template_::detail
