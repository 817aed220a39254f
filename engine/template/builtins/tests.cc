// Jinja's tests (`x is defined`, `n is divisibleby 3`, ...): a table from each test's name to the function
// that applies it. has_test and apply_test look names up there.

#include <cmath>
#include <string>

#include "engine/template/builtins/builtin_support.h"

namespace engine::template_::detail {
namespace {

using TestFn = bool (*)(Renderer& renderer, std::string_view name, const Value& v, const CallArgs& args);
using NamedTest = Named<TestFn>;

// The one argument of a test that needs one (the tests that take none ignore their arguments).
Value argument(std::string_view name, const CallArgs& args, std::string_view parameter) {
  Params p(name, args, {parameter});
  if (!p.has(0)) throw EvalError("test '" + std::string(name) + "' needs an argument");
  return p.get(0);
}

double parity(const Value& v) {
  if (!v.is_number() || v.is_float()) {
    if (v.is_float()) return std::fmod(v.as_double(), 2.0);
    throw EvalError("unsupported operand type(s) for %: '" + std::string(v.type_name()) + "' and 'int'");
  }
  return static_cast<double>(((v.as_int() % 2) + 2) % 2);
}

// The tests of a value's type: `none`, `string`, `mapping`, ...
template <bool (Value::*is_kind)() const>
bool test_kind(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return (v.*is_kind)();
}

bool test_defined(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return !v.is_undefined();
}
bool test_true(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return v.is_bool() && v.as_bool();
}
bool test_false(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return v.is_bool() && !v.as_bool();
}
// Both `iterable` and `sequence`.
bool test_iterable(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
}
bool test_odd(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return parity(v) != 0;
}
bool test_even(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return parity(v) == 0;
}

bool test_divisibleby(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  const Value n = argument(name, args, "num");
  if (!v.is_number() || !n.is_number()) throw EvalError("divisibleby needs numbers");
  if (v.is_float() || n.is_float()) return n.as_double() != 0 && std::fmod(v.as_double(), n.as_double()) == 0;
  if (n.as_int() == 0) throw EvalError("integer division or modulo by zero");
  return v.as_int() % n.as_int() == 0;
}

bool test_eq(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return equals(v, argument(name, args, "other"));
}
bool test_ne(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return !equals(v, argument(name, args, "other"));
}
bool test_lt(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return compare(v, argument(name, args, "other")) < 0;
}
bool test_le(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return compare(v, argument(name, args, "other")) <= 0;
}
bool test_gt(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return compare(v, argument(name, args, "other")) > 0;
}
bool test_ge(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return compare(v, argument(name, args, "other")) >= 0;
}
bool test_in(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  return contains(argument(name, args, "seq"), v);
}

bool test_sameas(Renderer&, std::string_view name, const Value& v, const CallArgs& args) {
  const Value other = argument(name, args, "other");
  if (v.kind() != other.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == other.as_bool();
  if (v.is_int()) return v.as_int() == other.as_int();  // CPython caches small ints; close enough
  return v.identity() != nullptr && v.identity() == other.identity();
}

// `lower` and `upper` are str.islower() and str.isupper() of the value as a string.
bool string_case(Renderer& renderer, const Value& v, std::string_view method) {
  Value result;
  CallArgs none;
  string_method(renderer, v.str(), method, none, result);
  return result.as_bool();
}
bool test_lower(Renderer& renderer, std::string_view, const Value& v, const CallArgs&) {
  return string_case(renderer, v, "islower");
}
bool test_upper(Renderer& renderer, std::string_view, const Value& v, const CallArgs&) {
  return string_case(renderer, v, "isupper");
}

bool test_escaped(Renderer&, std::string_view, const Value&, const CallArgs&) {
  return false;
}
bool test_filter(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return v.is_string() && has_filter(v.as_string());
}
bool test_test(Renderer&, std::string_view, const Value& v, const CallArgs&) {
  return v.is_string() && has_test(v.as_string());
}

constexpr NamedTest kTests[] = {
    {"defined", test_defined},
    {"undefined", test_kind<&Value::is_undefined>},
    {"none", test_kind<&Value::is_none>},
    {"string", test_kind<&Value::is_string>},
    {"number", test_kind<&Value::is_number>},
    {"integer", test_kind<&Value::is_int>},
    {"float", test_kind<&Value::is_float>},
    {"boolean", test_kind<&Value::is_bool>},
    {"true", test_true},
    {"false", test_false},
    {"mapping", test_kind<&Value::is_dict>},
    {"iterable", test_iterable},
    {"sequence", test_iterable},
    {"callable", test_kind<&Value::is_callable>},
    {"odd", test_odd},
    {"even", test_even},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"==", test_eq},
    {"ne", test_ne},
    {"!=", test_ne},
    {"lt", test_lt},
    {"lessthan", test_lt},
    {"<", test_lt},
    {"le", test_le},
    {"<=", test_le},
    {"gt", test_gt},
    {"greaterthan", test_gt},
    {">", test_gt},
    {"ge", test_ge},
    {">=", test_ge},
    {"in", test_in},
    {"sameas", test_sameas},
    {"lower", test_lower},
    {"upper", test_upper},
    {"escaped", test_escaped},
    {"filter", test_filter},
    {"test", test_test},
};

}  // namespace

bool has_test(std::string_view name) {
  return find_named<TestFn>(kTests, name) != nullptr;
}

bool apply_test(Renderer& renderer, std::string_view name, const Value& v, CallArgs args) {
  const NamedTest* test = find_named<TestFn>(kTests, name);
  if (test == nullptr) throw EvalError("no test named '" + std::string(name) + "'");
  return test->apply(renderer, name, v, args);
}

}  // namespace engine::template_::detail
