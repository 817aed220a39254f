// Jinja's filters, tests and global functions, and the str / dict / list methods templates call, with the
// semantics of Python Jinja2 as transformers configures it.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>

#include "engine/template/renderer.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

// ---- argument binding ------------------------------------------------------------------------------------

// Binds positional and keyword arguments to named parameters, as a Python signature would.
class Params {
 public:
  Params(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names)
      : values_(names.size()) {
    if (args.positional.size() > names.size()) {
      throw EvalError(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                      " argument(s), got " + std::to_string(args.positional.size()));
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

  bool has(std::size_t i) const { return values_[i].has_value(); }
  Value get(std::size_t i, Value fallback = Value::none()) const { return values_[i] ? *values_[i] : fallback; }

 private:
  std::vector<std::optional<Value>> values_;
};

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

[[noreturn]] void undefined_error(const Value& v) {
  const std::string name = v.undefined_name();
  throw EvalError("'" + (name.empty() ? std::string("value") : name) + "' is undefined");
}

Value make_list(Renderer& renderer, std::vector<Value> items, bool tuple = false) {
  renderer.check_list(items.size());
  return Value::list(std::move(items), tuple);
}

Value make_string(Renderer& renderer, std::string s) {
  renderer.check_string(s.size());
  return Value::string(std::move(s));
}

// Python's round-half-even on the exact binary value, as round(x, n) does.
double python_round(double x, std::int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0 && digits <= 300) {
    char buffer[512];
    std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(digits), x);
    return std::strtod(buffer, nullptr);
  }
  if (digits < 0 && digits > -308) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  return x;
}

// Case-insensitive sort key, as Jinja's ignore_case: strings compare lowercased.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(text::lower(v.as_string()));
  return v;
}

