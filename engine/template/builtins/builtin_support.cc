// The helpers all builtin files share: argument binding and checks, limit-checked results.

#include "engine/template/builtins/builtin_support.h"

#include <algorithm>

#include "engine/template/text.h"

namespace engine::template_::detail {

Params::Params(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names)
    : values_(names.size()) {
  if (args.positional.size() > names.size()) {
    throw EvalError(std::string(function) + "() takes at most " + std::to_string(names.size()) + " argument(s), got " +
                    std::to_string(args.positional.size()));
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      throw EvalError(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    }
    const auto index = static_cast<std::size_t>(it - names.begin());
    if (values_[index]) throw EvalError(std::string(function) + "() got multiple values for argument '" + key + "'");
    values_[index] = value;
  }
}

std::int64_t to_int(const Value& v, std::string_view what) {
  if (!v.is_int() && !v.is_bool()) {
    throw EvalError(std::string(what) + " must be an integer, not '" + std::string(v.type_name()) + "'");
  }
  return v.as_int();
}

std::optional<std::string> optional_string(const Value& v, std::string_view what) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string()) throw EvalError(std::string(what) + " must be a string or None");
  return v.as_string();
}

const std::string& require_string(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    throw EvalError(std::string(what) + " must be a string, not '" + std::string(v.type_name()) + "'");
  }
  return v.as_string();
}

void no_arguments(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) throw EvalError(std::string(name) + " takes no arguments");
}

Value make_list(Renderer& renderer, std::vector<Value> items, bool tuple) {
  renderer.check_list(items.size());
  return Value::list(std::move(items), tuple);
}

Value make_string(Renderer& renderer, std::string s) {
  renderer.check_string(s.size());
  return Value::string(std::move(s));
}

// Sizes the result before building it: replacing "" in a long string with a long string multiplies.
std::string checked_replace(Renderer& renderer, const std::string& s, const std::string& old_text,
                            const std::string& new_text, std::int64_t count) {
  std::int64_t n = old_text.empty() ? static_cast<std::int64_t>(text::length(s)) + 1 : text::count(s, old_text);
  if (count >= 0) n = std::min(n, count);
  const long double projected =
      static_cast<long double>(s.size()) + static_cast<long double>(n) * (static_cast<long double>(new_text.size()) -
                                                                          static_cast<long double>(old_text.size()));
  renderer.check_string(projected > 0 ? static_cast<std::size_t>(std::min<long double>(projected, 1e18L)) : 0);
  return text::replace(s, old_text, new_text, count);
}

}  // namespace engine::template_::detail
