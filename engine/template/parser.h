#pragma once

#include <string_view>

#include "engine/template/ast.h"
#include "engine/template/lexer.h"

namespace engine::template_::detail {

// Parses a template with Jinja's grammar into statements. `max_depth` bounds statement and expression
// nesting, so a hostile template cannot exhaust the stack. Throws TemplateError(kSyntax).
Body parse(std::string_view source, const LexerOptions& options, int max_depth);

}  // namespace engine::template_::detail