// Jinja's make_attrgetter: dotted path, each part an item lookup (integers for numeric parts).
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = numeric ? get_item(v, Value::integer(std::strtoll(part.c_str(), nullptr, 10)))
                : get_item(v, Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

void stable_sort_values(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const int c = compare(keys[a], keys[b]);
    return reverse ? c > 0 : c < 0;
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (std::size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
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

// Counts the parts str.split would make, so a huge split fails before it allocates.
void check_split(Renderer& renderer, const std::string& s, const std::optional<std::string>& sep,
                 std::int64_t maxsplit) {
  std::size_t parts = 1;
  if (sep) {
    if (!sep->empty()) parts += static_cast<std::size_t>(text::count(s, *sep));
  } else {
    bool in_word = false;
    parts = 0;
    for (char32_t cp : text::decode(s)) {
      const bool word = !text::is_space(cp);
      if (word && !in_word) ++parts;
      in_word = word;
    }
  }
  if (maxsplit >= 0) parts = std::min(parts, static_cast<std::size_t>(maxsplit) + 1);
  renderer.check_list(parts);
}

// ---- Python str.format -----------------------------------------------------------------------------------

// Format widths and precisions: larger ones are template errors, never wrapped or saturated numbers.
constexpr std::size_t kMaxFormatWidth = 4096;
constexpr std::size_t kMaxFormatPrecision = 100;

// Reads the run of decimal digits at text[i] (advancing i past it) as a width or precision of at most
// `limit`. The digits are measured before they are converted, so no digit string can overflow.
std::size_t read_format_number(std::string_view text, std::size_t& i, std::size_t limit, std::string_view what) {
  const std::size_t start = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  const std::string_view digits = text.substr(start, i - start);
  const std::string_view significant = digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
  std::size_t value = 0;
  if (significant.size() <= std::to_string(limit).size()) {
    for (const char d : significant) value = value * 10 + static_cast<std::size_t>(d - '0');
    if (value <= limit) return value;
  }
  const std::string shown = digits.size() > 24 ? std::string(digits.substr(0, 24)) + "..." : std::string(digits);
  throw EvalError("format " + std::string(what) + " " + shown + " is over the limit of " + std::to_string(limit));
}

std::string format_field(const Value& v, std::string_view spec) {
  // [[fill]align][sign][0][width][,][.precision][type]
  char fill = ' ';
  char align = '\0';
  std::size_t i = 0;
  if (spec.size() >= 2 && (spec[1] == '<' || spec[1] == '>' || spec[1] == '^' || spec[1] == '=')) {
    fill = spec[0];
    align = spec[1];
    i = 2;
  } else if (!spec.empty() && (spec[0] == '<' || spec[0] == '>' || spec[0] == '^' || spec[0] == '=')) {
    align = spec[0];
    i = 1;
  }
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (align == '\0') fill = '0', align = '=';
    ++i;
  }
  const std::size_t width = read_format_number(spec, i, kMaxFormatWidth, "width");
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = static_cast<int>(read_format_number(spec, i, kMaxFormatPrecision, "precision"));
  }
  const char type = i < spec.size() ? spec[i++] : '\0';
  if (i != spec.size()) throw EvalError("invalid format specifier '" + std::string(spec) + "'");

  std::string body;
  bool numeric = false;
  if (type == 'd') {
    if (!v.is_int() && !v.is_bool())
      throw EvalError("unknown format code 'd' for object of type '" + std::string(v.type_name()) + "'");
    body = std::to_string(v.as_int());
    numeric = true;
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%') {
    if (!v.is_number())
      throw EvalError(std::string("unknown format code '") + type + "' for object of type '" +
                      std::string(v.type_name()) + "'");
    char buffer[512];
    const int p = precision < 0 ? 6 : precision;
    double x = v.as_double();
    const char* suffix = "";
    char conv = type == 'F' ? 'f' : type;
    if (type == '%') x *= 100, conv = 'f', suffix = "%";
    switch (conv) {
      case 'e': std::snprintf(buffer, sizeof buffer, "%.*e", p, x); break;
      case 'g': std::snprintf(buffer, sizeof buffer, "%.*g", p, x); break;
      default: std::snprintf(buffer, sizeof buffer, "%.*f", p, x); break;
    }
    body = std::string(buffer) + suffix;
    numeric = true;
  } else if (type == '\0' || type == 's') {
    if (type == '\0' && v.is_number() && !v.is_bool() && precision < 0) {
      body = v.str();
      numeric = true;
    } else if (type == '\0' && v.is_float() && precision >= 0) {
      char buffer[512];
      std::snprintf(buffer, sizeof buffer, "%.*g", precision, v.as_double());
      body = buffer;
      numeric = true;
    } else {
      body = v.str();
      if (precision >= 0) {
        const std::u32string cps = text::decode(body);
        if (cps.size() > static_cast<std::size_t>(precision))
          body = text::encode(cps.substr(0, static_cast<std::size_t>(precision)));
      }
    }
  } else {
    throw EvalError(std::string("unsupported format code '") + type + "'");
  }
  if (numeric && sign != '-' && !body.empty() && body[0] != '-') body.insert(body.begin(), sign);
  const std::size_t length = text::length(body);
  if (length >= width) return body;
  const std::size_t pad = width - length;
  if (align == '\0') align = numeric ? '>' : '<';
  switch (align) {
    case '<': return body + std::string(pad, fill);
    case '>': return std::string(pad, fill) + body;
    case '^': return std::string(pad / 2, fill) + body + std::string(pad - pad / 2, fill);
    default: {  // '=': padding after the sign
      const bool has_sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
      return has_sign ? body.substr(0, 1) + std::string(pad, fill) + body.substr(1) : std::string(pad, fill) + body;
    }
  }
}

std::string python_format(Renderer& renderer, const std::string& pattern, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '}') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw EvalError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const std::size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw EvalError("Single '{' encountered in format string");
    std::string field = pattern.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    char conversion = '\0';
    if (const std::size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (const std::size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : '\0';
      field.resize(bang);
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= args.positional.size())
        throw EvalError("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      v = args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const std::size_t index = std::strtoull(field.c_str(), nullptr, 10);
      if (index >= args.positional.size())
        throw EvalError("Replacement index " + field + " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [key, value] : args.keyword) {
        if (key == field) v = value, found = true;
      }
      if (!found) throw EvalError("KeyError: '" + field + "'");
    }
    if (conversion == 'r') {
      out += format_field(Value::string(v.repr()), spec);
    } else if (conversion == 's' || conversion == '\0') {
      out += format_field(conversion == 's' ? Value::string(v.str()) : v, spec);
    } else {
      throw EvalError(std::string("Unknown conversion specifier ") + conversion);
    }
    renderer.check_string(out.size());
  }
  return out;
}

