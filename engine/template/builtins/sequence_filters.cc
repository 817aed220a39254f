// The filters that go over the items of a value (a list's items, a dict's keys, a string's characters):
// length, first, last, join, sort, unique, select, map, min, max, sum, ...

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "engine/template/builtins/builtin_support.h"
#include "engine/template/text.h"

namespace engine::template_::detail {
namespace {

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

Value filter_map(Renderer& renderer, std::string_view, const Value& operand, CallArgs& args) {
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

Value filter_minmax(Renderer&, std::string_view name, const Value& operand, CallArgs& args) {
  const bool want_max = name == "max";
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

Value filter_length(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  no_arguments(name, args);
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value::integer(0);
    case Value::Kind::kString: return Value::integer(static_cast<std::int64_t>(text::length(v.as_string())));
    case Value::Kind::kList: return Value::integer(static_cast<std::int64_t>(v.as_list().size()));
    case Value::Kind::kDict: return Value::integer(static_cast<std::int64_t>(v.as_dict().size()));
    default: throw EvalError("object of type '" + std::string(v.type_name()) + "' has no len()");
  }
}

Value filter_join(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
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

Value filter_first(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  no_arguments(name, args);
  if (v.is_string()) {
    const std::u32string cps = text::decode(v.as_string());
    return cps.empty() ? Value::undefined("first item") : Value::string(text::encode(cps.substr(0, 1)));
  }
  const std::vector<Value> items = list_of(v);
  return items.empty() ? Value::undefined("first item") : items.front();
}

Value filter_last(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  no_arguments(name, args);
  if (v.is_string()) {
    const std::u32string cps = text::decode(v.as_string());
    return cps.empty() ? Value::undefined("last item") : Value::string(text::encode(cps.substr(cps.size() - 1)));
  }
  const std::vector<Value> items = list_of(v);
  return items.empty() ? Value::undefined("last item") : items.back();
}

Value filter_list(Renderer&, std::string_view, const Value& v, CallArgs&) {
  return Value::list(list_of(v));
}

Value filter_items(Renderer&, std::string_view, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.as_dict().entries())
    pairs.push_back(Value::list({Value::string(key), value}, true));
  return Value::list(std::move(pairs));
}

Value filter_dictsort(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
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

Value filter_sort(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
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

Value filter_unique(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
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

Value filter_reverse(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
  no_arguments(name, args);
  if (v.is_string()) {
    const std::u32string cps = text::decode(v.as_string());
    return Value::string(text::encode(std::u32string(cps.rbegin(), cps.rend())));
  }
  std::vector<Value> items = list_of(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_batch(Renderer&, std::string_view name, const Value& v, CallArgs& args) {
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

Value filter_sum(Renderer& renderer, std::string_view name, const Value& v, CallArgs& args) {
  Params p(name, args, {"attribute", "start"});
  Value total = p.get(1, Value::integer(0));
  const Value attribute = p.get(0);
  for (const auto& item : list_of(v)) {
    total = binary_operation(renderer, "+", total, attribute.is_none() ? item : attribute_path(item, attribute.str()));
  }
  return total;
}

constexpr NamedFilter kSequenceFilters[] = {
    {"length", filter_length}, {"count", filter_length},  {"join", filter_join},         {"first", filter_first},
    {"last", filter_last},     {"list", filter_list},     {"items", filter_items},       {"dictsort", filter_dictsort},
    {"sort", filter_sort},     {"unique", filter_unique}, {"reverse", filter_reverse},   {"batch", filter_batch},
    {"select", filter_select}, {"reject", filter_select}, {"selectattr", filter_select}, {"rejectattr", filter_select},
    {"map", filter_map},       {"min", filter_minmax},    {"max", filter_minmax},        {"sum", filter_sum},
};

}  // namespace

std::span<const NamedFilter> sequence_filters() {
  return kSequenceFilters;
}

}  // namespace engine::template_::detail
