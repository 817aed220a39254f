#pragma once

// What the builtins share (not part of the renderer's interface): argument binding, argument checks, the
// limit-checked constructors, and the few functions one builtin file calls in another. The builtins are
// Jinja's filters, tests and global functions, and the str / dict / list methods templates call, with the
// semantics of Python Jinja2 as transformers configures it.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/renderer.h"

namespace engine::template_::detail {

// ---- argument binding ------------------------------------------------------------------------------------

// Binds positional and keyword arguments to named parameters, as a Python signature would.
class Params {
 public:
  Params(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names);

  bool has(std::size_t i) const { return values_[i].has_value(); }
  Value get(std::size_t i, Value fallback = Value::none()) const { return values_[i] ? *values_[i] : fallback; }

 private:
  std::vector<std::optional<Value>> values_;
};

std::int64_t to_int(const Value& v, std::string_view what);
std::optional<std::string> optional_string(const Value& v, std::string_view what);
const std::string& require_string(const Value& v, std::string_view what);
// For filters that take no arguments.
void no_arguments(std::string_view name, const CallArgs& args);

// ---- limit-checked results -------------------------------------------------------------------------------

Value make_list(Renderer& renderer, std::vector<Value> items, bool tuple = false);
Value make_string(Renderer& renderer, std::string s);
// str.replace and the replace filter.
std::string checked_replace(Renderer& renderer, const std::string& s, const std::string& old_text,
                            const std::string& new_text, std::int64_t count);

// ---- across the builtin files ----------------------------------------------------------------------------

// format.cc: Python's str.format and printf-style `str % args`.
std::string python_format(Renderer& renderer, const std::string& pattern, const CallArgs& args);
std::string percent_format(Renderer& renderer, const std::string& pattern, const Value& args);

// methods.cc: the str methods (the lower and upper tests use islower and isupper); false when there is no
// such method.
bool string_method(Renderer& renderer, const std::string& s, std::string_view name, CallArgs& args, Value& result);
// methods.cc: obj.method taken as a value (without calling it right away); nullopt when `object` has no
// method of that name.
std::optional<Value> bound_method(const Value& object, std::string_view name);

// An entry of the filter and test tables. A filter or test gets the name it was called by, so that aliases
// (d, e, count, equalto, ...) report errors under that name.
template <typename Fn>
struct Named {
  std::string_view name;
  Fn apply;
};

template <typename Fn>
const Named<Fn>* find_named(std::span<const Named<Fn>> table, std::string_view name) {
  const auto it = std::find_if(table.begin(), table.end(), [&](const Named<Fn>& entry) { return entry.name == name; });
  return it == table.end() ? nullptr : &*it;
}

// The filter table (filters.cc) is made of these groups.
using FilterFn = Value (*)(Renderer& renderer, std::string_view name, const Value& operand, CallArgs& args);
using NamedFilter = Named<FilterFn>;
std::span<const NamedFilter> value_filters();     // value_filters.cc: a filter of one value
std::span<const NamedFilter> sequence_filters();  // sequence_filters.cc: a filter over the items of a value

}  // namespace engine::template_::detail