// Python's printf-style `str % args` for the conversions templates use: %s %r %d %i %f (with flags, width
// and precision) and %%.
std::string percent_format(Renderer& renderer, const std::string& pattern, const Value& args) {
  const std::vector<Value> values = args.is_tuple() ? args.as_list() : std::vector<Value>{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    std::size_t j = i + 1;
    std::string flags;
    while (j < pattern.size() && (pattern[j] == '-' || pattern[j] == '+' || pattern[j] == ' ' || pattern[j] == '0'))
      flags += pattern[j++];
    const bool has_width = j < pattern.size() && pattern[j] >= '0' && pattern[j] <= '9';
    const std::size_t width = read_format_number(pattern, j, kMaxFormatWidth, "width");
    std::optional<std::size_t> precision;
    if (j < pattern.size() && pattern[j] == '.') {
      ++j;
      precision = read_format_number(pattern, j, kMaxFormatPrecision, "precision");
    }
    if (j >= pattern.size()) throw EvalError("incomplete format");
    const char conversion = pattern[j];
    i = j;
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw EvalError("not enough arguments for format string");
    const Value& v = values[next++];
    std::string spec;
    const bool left = flags.find('-') != std::string::npos;
    if (flags.find('0') != std::string::npos && !left) spec += "0";
    if (flags.find('+') != std::string::npos)
      spec = "+" + spec;
    else if (flags.find(' ') != std::string::npos)
      spec = " " + spec;
    if (left) spec = "<" + spec;
    if (has_width) spec += std::to_string(width);
    switch (conversion) {
      case 's':
        out += format_field(Value::string(v.str()), spec + (precision ? "." + std::to_string(*precision) : ""));
        break;
      case 'r': out += format_field(Value::string(v.repr()), spec); break;
      case 'd':
      case 'i':
        if (!v.is_number()) throw EvalError("%d format: a real number is required, not " + std::string(v.type_name()));
        out += format_field(Value::integer(v.is_float() ? static_cast<std::int64_t>(v.as_double()) : v.as_int()),
                            spec + "d");
        break;
      case 'f':
      case 'F':
        if (!v.is_number()) throw EvalError("%f format: a real number is required, not " + std::string(v.type_name()));
        out += format_field(v, spec + "." + std::to_string(precision.value_or(6)) + "f");
        break;
      default: throw EvalError(std::string("unsupported format character '") + conversion + "'");
    }
    renderer.check_string(out.size());
  }
  if (next < values.size()) throw EvalError("not all arguments converted during string formatting");
  return out;
}

// ---- callables -------------------------------------------------------------------------------------------

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

// obj.method taken as a value (without calling it right away).
class BoundMethod : public Callable {
 public:
  BoundMethod(Value object, std::string name) : object_(std::move(object)), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Value call(Renderer& renderer, CallArgs args) const override {
    Value result;
    if (!call_method(renderer, object_, name_, args, result)) throw EvalError("no method " + name_);
    return result;
  }

 private:
  Value object_;
  std::string name_;
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

// ---- methods ---------------------------------------------------------------------------------------------

bool string_method(Renderer& renderer, const std::string& s, std::string_view name, CallArgs& args, Value& result) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(name, args, {"chars"});
    result = Value::string(text::strip(s, optional_string(p.get(0), "chars"), name != "rstrip", name != "lstrip"));
  } else if (name == "split" || name == "rsplit") {
    Params p(name, args, {"sep", "maxsplit"});
    const auto sep = optional_string(p.get(0), "sep");
    const std::int64_t maxsplit = to_int(p.get(1, Value::integer(-1)), "maxsplit");
    check_split(renderer, s, sep, maxsplit);
    std::vector<std::string> parts;
    if (name == "rsplit" && maxsplit >= 0) {
      // rsplit with a limit splits from the right: reverse, split, reverse back.
      const std::u32string forward = text::decode(s);
      const std::u32string reversed_s(forward.rbegin(), forward.rend());
      std::optional<std::string> reversed_sep;
      if (sep) {
        const std::u32string sep_cps = text::decode(*sep);
        reversed_sep = text::encode(std::u32string(sep_cps.rbegin(), sep_cps.rend()));
      }
      for (auto& part : text::split(text::encode(reversed_s), reversed_sep, maxsplit)) {
        const std::u32string cps = text::decode(part);
        parts.insert(parts.begin(), text::encode(std::u32string(cps.rbegin(), cps.rend())));
      }
    } else {
      parts = text::split(s, sep, maxsplit);
    }
    std::vector<Value> items;
    items.reserve(parts.size());
    for (auto& part : parts) items.push_back(Value::string(std::move(part)));
    result = make_list(renderer, std::move(items));
  } else if (name == "splitlines") {
    Params p(name, args, {"keepends"});
    std::vector<Value> items;
    for (auto& line : text::splitlines(s, p.get(0, Value::boolean(false)).truthy()))
      items.push_back(Value::string(std::move(line)));
    result = make_list(renderer, std::move(items));
  } else if (name == "startswith" || name == "endswith") {
    Params p(name, args, {"prefix"});
    const Value prefix = p.get(0);
    auto matches = [&](const Value& candidate) {
      const std::string& x = require_string(candidate, std::string(name) + "() argument");
      if (x.size() > s.size()) return false;
      return name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    bool any = false;
    if (prefix.is_list() && prefix.is_tuple()) {
      for (const auto& candidate : prefix.as_list()) any = any || matches(candidate);
    } else {
      any = matches(prefix);
    }
    result = Value::boolean(any);
  } else if (name == "replace") {
    Params p(name, args, {"old", "new", "count"});
    result = make_string(renderer, checked_replace(renderer, s, require_string(p.get(0), "replace() old"),
                                                   require_string(p.get(1), "replace() new"),
                                                   to_int(p.get(2, Value::integer(-1)), "replace() count")));
  } else if (name == "upper") {
    result = Value::string(text::upper(s));
  } else if (name == "lower") {
    result = Value::string(text::lower(s));
  } else if (name == "title") {
    result = Value::string(text::title(s));
  } else if (name == "capitalize") {
    result = Value::string(text::capitalize(s));
  } else if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    Params p(name, args, {"sub"});
    const std::string& sub = require_string(p.get(0), std::string(name) + "() argument");
    const std::int64_t at = (name == "find" || name == "index") ? text::find(s, sub) : text::rfind(s, sub);
    if (at < 0 && (name == "index" || name == "rindex")) throw EvalError("substring not found");
    result = Value::integer(at);
  } else if (name == "count") {
    Params p(name, args, {"sub"});
    result = Value::integer(text::count(s, require_string(p.get(0), "count() argument")));
  } else if (name == "format") {
    result = Value::string(python_format(renderer, s, args));
  } else if (name == "join") {
    Params p(name, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(p.get(0))) {
      if (!first) out += s;
      first = false;
      out += require_string(item, "join() item");
      renderer.check_string(out.size());
    }
    result = Value::string(std::move(out));
  } else if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
             name == "isupper") {
    const std::u32string cps = text::decode(s);
    bool ok = !cps.empty();
    if (name == "islower" || name == "isupper") {
      bool cased = false;
      for (char32_t cp : cps) {
        if (text::is_cased_upper(cp)) {
          cased = true;
          ok = ok && name == "isupper";
        } else if (text::is_cased_lower(cp)) {
          cased = true;
          ok = ok && name == "islower";
        }
      }
      ok = ok && cased;
    } else {
      for (char32_t cp : cps) {
        const bool digit = cp >= '0' && cp <= '9';
        if (name == "isdigit") ok = ok && digit;
        if (name == "isspace") ok = ok && text::is_space(cp);
        if (name == "isalpha") ok = ok && text::is_word(cp) && !digit && cp != '_';
        if (name == "isalnum") ok = ok && text::is_word(cp) && cp != '_';
      }
    }
    result = Value::boolean(ok);
  } else {
    return false;
  }
  return true;
}

