// The global functions templates call: range, namespace, dict, raise_exception, strftime_now.

#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <string>

#include "engine/template/builtins/builtin_support.h"

namespace engine::template_::detail {
namespace {

class BuiltinFunction : public Callable {
 public:
  using Fn = Value (*)(Renderer&, CallArgs&);
  BuiltinFunction(std::string_view name, Fn fn) : name_(name), fn_(fn) {}
  std::string_view name() const override { return name_; }
  Value call(Renderer& renderer, CallArgs args) const override { return fn_(renderer, args); }

 private:
  std::string_view name_;
  Fn fn_;
};

Value fn_range(Renderer& renderer, CallArgs& args) {
  if (!args.keyword.empty()) throw EvalError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw EvalError("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  std::int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = to_int(p[0], "range() argument");
  } else {
    start = to_int(p[0], "range() argument");
    stop = to_int(p[1], "range() argument");
    if (p.size() == 3) step = to_int(p[2], "range() argument");
  }
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  // Count first (in long double to avoid overflow), so a huge range fails before allocating.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  const long double count_ld = span / static_cast<long double>(step);
  const std::size_t count = count_ld <= 0 ? 0 : static_cast<std::size_t>(std::ceil(count_ld));
  renderer.check_list(count);
  std::vector<Value> items;
  items.reserve(count);
  for (std::size_t i = 0; i < count; ++i) items.push_back(Value::integer(start + static_cast<std::int64_t>(i) * step));
  return Value::list(std::move(items));
}

Dict dict_from_arguments(std::string_view function, const CallArgs& args) {
  if (args.positional.size() > 1) throw EvalError(std::string(function) + "() expected at most 1 positional argument");
  Dict d;
  if (args.positional.size() == 1) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.as_dict().entries()) d.set(key, value);
    } else if (source.is_list()) {
      for (const auto& pair : source.as_list()) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2 || !kv[0].is_string())
          throw EvalError(std::string(function) + "() expects (key, value) pairs with string keys");
        d.set(kv[0].as_string(), kv[1]);
      }
    } else {
      throw EvalError("'" + std::string(source.type_name()) + "' object is not iterable");
    }
  }
  for (const auto& [key, value] : args.keyword) d.set(key, value);
  return d;
}

Value fn_namespace(Renderer& renderer, CallArgs& args) {
  return renderer.make_namespace(dict_from_arguments("namespace", args));
}
Value fn_dict(Renderer&, CallArgs& args) {
  return Value::dict(dict_from_arguments("dict", args));
}

Value fn_raise_exception(Renderer&, CallArgs& args) {
  std::string message;
  if (!args.positional.empty()) message = args.positional[0].str();
  throw EvalError(message, TemplateError::Kind::kRaised);
}

Value fn_strftime_now(Renderer& renderer, CallArgs& args) {
  Params p("strftime_now", args, {"format"});
  const std::string format = require_string(p.get(0), "strftime_now() format");
  if (format.empty()) return Value::string("");
  if (format.size() > 256) throw EvalError("strftime_now() format too long");
  std::tm now{};
  if (renderer.options().now) {
    now = renderer.options().now();
  } else {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  std::string buffer(format.size() * 16 + 64, '\0');
  // The format is the template's, as Python's strftime takes it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const std::size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &now);
#pragma GCC diagnostic pop
  buffer.resize(n);
  return Value::string(std::move(buffer));
}

}  // namespace

Value global_function(std::string_view name) {
  // Function objects are immutable and shared by every render.
  static const Value kRange = Value::callable(std::make_shared<BuiltinFunction>("range", fn_range));
  static const Value kNamespace = Value::callable(std::make_shared<BuiltinFunction>("namespace", fn_namespace));
  static const Value kDict = Value::callable(std::make_shared<BuiltinFunction>("dict", fn_dict));
  static const Value kRaise = Value::callable(std::make_shared<BuiltinFunction>("raise_exception", fn_raise_exception));
  static const Value kStrftime = Value::callable(std::make_shared<BuiltinFunction>("strftime_now", fn_strftime_now));
  if (name == "range") return kRange;
  if (name == "namespace") return kNamespace;
  if (name == "dict") return kDict;
  if (name == "raise_exception") return kRaise;
  if (name == "strftime_now") return kStrftime;
  return Value::undefined(std::string(name));
}

}  // namespace engine::template_::detail
