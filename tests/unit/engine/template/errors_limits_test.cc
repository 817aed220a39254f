// Errors name the template line and column; raise_exception surfaces the template's message; limits stop
// hostile templates; renders of one parsed template run in parallel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::render_error;
using template_test::tpl::ChatTemplate;
using template_test::tpl::TemplateError;
using template_test::tpl::TemplateOptions;
using template_test::tpl::Value;

TEST(TemplateErrors, RaiseExceptionSurfacesTheMessage) {
  const auto e = render_error("ok\n  {{- raise_exception('Conversation roles must alternate user/assistant') }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::kRaised);
  EXPECT_EQ(e.message(), "Conversation roles must alternate user/assistant");
  EXPECT_EQ(e.location().line, 2);
  EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
}

TEST(TemplateErrors, RenderErrorsNameLineAndColumn) {
  auto e = render_error("line 1\nline 2 {{ 'a' + 1 }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::kRender);
  EXPECT_EQ(e.location().line, 2);
  EXPECT_NE(e.message().find("concatenate"), std::string::npos) << e.message();

  e = render_error("{% for x in 5 %}{% endfor %}");
  EXPECT_NE(e.message().find("not iterable"), std::string::npos) << e.message();
  EXPECT_EQ(e.location().column, 13);

  e = render_error("\n\n   {{ nope() }}");
  EXPECT_EQ(e.location().line, 3);
  EXPECT_NE(e.message().find("'nope' is undefined"), std::string::npos) << e.message();

  EXPECT_NE(render_error("{{ m.nope() }}", R"({"m": {}})").message().find("no attribute 'nope'"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 / 0 }}").message().find("division by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 < 'a' }}").message().find("not supported"), std::string::npos);
  EXPECT_NE(render_error("{{ none.x + 1 }}").message().find("undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' in 1 }}").message().find("not iterable"), std::string::npos);
  EXPECT_NE(render_error("{% set a, b = [1] %}").message().find("unpack"), std::string::npos);
}

TEST(TemplateErrors, ListsAndDictsAreImmutableAsInTransformersSandbox) {
  const auto e = render_error("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_NE(e.message().find("unsafe"), std::string::npos) << e.message();
  EXPECT_NE(render_error("{{ d.update({}) }}", R"({"d": {}})").message().find("unsafe"), std::string::npos);
}

TEST(TemplateLimits, OutputSize) {
  TemplateOptions options;
  options.limits.max_output_bytes = 1000;
  const auto e = render_error("{% for i in range(100) %}0123456789ABCDEF{% endfor %}", "{}", options);
  EXPECT_EQ(e.kind(), TemplateError::Kind::kLimit);
}

TEST(TemplateLimits, LoopIterations) {
  TemplateOptions options;
  options.limits.max_loop_iterations = 10000;
  EXPECT_EQ(render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", options)
                .kind(),
            TemplateError::Kind::kLimit);
}

TEST(TemplateLimits, RecursionDepth) {
  const auto e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::kLimit);
}

TEST(TemplateLimits, ValueGrowth) {
  EXPECT_EQ(render_error("{{ 'x' * 100000000000 }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ range(100000000000) | length }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ [1] * 100000000000 }}").kind(), TemplateError::Kind::kLimit);
  // Doubling a string in a loop hits the value limit long before memory runs out.
  EXPECT_EQ(
      render_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
          .kind(),
      TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ 2 ** 64 }}").kind(), TemplateError::Kind::kRender);  // int64 overflow is an error
}

TEST(TemplateLimits, SharedAndNestedValuesStayBounded) {
  // Each step doubles what printing or comparing the list would visit: bounded, not exponential.
  const char* dag = "{% set ns = namespace(l=[1]) %}{% for i in range(80) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}";
  EXPECT_EQ(render_error(std::string(dag) + "{{ ns.l }}").kind(), TemplateError::Kind::kRender);
  EXPECT_EQ(render_error(std::string(dag) + "{{ ns.l | tojson }}").kind(), TemplateError::Kind::kRender);
  EXPECT_EQ(render(std::string(dag) + "{{ ns.l == ns.l }}"), "True");
  // Two equal but separately built structures: the comparison budget stops the exponential walk.
  EXPECT_EQ(render_error("{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(80) %}{% set ns.a = [ns.a, ns.a] %}"
                         "{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}")
                .kind(),
            TemplateError::Kind::kRender);
  // Nesting is capped, so printing and freeing cannot overflow the stack.
  EXPECT_EQ(
      render_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}")
          .kind(),
      TemplateError::Kind::kRender);
  EXPECT_THROW(Value::parse_json(std::string(600, '[') + std::string(600, ']')), std::invalid_argument);
  // A namespace inside itself prints like Python's recursive repr.
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'a': 1, 'me': <Namespace {...}>}>");
}