bool is_unsafe_method(const Value& object, std::string_view name) {
  static constexpr std::string_view kList[] = {"append", "extend", "insert", "pop",
                                               "remove", "clear",  "sort",   "reverse"};
  static constexpr std::string_view kDict[] = {"pop", "popitem", "update", "setdefault", "clear"};
  if (object.is_list()) return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (object.is_dict()) return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  return false;
}

bool is_method_name(const Value& object, std::string_view name) {
  static constexpr std::string_view kString[] = {
      "strip",  "lstrip", "rstrip",  "split",      "rsplit",  "splitlines", "startswith", "endswith", "replace",
      "upper",  "lower",  "title",   "capitalize", "find",    "rfind",      "index",      "rindex",   "count",
      "format", "join",   "isdigit", "isalpha",    "isalnum", "isspace",    "islower",    "isupper"};
  static constexpr std::string_view kDict[] = {"get", "items", "keys", "values"};
  static constexpr std::string_view kList[] = {"count", "index"};
  auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  if (object.is_string()) return in(kString);
  if (object.is_dict()) return in(kDict) || is_unsafe_method(object, name);
  if (object.is_list()) return in(kList) || is_unsafe_method(object, name);
  return false;
}

// ---- filters ---------------------------------------------------------------------------------------------

std::vector<Value> list_of(const Value& v) {
  return iterate(v);
}

