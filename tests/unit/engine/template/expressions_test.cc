// Expressions: operators, truthiness, access, slicing, calls, undefined, how values print.
#include <gtest/gtest.h>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::render_error;
using template_test::tpl::TemplateError;

TEST(TemplateExpressions, ValuesPrintLikePythonStr) {
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ False }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 0.00001 }}"),
            "None|True|False|1.0|0.30000000000000004|1e+16|1e-05");
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}"), "[1, 'a', None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(render(R"({{ ["it's", 'say "hi"', 'both \' "'] }})"), R"(["it's", 'say "hi"', 'both \' "'])");
  EXPECT_EQ(render("{{ undefined_thing }}"), "");
  EXPECT_EQ(render("{{ x }}", R"({"x": 12345678901})"), "12345678901");
}

TEST(TemplateExpressions, Arithmetic) {
  EXPECT_EQ(render("{{ 3 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }}"),
            "1.5 2.0 3 -4 2 -2");
  EXPECT_EQ(render("{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 2 ** 10 }} {{ 1 + 1.5 }} {{ true + 1 }}"),
            "3.0 0.5 0.5 1024 2.5 2");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [1] * 2 }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ -(3) }} {{ +4 }}"),
            "ababab xx [1, 1] ab [1, 2] -3 4");
  EXPECT_EQ(render("{{ '%s-%d-%05.1f %%' % ('a', 7, 3.14159) }}"), "a-7-003.1 %");
}

TEST(TemplateExpressions, ConcatenationWithTilde) {
  EXPECT_EQ(render("{{ 'n=' ~ 1 ~ none ~ true ~ missing }}"), "n=1NoneTrue");
}

TEST(TemplateExpressions, ComparisonsChainLikePython) {
  EXPECT_EQ(
      render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }}"),
      "True False True True True True");
  EXPECT_EQ(render("{{ (1, 2) == [1, 2] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ none == none }} {{ 1 != 2 }}"),
            "False True True True");
  EXPECT_EQ(render("{{ 2 >= 2 }} {{ 3 <= 2 }} {{ 'b' > 'a' }}"), "True False True");
}

TEST(TemplateExpressions, MembershipTests) {
  EXPECT_EQ(render("{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}"),
            "True True True True");
  EXPECT_EQ(render("{{ 'a' in missing }} {{ 'a' not in missing }}"), "False True");
}

TEST(TemplateExpressions, LogicReturnsOperandsWithPythonTruthiness) {
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ '' or [] or 'y' }} {{ 1 and 2 }} {{ [] and 1 }} {{ not '' }} {{ not {} }}"),
            "x y 2 [] True True");
  EXPECT_EQ(render("{% if 0.0 or none or missing %}t{% else %}f{% endif %}"), "f");
}

TEST(TemplateExpressions, InlineIf) {
  EXPECT_EQ(render("{{ 'a' if true else 'b' }}{{ 'c' if false else 'd' }}[{{ 'e' if false }}]"), "ad[]");
}

TEST(TemplateExpressions, AttributeAndItemAccess) {
  const char* ctx = R"({"m": {"role": "user", "items": 7, "nested": {"x": [10, 20, 30]}}, "l": [1, 2, 3]})";
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.nested.x[1] }} {{ l[-1] }} {{ l.0 }} {{ m['items'] }}", ctx),
            "user user 20 3 1 7");
  // Attribute access takes Python's getattr first, so the dict method wins over the key.
  EXPECT_EQ(
      render("{{ m.items is callable }} {{ m.get('role') }} {{ m.get('nope', 'dflt') }} {{ m.get('nope') }}", ctx),
      "True user dflt None");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'abc'[-1] }} [{{ l[10] }}]", ctx), "é c []");
}

TEST(TemplateExpressions, UndefinedIsEmptyFalsyAndChains) {
  EXPECT_EQ(render("[{{ a }}][{{ a.b.c }}][{{ a['x'][0] }}]{% for x in a %}never{% endfor %}{{ a | length }}"),
            "[][][]0");
  EXPECT_EQ(render("{{ a is defined }} {{ a.b is undefined }} {% if not a %}falsy{% endif %}"), "False True falsy");
  EXPECT_EQ(render("{{ m.missing is defined }}", R"({"m": {}})"), "False");
}

TEST(TemplateExpressions, Slicing) {
  EXPECT_EQ(
      render("{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[::2] }} {{ 'abcdef'[-2:] }} {{ 'abcdef'[1:5:2] }}"),
      "bcd fedcba ace ef bd");
  EXPECT_EQ(render("{{ [1, 2, 3, 4][::-2] }} {{ [1, 2, 3][5:] }} {{ [1, 2, 3][:-1] }} {{ [1, 2, 3][-10:2] }}"),
            "[4, 2] [] [1, 2] [1, 2]");
  EXPECT_EQ(render("{{ 'héllo wörld'[1:4] }} {{ 'ab😀'[::-1] }}"), "éll 😀ba");
  EXPECT_EQ(render("{{ m[1:] }}", R"({"m": [{"r": 1}, {"r": 2}]})"), "[{'r': 2}]");
  EXPECT_EQ(render_error("{{ 'abc'[::0] }}").kind(), TemplateError::Kind::kRender);
}

TEST(TemplateExpressions, CallsWithKeywordArguments) {
  EXPECT_EQ(render("{% macro f(a, b=2, c=3) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1, c=9) }}"), "129");
  EXPECT_EQ(render("{{ 'a-b-c'.split('-', maxsplit=1) }}"), "['a', 'b-c']");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
}

TEST(TemplateExpressions, IsAndIsNotTests) {
  EXPECT_EQ(
      render("{{ 1 is odd }} {{ 1 is not odd }} {{ none is none }} {{ x is not defined }} {{ 4 is divisibleby 2 }}"),
      "True False True True True");
  EXPECT_EQ(render("{{ 3 is equalto(3) }} {{ 'a' is in 'abc' }} {{ 1 is sameas true }}"), "True True False");
}

}  // namespace
