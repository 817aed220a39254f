// Lexing and parsing: whitespace control, comments, raw blocks, literals, precedence, syntax errors.
#include <gtest/gtest.h>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

using template_test::render;
using template_test::render_error;
using template_test::tpl::TemplateError;

TEST(TemplateLexer, PlainTextAndExpressions) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "world"})"), "Hello world!");
  EXPECT_EQ(render(""), "");
  EXPECT_EQ(render("no tags at all"), "no tags at all");
}

TEST(TemplateLexer, DashStripsWhitespaceOnThatSide) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("a  {{ 'b' -}}  c"), "a  bc");
  EXPECT_EQ(render("a  {{- 'b' }}  c"), "ab  c");
  EXPECT_EQ(render("a \n {%- if true -%} \n b \n {%- endif -%} \n c"), "abc");
  EXPECT_EQ(render("a \n {#- note -#} \n b"), "ab");
}

TEST(TemplateLexer, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  // Not after an expression.
  EXPECT_EQ(render("{{ 'x' }}\ny"), "x\ny");
  // A plus sign keeps it.
  EXPECT_EQ(render("{% if true +%}\nyes{% endif %}"), "\nyes");
}

TEST(TemplateLexer, LstripBlocksDropsIndentationBeforeBlockTagsOnly) {
  EXPECT_EQ(render("    {% if true %}\n    body\n    {% endif %}\n"), "    body\n");
  EXPECT_EQ(render("  {# comment #}\nx"), "x");
  // Text before the tag on the same line keeps its spaces.
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y");
  // Expressions are not stripped.
  EXPECT_EQ(render("  {{ 'v' }}"), "  v");
  // {%+ turns it off for one tag.
  EXPECT_EQ(render("  {%+ if true %}y{% endif %}"), "  y");
}

TEST(TemplateLexer, OptionsCanTurnTrimAndLstripOff) {
  template_test::tpl::TemplateOptions options;
  options.trim_blocks = false;
  options.lstrip_blocks = false;
  const auto t = template_test::tpl::ChatTemplate::parse("  {% if true %}\nx{% endif %}", options);
  EXPECT_EQ(t.render(template_test::tpl::Value::parse_json("{}")), "  \nx");
}

TEST(TemplateLexer, OneTrailingNewlineIsDroppedAndNewlinesNormalized) {
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(TemplateLexer, CommentsAndRawBlocks) {
  EXPECT_EQ(render("a{# {{ not rendered }} #}b"), "ab");
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
  EXPECT_EQ(render("{%- raw -%}  {{ y }}  {%- endraw %}!"), "{{ y }}!");
}

TEST(TemplateLexer, StringLiteralsUsePythonEscapes) {
  EXPECT_EQ(render(R"({{ "a\tb\nc" }})"), "a\tb\nc");
  EXPECT_EQ(render(R"({{ 'it\'s' }})"), "it's");
  EXPECT_EQ(render(R"({{ '\x41\u00e9\101\U0001F600' }})"),
            "Aé"
            "A"
            "\U0001F600");
  EXPECT_EQ(render(R"({{ '\d' }})"), "\\d");         // unknown escapes keep the backslash
  EXPECT_EQ(render(R"({{ "a" 'b' "c" }})"), "abc");  // adjacent literals join
  EXPECT_EQ(render("{{ '%} and }}' }}"), "%} and }}");
}

TEST(TemplateLexer, NumberLiterals) {
  EXPECT_EQ(render("{{ 42 }} {{ 1_000 }} {{ 1.5 }} {{ 2e3 }} {{ 1.5e-3 }}"), "42 1000 1.5 2000.0 0.0015");
}

TEST(TemplateParser, OperatorPrecedenceFollowsJinja) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"), "7 9 64 4");
  EXPECT_EQ(render("{{ 'a' ~ 2 * 3 }}"), "a6");  // ~ binds tighter than + and looser than *
  EXPECT_EQ(render("{{ not true or true }} {{ not (true or true) }}"), "True False");
  EXPECT_EQ(render("{{ [1, 2] | length - 1 }}"), "1");  // filters bind tighter than arithmetic
  EXPECT_EQ(render("{{ 1 if false else 2 if false else 3 }}"), "3");
}

TEST(TemplateParser, TuplesListsAndDicts) {
  EXPECT_EQ(render("{{ (1, 2) }} {{ () }} {{ (1,) }} {{ [1, 'a'] }} {{ [] }}"), "(1, 2) () (1,) [1, 'a'] []");
  EXPECT_EQ(render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");  // }} inside a dict literal
  EXPECT_EQ(render("{{ 1, 2 }}"), "(1, 2)");
  EXPECT_EQ(render("{{ [1, 2,] }}{{ {'k': 1,} }}"), "[1, 2]{'k': 1}");
}

TEST(TemplateParser, SyntaxErrorsNameLineAndColumn) {
  auto e = render_error("line one\n{{ 1 + }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(e.location().line, 2);
  EXPECT_EQ(e.location().column, 8);
  EXPECT_NE(std::string(e.what()).find("line 2, column 8"), std::string::npos) << e.what();

  e = render_error("{% if x %}\n\nno end");
  EXPECT_EQ(e.kind(), TemplateError::Kind::kSyntax);
  EXPECT_NE(e.message().find("endif"), std::string::npos) << e.message();

  e = render_error("a\n  {% endfor %}");
  EXPECT_EQ(e.location().line, 2);
  EXPECT_EQ(e.location().column, 6);  // the tag name

  EXPECT_EQ(render_error("{{ 'unterminated }}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{% frobnicate %}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{% include 'x' %}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{# never closed").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{{ x ").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{% break %}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{{ f(a=1, 2) }}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("{% macro m(a=1, b) %}{% endmacro %}").kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(render_error("\xff{{ 1 }}").kind(), TemplateError::Kind::kSyntax);
}

TEST(TemplateParser, DeepNestingIsRefused) {
  std::string deep(5000, '(');
  deep = "{{ " + deep + "1" + std::string(5000, ')') + " }}";
  EXPECT_EQ(render_error(deep).kind(), TemplateError::Kind::kSyntax);
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 500; ++i) ifs += "{% endif %}";
  EXPECT_EQ(render_error(ifs).kind(), TemplateError::Kind::kSyntax);
}

}  // namespace