Value filter_select(Renderer& renderer, std::string_view name, const Value& operand, CallArgs& args) {
  const bool by_attribute = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  if (!args.keyword.empty()) throw EvalError(std::string(name) + "() takes no keyword arguments");
  std::size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) throw EvalError(std::string(name) + "() missing the attribute argument");
    attribute = require_string(args.positional[next++], "attribute");
  }
  std::string test;
  if (next < args.positional.size()) test = require_string(args.positional[next++], "test name");
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
  std::vector<Value> out;
  for (const auto& item : list_of(operand)) {
    renderer.count_iteration();
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool passed = test.empty() ? subject.truthy() : apply_test(renderer, test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value filter_map(Renderer& renderer, const Value& operand, CallArgs& args) {
  std::optional<std::string> attribute;
  std::optional<Value> fallback;
  for (const auto& [key, value] : args.keyword) {
    if (key == "attribute") {
      attribute = require_string(value, "attribute");
    } else if (key == "default") {
      fallback = value;
    }
  }
  std::vector<Value> out;
  if (attribute) {
    for (const auto& item : list_of(operand)) {
      renderer.count_iteration();
      Value v = attribute_path(item, *attribute);
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) throw EvalError("map() needs a filter name or attribute=");
  const std::string filter = require_string(args.positional[0], "filter name");
  for (const auto& item : list_of(operand)) {
    renderer.count_iteration();
    CallArgs filter_args;
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    filter_args.keyword = args.keyword;
    out.push_back(apply_filter(renderer, filter, item, std::move(filter_args)));
  }
  return Value::list(std::move(out));
}

Value filter_indent(Renderer& renderer, const std::string& s, const Params& p) {
  const Value width = p.get(0, Value::integer(4));
  std::string indention;
  if (width.is_string()) {
    indention = width.as_string();
  } else {
    const std::int64_t n = to_int(width, "indent width");
    if (n < 0 || n > 4096) throw EvalError("indent width out of range");
    indention.assign(static_cast<std::size_t>(n), ' ');
  }
  const bool first = p.get(1, Value::boolean(false)).truthy();
  const bool blank = p.get(2, Value::boolean(false)).truthy();
  const auto line_count = static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')) + 1;
  renderer.check_string(s.size() +
                        (line_count + 1) * std::min<std::size_t>(indention.size(), SIZE_MAX / (line_count + 2)));
  // Jinja appends a newline before splitlines() so a trailing newline survives.
  const std::vector<std::string> lines = text::splitlines(s + "\n", false);
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

std::optional<std::int64_t> parse_python_int(std::string_view s, int base) {
  std::string digits;
  std::string trimmed = text::strip(s, std::nullopt, true, true);
  std::size_t i = 0;
  bool negative = false;
  if (i < trimmed.size() && (trimmed[i] == '+' || trimmed[i] == '-')) negative = trimmed[i++] == '-';
  if (base == 16 && trimmed.compare(i, 2, "0x") == 0) i += 2;
  bool previous_digit = false;
  for (; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (c == '_' && previous_digit && i + 1 < trimmed.size() && trimmed[i + 1] != '_') {
      previous_digit = false;
      continue;
    }
    digits += c;
    previous_digit = true;
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0' || digits[0] == '+' || digits[0] == '-' || digits[0] == ' ') return std::nullopt;
  return negative ? -v : v;
}

std::optional<double> parse_python_float(std::string_view s) {
  std::string trimmed = text::strip(s, std::nullopt, true, true);
  trimmed.erase(std::remove(trimmed.begin(), trimmed.end(), '_'), trimmed.end());
  if (trimmed.empty()) return std::nullopt;
  const std::string lowered = text::lower(trimmed);
  const std::string_view body = std::string_view(lowered).substr(lowered[0] == '+' || lowered[0] == '-' ? 1 : 0);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    return lowered[0] == '-' ? -v : v;
  }
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string_view::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(trimmed.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value filter_int(const Value& v, const Params& p) {
  const Value fallback = p.get(0, Value::integer(0));
  const std::int64_t base = to_int(p.get(1, Value::integer(10)), "base");
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<std::int64_t>(d));
  }
  if (v.is_string()) {
    if (auto parsed = parse_python_int(v.as_string(), static_cast<int>(base))) return Value::integer(*parsed);
    if (auto parsed = parse_python_float(v.as_string());
        parsed && std::isfinite(*parsed) && std::fabs(*parsed) < 9.2e18) {
      return Value::integer(static_cast<std::int64_t>(*parsed));
    }
  }
  return fallback;
}

Value filter_float(const Value& v, const Params& p) {
  const Value fallback = p.get(0, Value::floating(0.0));
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.is_string()) {
    if (auto parsed = parse_python_float(v.as_string())) return Value::floating(*parsed);
  }
  return fallback;
}

Value filter_round(const Value& v, const Params& p) {
  const std::int64_t precision = to_int(p.get(0, Value::integer(0)), "precision");
  const std::string method = p.get(1, Value::string("common")).str();
  if (!v.is_number()) throw EvalError("round() needs a number, got '" + std::string(v.type_name()) + "'");
  if (method == "common") {
    if (!v.is_float()) return Value::integer(v.as_int());  // round(int, n) stays an int for n >= 0
    return Value::floating(python_round(v.as_double(), precision));
  }
  if (method != "ceil" && method != "floor") throw EvalError("method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value::floating((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value filter_tojson(Renderer& renderer, const Value& v, const CallArgs& args) {
  // transformers' own tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  Value::JsonOptions options;
  options.ensure_ascii = p.get(0, Value::boolean(false)).truthy();
  const Value indent = p.get(1);
  if (indent.is_string()) {
    options.indent = indent.as_string();
  } else if (indent.is_int()) {
    const std::int64_t n = indent.as_int();
    if (n > 1024) throw EvalError("tojson indent too large");
    options.indent = std::string(n > 0 ? static_cast<std::size_t>(n) : 0, ' ');
  } else if (!indent.is_none()) {
    throw EvalError("tojson indent must be an integer or a string");
  }
  const Value separators = p.get(2);
  if (!separators.is_none()) {
    const std::vector<Value> parts = iterate(separators);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      throw EvalError("tojson separators must be a pair of strings");
    }
    options.separators = std::make_pair(parts[0].as_string(), parts[1].as_string());
  }
  options.sort_keys = p.get(3, Value::boolean(false)).truthy();
  options.max_bytes = renderer.limits().max_value_bytes;
  return make_string(renderer, v.to_json(options));
}

Value filter_minmax(Renderer&, bool want_max, const Value& operand, const CallArgs& args) {
  Params p(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = p.get(0, Value::boolean(false)).truthy();
  const Value attribute = p.get(1);
  const std::vector<Value> items = list_of(operand);
  if (items.empty()) return Value::undefined(want_max ? "max of an empty sequence" : "min of an empty sequence");
  std::size_t best = 0;
  auto key = [&](const Value& item) {
    return sort_key(attribute.is_none() ? item : attribute_path(item, attribute.str()), case_sensitive);
  };
  Value best_key = key(items[0]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    const int c = compare(k, best_key);
    if (want_max ? c > 0 : c < 0) best = i, best_key = std::move(k);
  }
  return items[best];
}

using FilterFn = Value (*)(Renderer&, std::string_view, const Value&, CallArgs&);

Value dispatch_filter(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
  auto no_arguments = [&]() {
    if (!args.positional.empty() || !args.keyword.empty()) throw EvalError(std::string(name) + " takes no arguments");
  };
  if (name == "tojson") return filter_tojson(renderer, v, args);
  if (name == "safe") return v;
  if (name == "string") return make_string(renderer, v.str(renderer.limits().max_value_bytes));
  if (name == "length" || name == "count") {
    no_arguments();
    switch (v.kind()) {
      case Value::Kind::kUndefined: return Value::integer(0);
      case Value::Kind::kString: return Value::integer(static_cast<std::int64_t>(text::length(v.as_string())));
      case Value::Kind::kList: return Value::integer(static_cast<std::int64_t>(v.as_list().size()));
      case Value::Kind::kDict: return Value::integer(static_cast<std::int64_t>(v.as_dict().size()));
      default: throw EvalError("object of type '" + std::string(v.type_name()) + "' has no len()");
    }
  }
  if (name == "trim") {
    Params p(name, args, {"chars"});
    return Value::string(text::strip(v.str(), optional_string(p.get(0), "chars"), true, true));
  }
  if (name == "upper") return Value::string(text::upper(v.str()));
  if (name == "lower") return Value::string(text::lower(v.str()));
  if (name == "title") return Value::string(text::jinja_title(v.str()));
  if (name == "capitalize") return Value::string(text::capitalize(v.str()));
  if (name == "default" || name == "d") {
    Params p(name, args, {"default_value", "boolean"});
    if (v.is_undefined() || (p.get(1, Value::boolean(false)).truthy() && !v.truthy())) {
      return p.get(0, Value::string(""));
    }
    return v;
  }
  if (name == "join") {
    Params p(name, args, {"d", "attribute"});
    const std::string separator = p.get(0, Value::string("")).str();
    const Value attribute = p.get(1);
    std::string out;
    bool first = true;
    for (const auto& item : list_of(v)) {
      if (!first) out += separator;
      first = false;
      out += attribute.is_none() ? item.str() : attribute_path(item, attribute.str()).str();
      renderer.check_string(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    Params p(name, args, {"old", "new", "count"});
    const Value count = p.get(2);
    return make_string(renderer, checked_replace(renderer, v.str(), p.get(0).str(), p.get(1).str(),
                                                 count.is_none() ? -1 : to_int(count, "replace() count")));
  }
  if (name == "first") {
    no_arguments();
    if (v.is_string()) {
      const std::u32string cps = text::decode(v.as_string());
      return cps.empty() ? Value::undefined("first item") : Value::string(text::encode(cps.substr(0, 1)));
    }
    const std::vector<Value> items = list_of(v);
    return items.empty() ? Value::undefined("first item") : items.front();
  }
  if (name == "last") {
    no_arguments();
    if (v.is_string()) {
      const std::u32string cps = text::decode(v.as_string());
      return cps.empty() ? Value::undefined("last item") : Value::string(text::encode(cps.substr(cps.size() - 1)));
    }
    const std::vector<Value> items = list_of(v);
    return items.empty() ? Value::undefined("last item") : items.back();
  }
  if (name == "list") return Value::list(list_of(v));
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [key, value] : v.as_dict().entries())
      pairs.push_back(Value::list({Value::string(key), value}, true));
    return Value::list(std::move(pairs));
  }
  if (name == "dictsort") {
    Params p(name, args, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict()) throw EvalError("dictsort needs a mapping, got '" + std::string(v.type_name()) + "'");
    const bool case_sensitive = p.get(0, Value::boolean(false)).truthy();
    const std::string by = p.get(1, Value::string("key")).str();
    if (by != "key" && by != "value") throw EvalError("You can only sort by either \"key\" or \"value\"");
    std::vector<Value> pairs, keys;
    for (const auto& [key, value] : v.as_dict().entries()) {
      pairs.push_back(Value::list({Value::string(key), value}, true));
      keys.push_back(sort_key(by == "key" ? Value::string(key) : value, case_sensitive));
    }
    stable_sort_values(pairs, keys, p.get(2, Value::boolean(false)).truthy());
    return Value::list(std::move(pairs));
  }
  if (name == "sort") {
    Params p(name, args, {"reverse", "case_sensitive", "attribute"});
    std::vector<Value> items = list_of(v);
    const bool case_sensitive = p.get(1, Value::boolean(false)).truthy();
    const Value attribute = p.get(2);
    std::vector<Value> keys;
    for (const auto& item : items) {
      keys.push_back(sort_key(attribute.is_none() ? item : attribute_path(item, attribute.str()), case_sensitive));
    }
    stable_sort_values(items, keys, p.get(0, Value::boolean(false)).truthy());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    Params p(name, args, {"case_sensitive", "attribute"});
    const bool case_sensitive = p.get(0, Value::boolean(false)).truthy();
    const Value attribute = p.get(1);
    std::vector<Value> out, seen;
    for (const auto& item : list_of(v)) {
      renderer.count_iteration();
      Value key = sort_key(attribute.is_none() ? item : attribute_path(item, attribute.str()), case_sensitive);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) {
            renderer.count_iteration();
            return equals(s, key);
          })) {
        seen.push_back(std::move(key));
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "reverse") {
    no_arguments();
    if (v.is_string()) {
      const std::u32string cps = text::decode(v.as_string());
      return Value::string(text::encode(std::u32string(cps.rbegin(), cps.rend())));
    }
    std::vector<Value> items = list_of(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "batch") {
    Params p(name, args, {"linecount", "fill_with"});
    const std::int64_t size = to_int(p.get(0), "batch linecount");
    if (size <= 0) throw EvalError("batch linecount must be positive");
    const bool fill = p.has(1) && !p.get(1).is_none();
    std::vector<Value> rows, row;
    for (const auto& item : list_of(v)) {
      row.push_back(item);
      if (static_cast<std::int64_t>(row.size()) == size) rows.push_back(Value::list(std::exchange(row, {})));
    }
    if (!row.empty()) {
      while (fill && static_cast<std::int64_t>(row.size()) < size) row.push_back(p.get(1));
      rows.push_back(Value::list(std::move(row)));
    }
    return Value::list(std::move(rows));
  }
  if (name == "wordcount") {
    std::int64_t words = 0;
    bool in_word = false;
    for (char32_t cp : text::decode(v.str())) {
      const bool w = text::is_word(cp);
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::integer(words);
  }
  if (name == "center") {
    Params p(name, args, {"width"});
    const std::int64_t width = to_int(p.get(0, Value::integer(80)), "center width");
    const std::string s = v.str();
    const auto length = static_cast<std::int64_t>(text::length(s));
    if (width <= length) return Value::string(s);
    renderer.check_string(static_cast<std::size_t>(width));
    const std::int64_t margin = width - length;
    const std::int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center
    return Value::string(std::string(static_cast<std::size_t>(left), ' ') + s +
                         std::string(static_cast<std::size_t>(margin - left), ' '));
  }
  if (name == "indent") return filter_indent(renderer, v.str(), Params(name, args, {"width", "first", "blank"}));
  if (name == "int") return filter_int(v, Params(name, args, {"default", "base"}));
  if (name == "float") return filter_float(v, Params(name, args, {"default"}));
  if (name == "abs") {
    no_arguments();
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) throw EvalError("integer overflow");
      return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    throw EvalError("bad operand type for abs(): '" + std::string(v.type_name()) + "'");
  }
  if (name == "round") return filter_round(v, Params(name, args, {"precision", "method"}));
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return filter_select(renderer, name, v, args);
  }
  if (name == "map") return filter_map(renderer, v, args);
  if (name == "min" || name == "max") return filter_minmax(renderer, name == "max", v, args);
  if (name == "sum") {
    Params p(name, args, {"attribute", "start"});
    Value total = p.get(1, Value::integer(0));
    const Value attribute = p.get(0);
    for (const auto& item : list_of(v)) {
      total =
          binary_operation(renderer, "+", total, attribute.is_none() ? item : attribute_path(item, attribute.str()));
    }
    return total;
  }
  if (name == "attr") {
    Params p(name, args, {"name"});
    return get_attribute(v, require_string(p.get(0), "attribute name"));
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    std::string out;
    for (char c : v.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return make_string(renderer, std::move(out));
  }
  throw EvalError("no filter named '" + std::string(name) + "'");
}

constexpr std::string_view kFilters[] = {
    "abs",     "attr",    "batch", "capitalize", "center",      "count",      "d",    "default", "dictsort",
    "e",       "escape",  "first", "float",      "forceescape", "indent",     "int",  "items",   "join",
    "last",    "length",  "list",  "lower",      "map",         "max",        "min",  "reject",  "rejectattr",
    "replace", "reverse", "round", "safe",       "select",      "selectattr", "sort", "string",  "sum",
    "title",   "tojson",  "trim",  "unique",     "upper",       "wordcount"};

constexpr std::string_view kTests[] = {
    "boolean", "callable",  "defined", "divisibleby", "eq",     "equalto", "escaped",  "even",     "false",    "filter",
    "float",   "ge",        "gt",      "greaterthan", "in",     "integer", "iterable", "le",       "lessthan", "lower",
    "lt",      "mapping",   "ne",      "none",        "number", "odd",     "sameas",   "sequence", "string",   "test",
    "true",    "undefined", "upper",   "==",          "!=",     "<",       "<=",       ">",        ">="};

}  // namespace

// ---- public entry points ---------------------------------------------------------------------------------

bool has_filter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}
bool has_test(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Value apply_filter(Renderer& renderer, std::string_view name, const Value& operand, CallArgs args) {
  return dispatch_filter(renderer, name, operand, args);
}

bool apply_test(Renderer& renderer, std::string_view name, const Value& v, CallArgs args) {
  auto argument = [&](std::string_view parameter) -> Value {
    Params p(name, args, {parameter});
    if (!p.has(0)) throw EvalError("test '" + std::string(name) + "' needs an argument");
    return p.get(0);
  };
  auto parity = [&]() {
    if (!v.is_number() || v.is_float()) {
      if (v.is_float()) return std::fmod(v.as_double(), 2.0);
      throw EvalError("unsupported operand type(s) for %: '" + std::string(v.type_name()) + "' and 'int'");
    }
    return static_cast<double>(((v.as_int() % 2) + 2) % 2);
  };
  (void)renderer;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "odd") return parity() != 0;
  if (name == "even") return parity() == 0;
  if (name == "divisibleby") {
    const Value n = argument("num");
    if (!v.is_number() || !n.is_number()) throw EvalError("divisibleby needs numbers");
    if (v.is_float() || n.is_float()) return n.as_double() != 0 && std::fmod(v.as_double(), n.as_double()) == 0;
    if (n.as_int() == 0) throw EvalError("integer division or modulo by zero");
    return v.as_int() % n.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, argument("other"));
  if (name == "ne" || name == "!=") return !equals(v, argument("other"));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, argument("other")) < 0;
  if (name == "le" || name == "<=") return compare(v, argument("other")) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, argument("other")) > 0;
  if (name == "ge" || name == ">=") return compare(v, argument("other")) >= 0;
  if (name == "in") return contains(argument("seq"), v);
  if (name == "sameas") {
    const Value other = argument("other");
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == other.as_bool();
    if (v.is_int()) return v.as_int() == other.as_int();  // CPython caches small ints; close enough
    return v.identity() != nullptr && v.identity() == other.identity();
  }
  if (name == "lower" || name == "upper") {
    Value result;
    CallArgs none;
    string_method(renderer, v.str(), name == "lower" ? "islower" : "isupper", none, result);
    return result.as_bool();
  }
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && has_filter(v.as_string());
  if (name == "test") return v.is_string() && has_test(v.as_string());
  throw EvalError("no test named '" + std::string(name) + "'");
}

