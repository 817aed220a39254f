// What the template's operators do to values: attribute and item access, slicing, iteration, `in`, and the
// binary operators with Python semantics.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/template/builtins/builtin_support.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

[[noreturn]] void undefined_error(const Value& v) {
  const std::string name = v.undefined_name();
  throw EvalError("'" + (name.empty() ? std::string("value") : name) + "' is undefined");
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  // Python's getattr comes first: dict methods win over keys of the same name, as in Jinja.
  if (std::optional<Value> method = bound_method(object, name)) return *std::move(method);
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(name)) return *v;
  } else if (object.is_namespace()) {
    if (const Value* v = object.as_namespace().attributes.find(name)) return *v;
  }
  return Value::undefined(std::string(name));
}

Value get_item(const Value& object, const Value& key) {
  if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    std::int64_t i = key.as_int();
    if (object.is_list()) {
      const auto n = static_cast<std::int64_t>(object.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
      return object.as_list()[static_cast<std::size_t>(i)];
    }
    const std::string& s = object.as_string();
    if (text::is_ascii(s)) {
      const auto n = static_cast<std::int64_t>(s.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
      return Value::string(s.substr(static_cast<std::size_t>(i), 1));
    }
    const std::u32string cps = text::decode(s);
    const auto n = static_cast<std::int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
    return Value::string(text::encode(cps.substr(static_cast<std::size_t>(i), 1)));
  }
  if (key.is_string()) {
    // Jinja's getitem: the item first, then the attribute of the same name.
    if (object.is_dict()) {
      if (const Value* v = object.as_dict().find(key.as_string())) return *v;
    }
    return get_attribute(object, key.as_string());
  }
  return Value::undefined();
}

Value slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (object.is_undefined()) return object;
  if (!object.is_list() && !object.is_string()) {
    throw EvalError("'" + std::string(object.type_name()) + "' object is not subscriptable");
  }
  auto index = [](const Value& v, std::string_view what) -> std::optional<std::int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) throw EvalError("slice " + std::string(what) + " must be an integer or None");
    return v.as_int();
  };
  const std::int64_t step = index(step_v, "step").value_or(1);
  if (step == 0) throw EvalError("slice step cannot be zero");
  const bool ascii = object.is_string() && text::is_ascii(object.as_string());
  const std::u32string cps = object.is_string() && !ascii ? text::decode(object.as_string()) : std::u32string();
  const auto n = static_cast<std::int64_t>(object.is_list() ? object.as_list().size()
                                           : ascii          ? object.as_string().size()
                                                            : cps.size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<std::int64_t> v, bool is_start) {
    const std::int64_t lower = step < 0 ? -1 : 0;
    const std::int64_t upper = step < 0 ? n - 1 : n;
    if (!v) return is_start ? (step < 0 ? upper : lower) : (step < 0 ? lower : upper);
    std::int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const std::int64_t start = adjust(index(start_v, "start"), true);
  const std::int64_t stop = adjust(index(stop_v, "stop"), false);
  std::vector<Value> items;
  std::string s;
  std::u32string out_cps;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    const auto at = static_cast<std::size_t>(i);
    if (object.is_list()) {
      items.push_back(object.as_list()[at]);
    } else if (ascii) {
      s += object.as_string()[at];
    } else {
      out_cps += cps[at];
    }
  }
  if (object.is_list()) return Value::list(std::move(items), object.is_tuple());
  return Value::string(ascii ? std::move(s) : text::encode(out_cps));
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return value.as_list();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.as_dict().size());
      for (const auto& entry : value.as_dict().entries()) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Kind::kString: {
      if (text::length(value.as_string()) > Limits{}.max_list_items) {
        throw EvalError("a string too long to iterate over", TemplateError::Kind::kLimit);
      }
      std::vector<Value> chars;
      for (char32_t cp : text::decode(value.as_string()))
        chars.push_back(Value::string(text::encode(std::u32string(1, cp))));
      return chars;
    }
    default: throw EvalError("'" + std::string(value.type_name()) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw EvalError("'in <string>' requires string as left operand, not " + std::string(item.type_name()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& v) { return equals(v, item); });
    case Value::Kind::kDict: return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default: throw EvalError("argument of type '" + std::string(container.type_name()) + "' is not iterable");
  }
}

Value binary_operation(Renderer& renderer, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.str();
    s += b.str();
    return make_string(renderer, std::move(s));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  auto unsupported = [&]() -> EvalError {
    return EvalError("unsupported operand type(s) for " + std::string(op) + ": '" + std::string(a.type_name()) +
                     "' and '" + std::string(b.type_name()) + "'");
  };
  if (a.is_number() && b.is_number()) {
    const bool floating = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_double() == 0) throw EvalError("division by zero");
      return Value::floating(a.as_double() / b.as_double());
    }
    if (floating) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value::floating(x + y);
      if (op == "-") return Value::floating(x - y);
      if (op == "*") return Value::floating(x * y);
      if (op == "**") {
        if (x == 0 && y < 0) throw EvalError("0.0 cannot be raised to a negative power");
        return Value::floating(std::pow(x, y));
      }
      if (y == 0) throw EvalError(op == "//" ? "float floor division by zero" : "float modulo");
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      if (op == "//") return Value::floating(floordiv);
      if (op == "%") return Value::floating(mod);
      throw unsupported();
    }
    const std::int64_t x = a.as_int(), y = b.as_int();
    std::int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw EvalError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) throw EvalError("integer overflow");
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) {
        if (x == 0) throw EvalError("0.0 cannot be raised to a negative power");
        return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      std::int64_t result = 1, base = x, e = y;
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) throw EvalError("integer overflow");
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) throw EvalError("integer overflow");
      }
      return Value::integer(result);
    }
    throw unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      renderer.check_string(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      renderer.check_list(a.as_list().size() + b.as_list().size());
      std::vector<Value> items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(items), a.is_tuple());
    }
    if (a.is_string()) throw EvalError("can only concatenate str (not \"" + std::string(b.type_name()) + "\") to str");
    throw unsupported();
  }
  if (op == "*") {
    const Value* sequence = (a.is_string() || a.is_list()) ? &a : (b.is_string() || b.is_list()) ? &b : nullptr;
    const Value* count = sequence == &a ? &b : &a;
    if (sequence != nullptr && (count->is_int() || count->is_bool())) {
      const std::int64_t n = std::max<std::int64_t>(0, count->as_int());
      if (sequence->is_string()) {
        const std::size_t size = sequence->as_string().size();
        if (size != 0 && static_cast<std::uint64_t>(n) > renderer.limits().max_value_bytes / size)
          renderer.check_string(SIZE_MAX);
        std::string out;
        out.reserve(size * static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) out += sequence->as_string();
        return Value::string(std::move(out));
      }
      const std::size_t size = sequence->as_list().size();
      if (size != 0 && static_cast<std::uint64_t>(n) > renderer.limits().max_list_items / size)
        renderer.check_list(SIZE_MAX);
      std::vector<Value> items;
      for (std::int64_t i = 0; i < n; ++i)
        items.insert(items.end(), sequence->as_list().begin(), sequence->as_list().end());
      return Value::list(std::move(items), sequence->is_tuple());
    }
  }
  if (op == "%" && a.is_string()) return make_string(renderer, percent_format(renderer, a.as_string(), b));
  throw unsupported();
}

}  // namespace engine::template_::detail
