#pragma once

#include <rapidjson/fwd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace engine::template_ {

class Callable;
class Dict;
struct NamespaceData;
namespace detail {
class Renderer;
}

// A template value: Python's types as Jinja sees them. Strings, lists and dicts are immutable once built
// (transformers renders chat templates in an immutable sandbox), so copies share their payload, also
// between threads. Namespaces are the one mutable kind; they only exist inside one render.
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable, kNamespace };

  struct ListData {
    std::vector<Value> items;
    bool tuple = false;
    std::uint32_t depth = 1;  // nesting of lists and dicts below and including this one
  };
  // Lists and dicts nest at most this deep (JSON inputs included), so printing, comparing and freeing
  // them cannot exhaust the stack.
  static constexpr std::uint32_t kMaxNesting = 512;
  // What str(), repr() and to_json() will produce at most unless told otherwise: shared sub-values can
  // make a small value print exponentially large.
  static constexpr std::size_t kDefaultPrintLimit = std::size_t{64} << 20;
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const Dict>;
  using CallablePtr = std::shared_ptr<const Callable>;
  using NamespacePtr = std::shared_ptr<NamespaceData>;

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  // Both throw std::invalid_argument when nesting would exceed kMaxNesting.
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(Dict d);
  static Value callable(CallablePtr fn);
  static Value make_namespace(NamespacePtr data);

  // Builds a value from JSON: objects keep their key order, integers that fit int64 stay integers, every
  // other number is a double (Python's json module, minus arbitrary precision).
  static Value from_json(const rapidjson::Value& json);
  // Parses JSON text with the bounded parser. Throws std::invalid_argument naming `what` on bad JSON.
  static Value parse_json(std::string_view text, std::string_view what = "JSON");

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool: Python's bool is an int.
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && std::get<ListPtr>(payload_)->tuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }

  bool as_bool() const { return std::get<bool>(payload_); }
  std::int64_t as_int() const;  // ints, and bools as 0/1
  double as_double() const;     // any number kind
  const std::string& as_string() const { return *std::get<StringPtr>(payload_); }
  const std::vector<Value>& as_list() const { return std::get<ListPtr>(payload_)->items; }
  const Dict& as_dict() const { return *std::get<DictPtr>(payload_); }
  const Callable& as_callable() const { return *std::get<CallablePtr>(payload_); }
  NamespaceData& as_namespace() const { return *std::get<NamespacePtr>(payload_); }
  // Identity of a shared payload (lists, dicts, namespaces, callables), for the `sameas` test.
  const void* identity() const;
  // For undefined values: the name that was looked up, for error messages (may be empty).
  std::string undefined_name() const;

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Nesting depth of lists and dicts (0 for scalars, strings, namespaces).
  std::uint32_t depth() const;
  // str(value) as Jinja prints it: undefined prints empty, None as "None", containers as Python's repr.
  // Throws std::invalid_argument past max_bytes.
  std::string str(std::size_t max_bytes = kDefaultPrintLimit) const;
  // repr(value), as Python prints list items and dict values (a namespace inside itself prints {...}).
  std::string repr(std::size_t max_bytes = kDefaultPrintLimit) const;

  // Python's json.dumps as transformers' tojson calls it (ensure_ascii=False, sort_keys=False by default).
  struct JsonOptions {
    std::optional<std::string> indent;  // nullopt: one line
    std::optional<std::pair<std::string, std::string>> separators;
    bool ensure_ascii = false;
    bool sort_keys = false;
    std::size_t max_bytes = kDefaultPrintLimit;
  };
  // Throws std::invalid_argument for values JSON cannot hold (undefined, callables, namespaces).
  std::string to_json(const JsonOptions& options) const;
  std::string to_json() const { return to_json(JsonOptions{}); }

  // The name Python gives the type in messages ("str", "int", "list", ...).
  std::string_view type_name() const;

 private:
  using Payload =
      std::variant<std::monostate, bool, std::int64_t, double, StringPtr, ListPtr, DictPtr, CallablePtr, NamespacePtr>;
  Value(Kind kind, Payload payload) : kind_(kind), payload_(std::move(payload)) {}

  Kind kind_ = Kind::kUndefined;
  Payload payload_;  // the string payload doubles as the name of an undefined value
};

// Insertion-ordered string-keyed mapping (Python dict semantics for the keys templates use).
class Dict {
 public:
  // Replaces the value of an existing key in place, as Python does.
  void set(std::string key, Value value);
  const Value* find(std::string_view key) const;
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  std::uint32_t depth() const { return depth_; }  // 1 + the deepest value

 private:
  std::size_t index_of(std::string_view key) const;  // entries_.size() when absent

  std::vector<std::pair<std::string, Value>> entries_;
  // Built once a dict grows past a few keys, so lookups in large (possibly hostile) objects stay O(1).
  std::unordered_map<std::string, std::size_t> index_;
  std::uint32_t depth_ = 1;
};

struct NamespaceData {
  Dict attributes;
};

// Arguments of a call as the template wrote them: positional first, then keyword in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Something a template can call: a global function, a macro, a bound string or dict method.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string_view name() const = 0;
  virtual Value call(detail::Renderer& renderer, CallArgs args) const = 0;
};

// Python equality (1 == 1.0 == True, deep comparison of lists and dicts, a tuple never equals a list).
// Deep comparisons visit at most a few million nodes (shared sub-values could make them exponential) and
// throw std::invalid_argument past that.
bool equals(const Value& a, const Value& b);
// Python ordering for <, <=, >, >=: negative, zero or positive. Throws std::invalid_argument for pairs
// Python cannot order.
int compare(const Value& a, const Value& b);

// Python's repr() of a float ("1.0", "0.1", "1e+16", "1e-05", "inf", "nan").
std::string python_float_repr(double d);

}  // namespace engine::template_
