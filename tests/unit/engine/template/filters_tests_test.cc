// Every filter and test, with Python Jinja's results.
#include <gtest/gtest.h>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::render_error;
using template_test::tpl::TemplateError;

constexpr const char* kMessages =
    R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo", "meta": {"n": 2}},
                    {"role": "user", "content": "Bye"}], "d": {"b": 1, "A": 3, "a": 2}})";

TEST(TemplateFilters, Strings) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'aBc' | upper }}|{{ 'aBc' | lower }}"),
            "x|a|ABC|abc");
  EXPECT_EQ(render("{{ 'hELLO wOrld-x' | title }}|{{ 'hELLO' | capitalize }}|{{ 'ab' | center(6) }}|"),
            "Hello World-X|Hello|  ab  |");
  EXPECT_EQ(render("{{ 'aXbX' | replace('X', 'y') }}|{{ 'aXbX' | replace('X', 'y', 1) }}|{{ 'a b  c' | wordcount }}"),
            "ayby|aybX|3");
  EXPECT_EQ(render("{{ 3 | string }}{{ none | string }}{{ [1] | string }}|{{ '<a&b>' | e }}|{{ '<x>' | safe }}"),
            "3None[1]|&lt;a&amp;b&gt;|<x>");
  EXPECT_EQ(render("{{ 'héllo' | length }} {{ 'héllo' | count }} {{ [1, 2] | length }} {{ {'a': 1} | length }}"),
            "5 5 2 1");
}

TEST(TemplateFilters, Indent) {
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent }}"), "a\n    b\n\n    c");
  EXPECT_EQ(render("{{ 'a\nb' | indent(2, true) }}"), "  a\n  b");
  EXPECT_EQ(render("{{ 'a\n\nb' | indent(2, blank=true) }}"), "a\n  \n  b");
  EXPECT_EQ(render("{{ 'a\nb' | indent('> ') }}"), "a\n> b");
  EXPECT_EQ(render("{{ 'a\n' | indent }}"), "a\n");
}

TEST(TemplateFilters, DefaultAndNumbers) {
  EXPECT_EQ(render("{{ x | default('d') }}|{{ none | default('d') }}|{{ '' | default('d', true) }}|{{ x | d }}|"),
            "d|None|d||");
  EXPECT_EQ(
      render("{{ '42' | int }} {{ ' 7 ' | int }} {{ '3.7' | int }} {{ 'x' | int }} {{ 'x' | int(5) }} {{ 2.9 | int }}"),
      "42 7 3 0 5 2");
  EXPECT_EQ(render("{{ '1e3' | float }} {{ 'x' | float }} {{ 2 | float }} {{ -3 | abs }} {{ -2.5 | abs }}"),
            "1000.0 0.0 2.0 3 2.5");
  EXPECT_EQ(
      render(
          "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 1.234 | round(1, 'ceil') }}"),
      "2.0 4.0 2.67 3 1.3");
  EXPECT_EQ(render("{{ [3, 1, 2] | max }} {{ ['b', 'A', 'c'] | min }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }}"),
            "3 A 6 3.5");
}

TEST(TemplateFilters, Sequences) {
  EXPECT_EQ(
      render(
          "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} [{{ [] | first }}] {{ 'abc' | first }} {{ 'abc' | last }}"),
      "1 3 [] a c");
  EXPECT_EQ(render("{{ 'ab' | list }} {{ {'k': 1} | list }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }}"),
            "['a', 'b'] ['k'] [2, 1] cba");
  EXPECT_EQ(render("{{ [1, 'a'] | join('-') }} {{ ['x', 'y'] | join }} {{ messages | join(', ', attribute='role') }}",
                   kMessages),
            "1-a xy user, assistant, user");
  EXPECT_EQ(render("{{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | "
                   "sort(reverse=true) }}"),
            "['A', 'b', 'c'] ['A', 'b', 'c'] [3, 2, 1]");
  EXPECT_EQ(render("{{ messages | sort(attribute='content') | map(attribute='content') | join(',') }}", kMessages),
            "Bye,Hi,Yo");
  EXPECT_EQ(render("{{ [1, 1, 2, 'a', 'A'] | unique | list }} {{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | "
                   "batch(2, 0) | list }}"),
            "[1, 2, 'a'] [[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]");
}

TEST(TemplateFilters, Mappings) {
  EXPECT_EQ(render("{{ d | items | list }}", kMessages), "[('b', 1), ('A', 3), ('a', 2)]");
  EXPECT_EQ(render("{{ d | dictsort }}", kMessages), "[('A', 3), ('a', 2), ('b', 1)]");
  EXPECT_EQ(render("{{ d | dictsort(by='value', reverse=true) }}", kMessages), "[('A', 3), ('a', 2), ('b', 1)]");
  EXPECT_EQ(render("{{ d | dictsort(true) }}", kMessages), "[('A', 3), ('a', 2), ('b', 1)]");
  EXPECT_EQ(render("{{ x | items | list }}"), "[]");
}

