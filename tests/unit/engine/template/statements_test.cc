// Statements: if, for (else, unpacking, filters, loop object, break/continue), set, macros, call, filter,
// with, generation, and Jinja's scoping rules.
#include <gtest/gtest.h>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::render_error;
using template_test::tpl::TemplateError;

TEST(TemplateStatements, IfElifElse) {
  const char* t = "{% if n > 2 %}big{% elif n > 0 %}small{% else %}zero{% endif %}";
  EXPECT_EQ(render(t, R"({"n": 5})"), "big");
  EXPECT_EQ(render(t, R"({"n": 1})"), "small");
  EXPECT_EQ(render(t, R"({"n": 0})"), "zero");
}

TEST(TemplateStatements, ForLoopsWithElseUnpackingAndFilter) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ x }}{% endfor %}"), "123");
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"a": 1, "b": 2}})"),
            "a=1;b=2;");
  EXPECT_EQ(render("{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}"), "3,7,");
  EXPECT_EQ(render("{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}"), "xy");
  EXPECT_EQ(render("{% for c in 'hé' %}[{{ c }}]{% endfor %}"), "[h][é]");
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }}{{ loop.last }}{% endfor %}"),
            "13False33False53True");
  EXPECT_EQ(render("{% for x in [1] if false %}a{% else %}filtered away{% endfor %}"), "filtered away");
}

TEST(TemplateStatements, LoopObject) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
            "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}/{% endfor %}"), "-2/1-3/2-/");
  EXPECT_EQ(render("{% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}"), "abca");
  EXPECT_EQ(render("{% for i in [1] %}{% for j in [2, 3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}"),
            "121");
}

TEST(TemplateStatements, BreakAndContinue) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "0134");
  // A break in the first iteration still counts as having iterated: no else.
  EXPECT_EQ(render("{% for i in [1] %}{% break %}{% else %}else{% endfor %}"), "");
}

TEST(TemplateStatements, SetScopingFollowsJinja) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  // Assignments inside a loop body stay in that iteration.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = i + 10 %}{% endfor %}|{{ x }}"), "111|1");
  // If blocks do not open a scope.
  EXPECT_EQ(render("{% if true %}{% set y = 'in' %}{% endif %}{{ y }}"), "in");
  // Namespaces carry state out of loops.
  EXPECT_EQ(render("{% set ns = namespace(n=0, found=false) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.n }}{{ ns.found }}"),
            "6False");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns }}"),
            "12<Namespace {'a': 1, 'b': 2}>");
  EXPECT_EQ(render_error("{% set d = {} %}{% set d.x = 1 %}").kind(), TemplateError::Kind::kRender);
}

TEST(TemplateStatements, BlockSet) {
  EXPECT_EQ(render("{% set c %}X{{ 1 + 1 }}{% endset %}[{{ c }}]"), "[X2]");
  EXPECT_EQ(render("{% set c | upper %}abc{% endset %}{{ c }}"), "ABC");
}

TEST(TemplateStatements, Macros) {
  EXPECT_EQ(
      render(
          "{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 3, 4, z=5) }}"),
      "12(){}|13(4,){'z': 5}");
  // Top-level variables are looked up when the macro runs, not where it is called from.
  EXPECT_EQ(render("{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}"), "6");
  EXPECT_EQ(render("{% macro m() %}{{ x }}{% endmacro %}{% for x in [1] %}{{ m() }}{% endfor %}", R"({"x": 3})"), "3");
  // Defaults may refer to earlier parameters.
  EXPECT_EQ(render("{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(4) }}"), "8");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}"
                   "{{ fact(5) }}"),
            "120");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").kind(), TemplateError::Kind::kRender);
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}").kind(), TemplateError::Kind::kRender);
}

TEST(TemplateStatements, CallBlocks) {
  EXPECT_EQ(
      render("{% macro box(title) %}[{{ title }}:{{ caller() }}]{% endmacro %}{% call box('t') %}body{% endcall %}"),
      "[t:body]");
  EXPECT_EQ(render("{% macro m(a) %}[{{ caller(a) }}]{% endmacro %}{% call(x) m(5) %}in{{ x }}{% endcall %}"), "[in5]");
}

TEST(TemplateStatements, FilterWithAndGenerationBlocks) {
  EXPECT_EQ(render("{% filter upper %}abc{{ 1 }}{% endfilter %}"), "ABC1");
  EXPECT_EQ(render("{% filter replace('a', 'o') | upper %}banana{% endfilter %}"), "BONONO");
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
  // transformers' assistant-mask marker renders its body in place.
  EXPECT_EQ(render("x{% generation %}inside{% endgeneration %}y"), "xinsidey");
  EXPECT_EQ(render("a\n  {%- generation -%}  b  {%- endgeneration %}"), "ab");
}

}  // namespace
