// One pythonic call read as Python reads its literals, written as JSON the way json.dumps writes them.
#include "serverd/parsers/python_call.h"

#include <gtest/gtest.h>

#include <string>

namespace serverd::parsers {
namespace {

// The arguments JSON of `call`, or "<refused>".
std::string arguments(std::string_view call) {
  const auto read = python_call(call);
  return read ? read->arguments : "<refused>";
}

TEST(PythonCall, ReadsTheNameAndKeywordArguments) {
  const auto call = python_call("get_weather(city=\"Paris\", days = 3 ,)");
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "get_weather");
  EXPECT_EQ(call->arguments, R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(arguments("_private_2(x_1=1)"), R"({"x_1": 1})");
}

TEST(PythonCall, StringsAsPythonReadsThem) {
  EXPECT_EQ(arguments(R"(f(a='it"s', b="it's"))"), R"({"a": "it\"s", "b": "it's"})");
  EXPECT_EQ(arguments(R"(f(a='tab\there\nline \\ \' \x41\u00e9\U0001F600 \101 \q'))"),
            "{\"a\": \"tab\\there\\nline \\\\ ' Aé😀 A \\\\q\"}");
  EXPECT_EQ(arguments(R"(f(a=r'C:\new\'x', b=R"\d+"))"), R"({"a": "C:\\new\\'x", "b": "\\d+"})");
  EXPECT_EQ(arguments("f(a='''multi\n'line' \"\"\" ''', b=\"\"\"x\"\"\")"),
            R"({"a": "multi\n'line' \"\"\" ", "b": "x"})");
  EXPECT_EQ(arguments("f(a='con' \"cat\"\n  'enated', b=u'unicode')"), R"({"a": "concatenated", "b": "unicode"})");
  EXPECT_EQ(arguments("f(a='line\\\ncontinued')"), R"({"a": "linecontinued"})");
  EXPECT_EQ(arguments("f(a='Grüße 世界')"), R"({"a": "Grüße 世界"})");
  EXPECT_EQ(arguments("f(a='')"), R"({"a": ""})");
}

TEST(PythonCall, NumbersAsPythonReadsThem) {
  EXPECT_EQ(arguments("f(a=0, b=-7, c=1_000, d=0x1F, e=0o17, f=0b101, g=-9223372036854775808)"),
            R"({"a": 0, "b": -7, "c": 1000, "d": 31, "e": 15, "f": 5, "g": -9223372036854775808})");
  EXPECT_EQ(arguments("f(a=1.5, b=.5, c=5., d=1e3, e=-2.5E-3, f=1e16, g=0.1, h=+3, i=1_0.0_1)"),
            R"({"a": 1.5, "b": 0.5, "c": 5.0, "d": 1000.0, "e": -0.0025, "f": 1e+16, "g": 0.1, "h": 3, "i": 10.01})");
}

TEST(PythonCall, ContainersAndConstants) {
  EXPECT_EQ(arguments("f(a=[1, 'two', [3.0, None]], b={'k': True, 'n': {'deep': False}}, c=[], d={}, e=(5))"),
            R"({"a": [1, "two", [3.0, null]], "b": {"k": true, "n": {"deep": false}}, "c": [], "d": {}, "e": 5})");
  // Keys that are not strings are written as json.dumps writes them; a repeated key keeps the last value.
  EXPECT_EQ(arguments("f(m={1: 'a', 2.5: 'b', True: 'c', None: 'd', 'x': 1, 'x': 2})"),
            R"({"m": {"1": "a", "2.5": "b", "true": "c", "null": "d", "x": 2}})");
}

TEST(PythonCall, RefusesWhatIsNotALiteralCall) {
  for (const std::string text : {"f(1)",          "f('a', b=2)",
                                 "f(a=1, a=2)",   "f(a=b)",
                                 "f(a=g())",      "f(a=1+2)",
                                 "f(a==1)",       "f(a=(1, 2))",
                                 "f(a={1, 2})",   "f(a=b'x')",
                                 "f(a=f'{x}')",   "f(a=ur'x')",
                                 "f(a=1j)",       "f(a=007)",
                                 "f(a=1__0)",     "f(a=1_)",
                                 "f(a=0x)",       "f(a=99999999999999999999)",
                                 "f(a=1e999)",    "f(a='\\N{BULLET}')",
                                 "f(a='\\x4')",   "f(a='\\ud800')",
                                 "f(a='x\ny')",   "f(a='open)",
                                 "f(a=[1, 2)",    "f(a={[1]: 2})",
                                 "f(a=-'x')",     "f(a=1) extra",
                                 "class(a=1)",    "f(None=1)",
                                 "f.g(a=1)",      "f(a=1 # comment\n)",
                                 "f(a=\"\xff\")", "f(a=True1)",
                                 "f(*args)",      "f(**kw)",
                                 "(a=1)",         "f"}) {
    EXPECT_EQ(arguments(text), "<refused>") << text;
  }
}

TEST(PythonCall, RefusesNestingBeyondWhatValuesHold) {
  const std::string deep = "f(a=" + std::string(600, '[') + std::string(600, ']') + ")";
  EXPECT_EQ(arguments(deep), "<refused>");
  const std::string fine = "f(a=" + std::string(50, '[') + std::string(50, ']') + ")";
  EXPECT_NE(arguments(fine), "<refused>");
}

}  // namespace
}  // namespace serverd::parsers