TEST(TemplateFilters, SelectRejectMap) {
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [0, 1, ''] "
                   "| select | list }}"),
            "[1, 3] [2, 4] [1]");
  EXPECT_EQ(render("{{ [1, 5, 9] | select('gt', 4) | list }} {{ [1, 5, 9] | select('in', [1, 9]) | list }}"),
            "[5, 9] [1, 9]");
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('+') }}",
                   kMessages),
            "Hi+Bye");
  EXPECT_EQ(render("{{ messages | rejectattr('role', '==', 'user') | map(attribute='content') | first }}", kMessages),
            "Yo");
  EXPECT_EQ(render("{{ messages | selectattr('meta') | list | length }} {{ messages | map(attribute='meta.n', "
                   "default=0) | list }}",
                   kMessages),
            "1 [0, 2, 0]");
  EXPECT_EQ(render("{{ ['a', 'B'] | map('upper') | join }} {{ [1, 2] | map('string') | join(',') }}"), "AB 1,2");
}

TEST(TemplateFilters, ToJsonMatchesTransformers) {
  // transformers' tojson: json.dumps with ensure_ascii=False and Python's separators.
  EXPECT_EQ(render("{{ d | tojson }}", R"({"d": {"b": [1, 2.5, "é"], "a": null, "t": true}})"),
            R"({"b": [1, 2.5, "é"], "a": null, "t": true})");
  EXPECT_EQ(render("{{ d | tojson(indent=2) }}", R"({"d": {"b": [1, {}], "e": []}})"),
            "{\n  \"b\": [\n    1,\n    {}\n  ],\n  \"e\": []\n}");
  EXPECT_EQ(render("{{ d | tojson(separators=(',', ':'), sort_keys=true) }}", R"({"d": {"b": 1, "a": [2]}})"),
            R"({"a":[2],"b":1})");
  EXPECT_EQ(render("{{ 'é😀' | tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
  EXPECT_EQ(render(R"({{ "q\"\\\n\t\u0001" | tojson }})"), R"("q\"\\\n\t\u0001")");
  EXPECT_EQ(render("{{ 1.0 | tojson }} {{ 1e16 | tojson }} {{ none | tojson }} {{ (1, 'a') | tojson }}"),
            "1.0 1e+16 null [1, \"a\"]");
  EXPECT_EQ(render_error("{{ missing | tojson }}").kind(), TemplateError::Kind::kRender);
}

TEST(TemplateFilters, AttrAndUnknown) {
  EXPECT_EQ(render("{{ m | attr('role') }}", R"({"m": {"role": "user"}})"), "user");
  const auto e = render_error("\n{{ 1 | frobnicate }}");
  EXPECT_EQ(e.location().line, 2);
  EXPECT_NE(e.message().find("frobnicate"), std::string::npos);
}

TEST(TemplateTests, TypeTests) {
  EXPECT_EQ(render("{{ 'a' is string }}{{ 1 is string }}{{ 1 is number }}{{ true is number }}{{ 1.5 is number }}"),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(render("{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 1 is float }}{{ false is boolean }}"),
            "TrueFalseTrueFalseTrue");
  EXPECT_EQ(
      render("{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'x' is iterable }}{{ 1 is iterable }}"),
      "TrueFalseTrueTrueFalse");
  EXPECT_EQ(
      render(
          "{{ [] is sequence }}{{ 'x' is sequence }}{{ 1 is sequence }}{{ range is callable }}{{ 'x' is callable }}"),
      "TrueTrueFalseTrueFalse");
  EXPECT_EQ(render("{{ none is none }}{{ 0 is none }}{{ x is defined }}{{ x is undefined }}{{ true is true }}{{ 1 is "
                   "true }}{{ false is false }}"),
            "TrueFalseFalseTrueTrueFalseTrue");
}

TEST(TemplateTests, ValueTests) {
  EXPECT_EQ(render("{{ 3 is odd }}{{ 3 is even }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}"),
            "TrueFalseTrueTrueFalse");
  EXPECT_EQ(render("{{ 'abc' is lower }}{{ 'Abc' is lower }}{{ 'ABC' is upper }}{{ '12' is upper }}"),
            "TrueFalseTrueFalse");
  EXPECT_EQ(render("{{ 2 is eq 2 }}{{ 2 is equalto 3 }}{{ 2 is ne 3 }}{{ 2 is lt 3 }}{{ 2 is ge 3 }}"),
            "TrueFalseTrueTrueFalse");
  EXPECT_EQ(render("{{ 'b' is in 'abc' }}{{ 4 is in [1, 2] }}{{ none is sameas none }}{{ 'upper' is filter }}{{ 'odd' "
                   "is test }}"),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(render_error("{{ 'x' is odd }}").kind(), TemplateError::Kind::kRender);
  EXPECT_EQ(render_error("{{ 1 is frobnicated }}").kind(), TemplateError::Kind::kRender);
}

}  // namespace
