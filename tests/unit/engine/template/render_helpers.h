#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "engine/template/chat_template.h"

namespace template_test {

namespace tpl = engine::template_;

// Renders `source` with variables from a JSON object.
inline std::string render(std::string_view source, std::string_view context_json = "{}",
                          const tpl::RenderOptions& options = {}) {
  return tpl::ChatTemplate::parse(source).render(tpl::Value::parse_json(context_json), options);
}

// Parses and renders, expecting a TemplateError; returns it (kind kSyntax if parsing failed).
inline tpl::TemplateError render_error(std::string_view source, std::string_view context_json = "{}",
                                       const tpl::TemplateOptions& options = {}) {
  try {
    tpl::ChatTemplate::parse(source, options).render(tpl::Value::parse_json(context_json));
  } catch (const tpl::TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a TemplateError from: " << source;
  return tpl::TemplateError(tpl::TemplateError::Kind::kRender, {}, "no error");
}

}  // namespace template_test
