#include "engine/template/value.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "engine/format/json.h"
#include "engine/template/text.h"

namespace engine::template_ {

// ---- Dict ------------------------------------------------------------------------------------------------

namespace {
constexpr std::size_t kIndexThreshold = 8;
}

std::size_t Dict::index_of(std::string_view key) const {
  if (entries_.size() >= kIndexThreshold) {
    const auto it = index_.find(std::string(key));
    return it == index_.end() ? entries_.size() : it->second;
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first == key) return i;
  }
  return entries_.size();
}

void Dict::set(std::string key, Value value) {
  if (const std::size_t at = index_of(key); at < entries_.size()) {
    depth_ = std::max(depth_, value.depth() + 1);
    entries_[at].second = std::move(value);  // an existing key keeps its position, as in Python
    return;
  }
  depth_ = std::max(depth_, value.depth() + 1);
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() == kIndexThreshold) {
    for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  } else if (entries_.size() > kIndexThreshold) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  }
}

const Value* Dict::find(std::string_view key) const {
  const std::size_t at = index_of(key);
  return at < entries_.size() ? &entries_[at].second : nullptr;
}

// ---- construction ----------------------------------------------------------------------------------------

Value Value::undefined(std::string name) {
  return Value(Kind::kUndefined,
               name.empty() ? Payload{} : Payload{std::make_shared<const std::string>(std::move(name))});
}
Value Value::none() {
  return Value(Kind::kNone, {});
}
Value Value::boolean(bool b) {
  return Value(Kind::kBool, b);
}
Value Value::integer(std::int64_t i) {
  return Value(Kind::kInt, i);
}
Value Value::floating(double d) {
  return Value(Kind::kFloat, d);
}
Value Value::string(std::string s) {
  return Value(Kind::kString, std::make_shared<const std::string>(std::move(s)));
}
Value Value::list(std::vector<Value> items, bool tuple) {
  std::uint32_t depth = 1;
  for (const auto& item : items) depth = std::max(depth, item.depth() + 1);
  if (depth > kMaxNesting) throw std::invalid_argument("lists and dicts nested more than 512 deep");
  return Value(Kind::kList, std::make_shared<const ListData>(ListData{std::move(items), tuple, depth}));
}
Value Value::dict(Dict d) {
  if (d.depth() > kMaxNesting) throw std::invalid_argument("lists and dicts nested more than 512 deep");
  return Value(Kind::kDict, std::make_shared<const Dict>(std::move(d)));
}
Value Value::callable(CallablePtr fn) {
  return Value(Kind::kCallable, std::move(fn));
}
Value Value::make_namespace(NamespacePtr data) {
  return Value(Kind::kNamespace, std::move(data));
}

namespace {

// Iterative conversion: JSON nesting is bounded only by the parser, so recursion here could overflow.
Value convert_json(const rapidjson::Value& root) {
  struct Frame {
    const rapidjson::Value* json;
    std::size_t next = 0;
    std::vector<Value> items;
    Dict dict;
  };
  auto scalar = [](const rapidjson::Value& j, bool& is_container) -> Value {
    is_container = false;
    switch (j.GetType()) {
      case rapidjson::kNullType: return Value::none();
      case rapidjson::kFalseType: return Value::boolean(false);
      case rapidjson::kTrueType: return Value::boolean(true);
      case rapidjson::kStringType: return Value::string(std::string(j.GetString(), j.GetStringLength()));
      case rapidjson::kNumberType:
        if (j.IsInt64()) return Value::integer(j.GetInt64());
        return Value::floating(j.GetDouble());
      default: is_container = true; return {};
    }
  };
  bool container = false;
  Value top = scalar(root, container);
  if (!container) return top;

  std::vector<Frame> stack;
  stack.push_back(Frame{&root, 0, {}, {}});
  Value finished;
  while (!stack.empty()) {
    Frame& frame = stack.back();
    const rapidjson::Value& j = *frame.json;
    const std::size_t total = j.IsArray() ? j.Size() : j.MemberCount();
    if (frame.next == total) {
      finished = j.IsArray() ? Value::list(std::move(frame.items)) : Value::dict(std::move(frame.dict));
      stack.pop_back();
      if (stack.empty()) break;
      Frame& parent = stack.back();
      if (parent.json->IsArray()) {
        parent.items.push_back(std::move(finished));
      } else {
        const auto& member = parent.json->MemberBegin()[parent.next];
        parent.dict.set(std::string(member.name.GetString(), member.name.GetStringLength()), std::move(finished));
      }
      ++parent.next;
      continue;
    }
    const rapidjson::Value& child =
        j.IsArray() ? j[static_cast<rapidjson::SizeType>(frame.next)] : j.MemberBegin()[frame.next].value;
    Value v = scalar(child, container);
    if (container) {
      stack.push_back(Frame{&child, 0, {}, {}});
      continue;
    }
    if (j.IsArray()) {
      frame.items.push_back(std::move(v));
    } else {
      const auto& member = j.MemberBegin()[frame.next];
      frame.dict.set(std::string(member.name.GetString(), member.name.GetStringLength()), std::move(v));
    }
    ++frame.next;
  }
  return finished;
}

}  // namespace

