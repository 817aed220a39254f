// Jinja's filters (`x | trim`, `messages | map(attribute="role")`, ...): a table from each filter's name to
// the function that applies it, made of the groups in value_filters.cc and sequence_filters.cc. has_filter
// and apply_filter look names up there.

#include <string>

#include "engine/template/builtins/builtin_support.h"

namespace engine::template_::detail {
namespace {

const NamedFilter* find_filter(std::string_view name) {
  for (const std::span<const NamedFilter> group : {value_filters(), sequence_filters()}) {
    if (const NamedFilter* filter = find_named(group, name)) return filter;
  }
  return nullptr;
}

}  // namespace

bool has_filter(std::string_view name) {
  return find_filter(name) != nullptr;
}

Value apply_filter(Renderer& renderer, std::string_view name, const Value& operand, CallArgs args) {
  const NamedFilter* filter = find_filter(name);
  if (filter == nullptr) throw EvalError("no filter named '" + std::string(name) + "'");
  return filter->apply(renderer, name, operand, args);
}

}  // namespace engine::template_::detail