TEST(TemplateLimits, StringOperationsAreSizedBeforeTheyRun) {
  const char* big = "{% set s = 'x' * 1000000 %}";
  EXPECT_EQ(render_error(std::string(big) + "{{ s.replace('', s) | length }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error(std::string(big) + "{{ s | replace('x', s) | length }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{% set s = '\n' * 1000000 %}{{ s | indent(100) | length }}").kind(),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{% set s = 'a ' * 4000000 %}{{ s.split() | length }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{% set s = 'x' * 4000000 %}{{ s | list | length }}").kind(), TemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ range(200000) | unique | list | length }}").kind(), TemplateError::Kind::kLimit);
}

TEST(TemplateLimits, SelfReferenceDoesNotLeakOrLoop) {
  // A namespace holding itself, a macro stored in a namespace: freed when the render ends.
  EXPECT_EQ(
      render(
          "{% set ns = namespace() %}{% set ns.me = ns %}{% macro m() %}m{% endmacro %}{% set ns.m = m %}{{ ns.m() }}"),
      "m");
}

// A printed macro names itself from the parsed template, not from freed memory (the name is longer than a
// short-string buffer, so a dangling view would read a freed heap block).
TEST(TemplateSecurity, PrintingAMacroShowsItsOwnName) {
  const std::string name = "a_macro_whose_name_is_longer_than_any_short_string_buffer";
  EXPECT_EQ(render("{% macro " + name + "() %}{% endmacro %}{{ " + name + " }}|{{ " + name + " }}"),
            "<function " + name + ">|<function " + name + ">");
  EXPECT_EQ(render("{% macro m() %}{{ caller }}{% endmacro %}{% call m() %}x{% endcall %}"), "<function caller>");
}

// Widths and precisions past their limits are refused by name, never wrapped into small numbers.
TEST(TemplateSecurity, HugeFormatWidthsAndPrecisionsAreRefused) {
  for (const char* source :
       {R"({{ "%.4294967297s|" % "abc" }})", R"({{ "%4294967297s|" % "abc" }})",
        R"({{ "%.18446744073709551617f" % 1.5 }})", R"({{ "%99999999999999999999999d" % 1 }})",
        R"({{ "{:.4294967297}".format("abc") }})", R"({{ "{:18446744073709551617}".format("a") }})",
        R"({{ "%.101f" % 1.5 }})", R"({{ "{:4097}".format("a") }})"}) {
    const TemplateError e = render_error(source);
    EXPECT_THAT(e.what(),
                ::testing::AnyOf(::testing::HasSubstr("format precision"), ::testing::HasSubstr("format width")))
        << source;
    EXPECT_THAT(e.what(), ::testing::HasSubstr("over the limit")) << source;
  }
  // %d of a float without an integer part is Python's error, not a conversion past int64 (undefined).
  EXPECT_THAT(render_error(R"({{ "%d" % (1e400 * 0) }})").what(), ::testing::HasSubstr("float NaN to integer"));
  EXPECT_THAT(render_error(R"({{ "%d" % 1e400 }})").what(), ::testing::HasSubstr("float infinity to integer"));
  EXPECT_THAT(render_error(R"({{ "%i" % -1e19 }})").what(), ::testing::HasSubstr("beyond a 64-bit integer"));
  EXPECT_EQ(render(R"({{ "%d|%d" % (-2.9, 9.1e18) }})"), "-2|9100000000000000000");
  // At the limits, and with leading zeros, they still work.
  EXPECT_EQ(render(R"({{ "%.2s|%05d|%.0100f" % ("abc", 7, 0.5) }})").substr(0, 12), "ab|00007|0.5");
  EXPECT_EQ(render(R"({{ "{:.2}|{:>4}".format("abc", "x") }})"), "ab|   x");
}

TEST(TemplateRendering, OneTemplateRendersFromManyThreads) {
  const auto t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content | upper }}{% endfor "
      "%}{{ ns.n }}");
  const Value context = Value::parse_json(R"({"messages": [{"content": "a"}, {"content": "b"}]})");
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 500; ++i) failures[k] += t.render(context) != "AB2";
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

}  // namespace