Value Value::from_json(const rapidjson::Value& json) {
  return convert_json(json);
}

Value Value::parse_json(std::string_view text, std::string_view what) {
  std::size_t consumed = 0;
  std::string error;
  const rapidjson::Document doc = engine::format::parse_json_prefix(text, consumed, error);
  if (!error.empty()) throw std::invalid_argument(std::string(what) + " is not valid JSON: " + error);
  for (std::size_t i = consumed; i < text.size(); ++i) {
    const char c = text[i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      throw std::invalid_argument(std::string(what) + " has trailing data after the JSON value at byte " +
                                  std::to_string(i));
    }
  }
  return from_json(doc);
}

// ---- accessors -------------------------------------------------------------------------------------------

std::int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return as_bool() ? 1 : 0;
  return std::get<std::int64_t>(payload_);
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::kBool: return as_bool() ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(std::get<std::int64_t>(payload_));
    case Kind::kFloat: return std::get<double>(payload_);
    default: return 0;
  }
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList: return std::get<ListPtr>(payload_).get();
    case Kind::kDict: return std::get<DictPtr>(payload_).get();
    case Kind::kCallable: return std::get<CallablePtr>(payload_).get();
    case Kind::kNamespace: return std::get<NamespacePtr>(payload_).get();
    case Kind::kString: return std::get<StringPtr>(payload_).get();
    default: return nullptr;
  }
}

std::string Value::undefined_name() const {
  if (const auto* name = std::get_if<StringPtr>(&payload_)) return **name;
  return {};
}

std::uint32_t Value::depth() const {
  if (kind_ == Kind::kList) return std::get<ListPtr>(payload_)->depth;
  if (kind_ == Kind::kDict) return std::get<DictPtr>(payload_)->depth();
  return 0;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_double() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !as_list().empty();
    case Kind::kDict: return !as_dict().empty();
    case Kind::kCallable:
    case Kind::kNamespace: return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return is_tuple() ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kCallable: return "function";
    case Kind::kNamespace: return "Namespace";
  }
  return "object";
}

// ---- printing --------------------------------------------------------------------------------------------

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then laid out the way Python's repr does: positional notation while the
  // decimal exponent is in [-4, 16), scientific with a signed two-digit exponent otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<std::size_t>(result.ptr - buffer));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int decimal_point = exponent + 1;  // digits before the point
  if (decimal_point > -4 && decimal_point <= 16) {
    if (decimal_point <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decimal_point), '0');
      out += digits;
    } else if (static_cast<std::size_t>(decimal_point) >= digits.size()) {
      out += digits;
      out.append(static_cast<std::size_t>(decimal_point) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decimal_point));
      out += '.';
      out += digits.substr(static_cast<std::size_t>(decimal_point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += 'e';
  out += exponent < 0 ? '-' : '+';
  const int magnitude = exponent < 0 ? -exponent : exponent;
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
  return out;
}

namespace {

// repr() with an output budget, and Python's recursion guard for a namespace that contains itself.
class Printer {
 public:
  explicit Printer(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  void repr(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined: break;
      case Value::Kind::kNone: out_ += "None"; break;
      case Value::Kind::kBool: out_ += v.as_bool() ? "True" : "False"; break;
      case Value::Kind::kInt: out_ += std::to_string(v.as_int()); break;
      case Value::Kind::kFloat: out_ += python_float_repr(v.as_double()); break;
      case Value::Kind::kString: out_ += text::repr(v.as_string()); break;
      case Value::Kind::kList: {
        const bool tuple = v.is_tuple();
        out_ += tuple ? '(' : '[';
        const auto& items = v.as_list();
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out_ += ", ";
          repr(items[i]);
          check();
        }
        if (tuple && items.size() == 1) out_ += ',';
        out_ += tuple ? ')' : ']';
        break;
      }
      case Value::Kind::kDict: mapping(v.as_dict()); break;
      case Value::Kind::kNamespace: {
        const void* self = v.identity();
        out_ += "<Namespace ";
        if (std::find(active_.begin(), active_.end(), self) != active_.end()) {
          out_ += "{...}";
        } else {
          active_.push_back(self);
          mapping(v.as_namespace().attributes);
          active_.pop_back();
        }
        out_ += '>';
        break;
      }
      case Value::Kind::kCallable: out_ += "<function " + std::string(v.as_callable().name()) + ">"; break;
    }
    check();
  }

  std::string take() { return std::move(out_); }

 private:
  void mapping(const Dict& d) {
    out_ += '{';
    bool first = true;
    for (const auto& [key, value] : d.entries()) {
      if (!first) out_ += ", ";
      first = false;
      out_ += text::repr(key);
      out_ += ": ";
      repr(value);
    }
    out_ += '}';
  }
  void check() const {
    if (out_.size() > max_bytes_) {
      throw std::invalid_argument("value too large to print (over " + std::to_string(max_bytes_) + " bytes)");
    }
  }

  std::size_t max_bytes_;
  std::vector<const void*> active_;
  std::string out_;
};

}  // namespace

