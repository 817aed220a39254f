// The str, dict and list methods templates call, and the check that refuses the mutating ones.

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "engine/template/builtins/builtin_support.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

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

}  // namespace

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

std::optional<Value> bound_method(const Value& object, std::string_view name) {
  if (!is_method_name(object, name)) return std::nullopt;
  return Value::callable(std::make_shared<BoundMethod>(object, std::string(name)));
}

}  // namespace engine::template_::detail
