// The filters of one value: strings (trim, replace, center, indent, escape, ...), numbers (int, float, round,
// abs), JSON (tojson), and default and attr. The filters that go over a value's items are in
// sequence_filters.cc.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "engine/template/builtins/builtin_support.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

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

Value filter_tojson(Renderer& renderer, std::string_view, const Value& v, CallArgs& args) {
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

Value filter_safe(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return v;
}

Value filter_string(Renderer& renderer, std::string_view, const Value& v, CallArgs&) {
  return make_string(renderer, v.str(renderer.limits().max_value_bytes));
}

Value filter_trim(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  Params p(name, args, {"chars"});
  return Value::string(text::strip(v.str(), optional_string(p.get(0), "chars"), true, true));
}

Value filter_upper(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return Value::string(text::upper(v.str()));
}
Value filter_lower(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return Value::string(text::lower(v.str()));
}
Value filter_title(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return Value::string(text::jinja_title(v.str()));
}
Value filter_capitalize(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return Value::string(text::capitalize(v.str()));
}

Value filter_default(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  Params p(name, args, {"default_value", "boolean"});
  if (v.is_undefined() || (p.get(1, Value::boolean(false)).truthy() && !v.truthy())) {
    return p.get(0, Value::string(""));
  }
  return v;
}

Value filter_replace(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
  Params p(name, args, {"old", "new", "count"});
  const Value count = p.get(2);
  return make_string(renderer, checked_replace(renderer, v.str(), p.get(0).str(), p.get(1).str(),
                                               count.is_none() ? -1 : to_int(count, "replace() count")));
}

Value filter_wordcount(Renderer&, std::string_view, const Value& v, CallArgs&) {
  std::int64_t words = 0;
  bool in_word = false;
  for (char32_t cp : text::decode(v.str())) {
    const bool w = text::is_word(cp);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

Value filter_center(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
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

Value indent_lines(Renderer& renderer, const std::string& s, const Params& p) {
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

Value filter_indent(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
  return indent_lines(renderer, v.str(), Params(name, args, {"width", "first", "blank"}));
}

Value filter_int(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  const Params p(name, args, {"default", "base"});
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

Value filter_float(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  const Params p(name, args, {"default"});
  const Value fallback = p.get(0, Value::floating(0.0));
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.is_string()) {
    if (auto parsed = parse_python_float(v.as_string())) return Value::floating(*parsed);
  }
  return fallback;
}

Value filter_abs(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  no_arguments(name, args);
  if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw EvalError("integer overflow");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  throw EvalError("bad operand type for abs(): '" + std::string(v.type_name()) + "'");
}

Value filter_round(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  const Params p(name, args, {"precision", "method"});
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

Value filter_attr(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  Params p(name, args, {"name"});
  return get_attribute(v, require_string(p.get(0), "attribute name"));
}

Value filter_escape(Renderer& renderer, std::string_view, const Value& v, CallArgs&) {
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

constexpr NamedFilter kValueFilters[] = {
    {"tojson", filter_tojson},   {"safe", filter_safe},
    {"string", filter_string},   {"trim", filter_trim},
    {"upper", filter_upper},     {"lower", filter_lower},
    {"title", filter_title},     {"capitalize", filter_capitalize},
    {"default", filter_default}, {"d", filter_default},
    {"replace", filter_replace}, {"wordcount", filter_wordcount},
    {"center", filter_center},   {"indent", filter_indent},
    {"int", filter_int},         {"float", filter_float},
    {"abs", filter_abs},         {"round", filter_round},
    {"attr", filter_attr},       {"e", filter_escape},
    {"escape", filter_escape},   {"forceescape", filter_escape},
};

}  // namespace

std::span<const NamedFilter> value_filters() {
  return kValueFilters;
}

}  // namespace engine::template_::detail