std::string Value::str(std::size_t max_bytes) const {
  if (kind_ == Kind::kUndefined) return {};
  if (kind_ == Kind::kString) return as_string();
  return repr(max_bytes);
}

std::string Value::repr(std::size_t max_bytes) const {
  Printer printer(max_bytes);
  printer.repr(*this);
  return printer.take();
}

namespace {

void write_json(const Value& v, const Value::JsonOptions& options, const std::string& item_sep,
                const std::string& key_sep, int depth, std::string& out) {
  if (depth > static_cast<int>(Value::kMaxNesting)) throw std::invalid_argument("value nested too deeply for JSON");
  if (out.size() > options.max_bytes) {
    throw std::invalid_argument("JSON too large (over " + std::to_string(options.max_bytes) + " bytes)");
  }
  auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float_repr(d);
      }
      return;
    }
    case Value::Kind::kString: out += text::json_quote(v.as_string(), options.ensure_ascii); return;
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        if (options.indent) newline(depth + 1);
        write_json(items[i], options, item_sep, key_sep, depth + 1, out);
      }
      if (options.indent) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const auto& entries = v.as_dict().entries();
      if (entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      order.reserve(entries.size());
      for (const auto& entry : entries) order.push_back(&entry);
      if (options.sort_keys) {
        std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (i > 0) out += item_sep;
        if (options.indent) newline(depth + 1);
        out += text::json_quote(order[i]->first, options.ensure_ascii);
        out += key_sep;
        write_json(order[i]->second, options, item_sep, key_sep, depth + 1, out);
      }
      if (options.indent) newline(depth);
      out += '}';
      return;
    }
    default: throw std::invalid_argument("Object of type " + std::string(v.type_name()) + " is not JSON serializable");
  }
}

}  // namespace

std::string Value::to_json(const JsonOptions& options) const {
  std::string item_sep = options.indent ? "," : ", ";
  std::string key_sep = ": ";
  if (options.separators) std::tie(item_sep, key_sep) = *options.separators;
  std::string out;
  write_json(*this, options, item_sep, key_sep, 0, out);
  return out;
}

// ---- comparison ------------------------------------------------------------------------------------------

namespace {

bool equals_within(const Value& a, const Value& b, std::size_t& budget);

int compare_within(const Value& a, const Value& b, std::size_t& budget);

constexpr std::size_t kComparisonBudget = std::size_t{1} << 24;

void spend(std::size_t& budget) {
  if (budget == 0) throw std::invalid_argument("comparison too large");
  --budget;
}

bool equals_within(const Value& a, const Value& b, std::size_t& budget) {
  spend(budget);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      if (a.identity() == b.identity()) return true;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equals_within(x[i], y[i], budget)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      if (a.identity() == b.identity()) return true;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (other == nullptr || !equals_within(value, *other, budget)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare_within(const Value& a, const Value& b, std::size_t& budget) {
  spend(budget);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const auto x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is how Python orders str.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_within(x[i], y[i], budget)) return compare_within(x[i], y[i], budget);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw std::invalid_argument("'<' not supported between instances of '" + std::string(a.type_name()) + "' and '" +
                              std::string(b.type_name()) + "'");
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  std::size_t budget = kComparisonBudget;
  return equals_within(a, b, budget);
}

int compare(const Value& a, const Value& b) {
  std::size_t budget = kComparisonBudget;
  return compare_within(a, b, budget);
}

}  // namespace engine::template_