bool call_method(Renderer& renderer, const Value& object, std::string_view name, CallArgs& args, Value& result) {
  if (is_unsafe_method(object, name)) {
    throw EvalError("access to attribute '" + std::string(name) + "' of '" + std::string(object.type_name()) +
                    "' object is unsafe (chat templates render in an immutable sandbox)");
  }
  if (object.is_string()) return string_method(renderer, object.as_string(), name, args, result);
  if (object.is_dict()) {
    const Dict& d = object.as_dict();
    if (name == "get") {
      Params p("get", args, {"key", "default"});
      const Value key = p.get(0);
      const Value* found = key.is_string() ? d.find(key.as_string()) : nullptr;
      result = found ? *found : p.get(1);
      return true;
    }
    if (name == "items" || name == "keys" || name == "values") {
      Params p(name, args, {});
      std::vector<Value> out;
      out.reserve(d.size());
      for (const auto& [key, value] : d.entries()) {
        if (name == "items") {
          out.push_back(Value::list({Value::string(key), value}, true));
        } else {
          out.push_back(name == "keys" ? Value::string(key) : value);
        }
      }
      result = Value::list(std::move(out));
      return true;
    }
    return false;
  }
  if (object.is_list() && (name == "count" || name == "index")) {
    Params p(name, args, {"value"});
    const Value needle = p.get(0);
    const auto& items = object.as_list();
    std::int64_t count = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], needle)) continue;
      if (name == "index") {
        result = Value::integer(static_cast<std::int64_t>(i));
        return true;
      }
      ++count;
    }
    if (name == "index") throw EvalError(needle.repr() + " is not in list");
    result = Value::integer(count);
    return true;
  }
  return false;
}

Value get_attribute(const Value& object, std::string_view name) {
  // Python's getattr comes first: dict methods win over keys of the same name, as in Jinja.
  if (is_method_name(object, name)) {
    return Value::callable(std::make_shared<BoundMethod>(object, std::string(name)));
  }
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
