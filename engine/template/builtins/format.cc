// Python's string formatting for templates: str.format and printf-style `str % args`, both built on
// format_field, which applies one format spec to one value.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "engine/template/builtins/builtin_support.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

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

// A float's integer part, as %d prints it; Python's errors for what has none, and a template error for
// what a 64-bit integer cannot hold (converting those would be undefined behaviour).
std::int64_t truncated_integer(double d) {
  if (std::isnan(d)) throw EvalError("cannot convert float NaN to integer");
  if (std::isinf(d)) throw EvalError("cannot convert float infinity to integer");
  if (std::fabs(d) >= 9.2e18) throw EvalError("%d format: " + python_float_repr(d) + " is beyond a 64-bit integer");
  return static_cast<std::int64_t>(d);
}

}  // namespace

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
        out += format_field(Value::integer(v.is_float() ? truncated_integer(v.as_double()) : v.as_int()), spec + "d");
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

}  // namespace engine::template_::detail
