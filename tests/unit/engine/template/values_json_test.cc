// Values: JSON in and out, Python's printing, comparison, and the str methods templates call.
#include <gtest/gtest.h>

#include <limits>

#include "engine/template/value.h"
#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::tpl::Dict;
using template_test::tpl::Value;

TEST(TemplateValues, FromJsonKeepsKeyOrderAndNumberKinds) {
  const Value v =
      Value::parse_json(R"({"z": 1, "a": 2.5, "m": [true, null, "s"], "big": 18446744073709551615, "1": 0})");
  ASSERT_TRUE(v.is_dict());
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.as_dict().entries()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m", "big", "1"}));
  EXPECT_TRUE(v.as_dict().find("z")->is_int());
  EXPECT_TRUE(v.as_dict().find("a")->is_float());
  EXPECT_TRUE(v.as_dict().find("big")->is_float());  // beyond int64
  EXPECT_EQ(v.to_json(), R"({"z": 1, "a": 2.5, "m": [true, null, "s"], "big": 1.8446744073709552e+19, "1": 0})");
}

// Messages, tools and kwargs come from clients: a repeated key is read as Python reads it (first place,
// last value), so the template sees what the client's own JSON library meant.
TEST(TemplateValues, FromJsonRepeatedKeysKeepTheLastValue) {
  const Value v =
      Value::parse_json(R"({"role": "user", "content": "first", "x": [{"a": 1, "a": 2}], "content": "last"})");
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.as_dict().entries()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"role", "content", "x"}));
  EXPECT_EQ(v.to_json(), R"({"role": "user", "content": "last", "x": [{"a": 2}]})");
}

TEST(TemplateValues, BadJsonIsRefused) {
  EXPECT_THROW(Value::parse_json("{", "messages"), std::invalid_argument);
  EXPECT_THROW(Value::parse_json("[1] trailing"), std::invalid_argument);
  EXPECT_THROW(Value::parse_json("\"\xff\""), std::invalid_argument);
  // Deep nesting is refused without recursing (the parser and the conversion are iterative).
  EXPECT_NO_THROW(Value::parse_json(std::string(500, '[') + std::string(500, ']')));
  EXPECT_THROW(Value::parse_json(std::string(100000, '[') + std::string(100000, ']')), std::invalid_argument);
}

TEST(TemplateValues, LargeDictsLookUpByKey) {
  Dict d;
  for (int i = 0; i < 1000; ++i) d.set("k" + std::to_string(i), Value::integer(i));
  d.set("k5", Value::integer(-5));  // replacing keeps the position
  EXPECT_EQ(d.size(), 1000u);
  EXPECT_EQ(d.find("k999")->as_int(), 999);
  EXPECT_EQ(d.find("k5")->as_int(), -5);
  EXPECT_EQ(d.entries()[5].first, "k5");
  EXPECT_EQ(d.find("nope"), nullptr);
}

TEST(TemplateValues, FloatReprMatchesPython) {
  using template_test::tpl::python_float_repr;
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(123456789.123), "123456789.123");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(TemplateValues, JsonOutputEdgeCases) {
  Value::JsonOptions options;
  options.indent = "\t";
  EXPECT_EQ(Value::parse_json(R"({"a": [1]})").to_json(options), "{\n\t\"a\": [\n\t\t1\n\t]\n}");
  options.indent = "";  // indent=0: newlines without indentation, as Python
  EXPECT_EQ(Value::parse_json("[1, 2]").to_json(options), "[\n1,\n2\n]");
  EXPECT_EQ(Value::floating(std::numeric_limits<double>::infinity()).to_json(), "Infinity");
  EXPECT_EQ(Value::string("\x7f\u2028").to_json(), "\"\x7f\u2028\"");
  EXPECT_THROW(Value().to_json(), std::invalid_argument);
}

TEST(TemplateValues, EqualityAndOrdering) {
  using template_test::tpl::compare;
  using template_test::tpl::equals;
  EXPECT_TRUE(equals(Value::integer(1), Value::floating(1.0)));
  EXPECT_TRUE(equals(Value::boolean(true), Value::integer(1)));
  EXPECT_FALSE(equals(Value::string("1"), Value::integer(1)));
  EXPECT_FALSE(equals(Value::list({}, true), Value::list({})));
  EXPECT_TRUE(equals(Value::none(), Value::none()));
  EXPECT_LT(compare(Value::string("a"), Value::string("é")), 0);
  EXPECT_THROW(compare(Value::string("a"), Value::integer(1)), std::invalid_argument);
}

TEST(TemplateStringMethods, StripSplitAndFriends) {
  EXPECT_EQ(render("[{{ '  x \n'.strip() }}][{{ '\n\nx\n'.lstrip('\n') }}][{{ 'x  \n\n'.rstrip('\n') }}][{{ "
                   "'abcxa'.strip('ax') }}]"),
            "[x][x\n][x  ][bc]");
  EXPECT_EQ(
      render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(none, 1) }}{{ 'a,b,c'.split(',', 1) }}"),
      "['a', 'b', '', 'c']['a', 'b']['a', 'b c']['a', 'b,c']");
  EXPECT_EQ(render("{{ 'a,b,c'.rsplit(',', 1) }}{{ 'x\r\ny\nz'.splitlines() }}"), "['a,b', 'c']['x', 'y', 'z']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith(('x', 'y')) }}"),
            "TrueTrueFalse");
  EXPECT_EQ(render("{{ 'aXbXc'.replace('X', '-') }} {{ 'aXbXc'.replace('X', '-', 1) }} {{ 'ab'.replace('', '.') }}"),
            "a-b-c a-bXc .a.b.");
  EXPECT_EQ(render("{{ 'hello world'.title() }} {{ \"they're\".title() }} {{ 'hELLO'.capitalize() }} {{ 'Ab'.upper() "
                   "}}{{ 'Ab'.lower() }}"),
            "Hello World They'Re Hello ABab");
  EXPECT_EQ(
      render("{{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'banana'.count('an') }}"),
      "2 -1 4 2");
  EXPECT_EQ(render("{{ '-'.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }}"),
            "a-b True True True");
  EXPECT_EQ(render("{{ 'ß'.upper() }} {{ 'ÉCOLE'.lower() }} {{ 'ñandú'.title() }}"), "SS école Ñandú");
}

TEST(TemplateStringMethods, Format) {
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'b') }}|{{ '{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='x') }}"),
            "1 and b|ba|x!");
  EXPECT_EQ(render("{{ '{:>5}|{:<4}|{:^5}|{:.2f}|{:05d}|{!r}|{{}}'.format('a', 'b', 'c', 3.14159, 42, 'q') }}"),
            "    a|b   |  c  |3.14|00042|'q'|{}");
}

TEST(TemplateStringMethods, DictAndListMethods) {
  const char* ctx = R"({"d": {"a": 1, "b": 2}, "l": [1, 2, 2]})";
  EXPECT_EQ(
      render("{{ d.keys() | list }}{{ d.values() | list }}{{ d.items() | list }}{{ d.get('a') }}{{ d.get('z', 0) }}",
             ctx),
      "['a', 'b'][1, 2][('a', 1), ('b', 2)]10");
  EXPECT_EQ(render("{{ l.count(2) }}{{ l.index(2) }}", ctx), "21");
}

}  // namespace
