#include "engine/grammar/json_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_string_formats.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string grammar(const std::string& schema, std::optional<std::string> whitespace = std::nullopt) {
  return json_schema_to_gbnf(schema, whitespace);
}

std::string error_of(const std::string& schema) {
  try {
    grammar(schema);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The numeric expressions use only quoted ASCII literals, classes, groups, | and repetitions, so they read
// as ECMAScript regexes once the quotes and spaces go: an independent check of the digit ranges.
std::regex as_regex(const std::string& gbnf) {
  std::string out;
  for (std::size_t i = 0; i < gbnf.size(); ++i) {
    if (gbnf[i] == ' ') continue;
    if (gbnf[i] != '"') {
      out += gbnf[i];
      continue;
    }
    for (++i; gbnf[i] != '"'; ++i) out += std::string(gbnf[i] == '.' || gbnf[i] == '-' ? "\\" : "") + gbnf[i];
  }
  return std::regex(out);
}

TEST(JsonSchemaToGbnf, ScalarsAndTheDefaultWhitespace) {
  EXPECT_EQ(grammar(R"({"type":"boolean"})"),
            "root ::= (\"true\" | \"false\")\nws ::= (\" \" | \"\\n\" [\\t\\x20]{0,20})?\n");
  EXPECT_THAT(grammar(R"({"type":"null"})"), HasSubstr("root ::= \"null\"\n"));
  EXPECT_THAT(grammar(R"({"type":["string","null"]})"), HasSubstr("schema ::= \"null\" | string"));
}

TEST(JsonSchemaToGbnf, WhitespacePatternReplacesTheDefault) {
  EXPECT_THAT(grammar(R"({"type":"array"})", "[ ]?"), HasSubstr("ws ::= ([\\x20]?)\n"));
  try {
    grammar(R"({"type":"array"})", "(?=x)");
    FAIL() << "accepted";
  } catch (const GrammarError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("whitespace pattern: regex: lookahead is not supported at offset 0"));
  }
}

TEST(JsonSchemaToGbnf, EnumAndConstAreTheirValuesAsJson) {
  EXPECT_THAT(grammar(R"({"enum":["a",1,null,{"k":[true]}]})"),
              HasSubstr("schema ::= \"\\\"a\\\"\" | \"1\" | \"null\" | \"{\\\"k\\\":[true]}\""));
  EXPECT_THAT(grammar(R"({"const":"x\"y"})"), HasSubstr("root ::= \"\\\"x\\\\\\\"y\\\"\""));
  // pydantic writes both const and enum for a Literal; type filters the values.
  EXPECT_THAT(grammar(R"({"const":"b","enum":["a","b"],"type":"string"})"), HasSubstr("root ::= \"\\\"b\\\"\""));
  EXPECT_THAT(grammar(R"({"enum":["a",2],"type":"integer"})"), HasSubstr("root ::= \"2\""));
}

TEST(JsonSchemaToGbnf, PropertiesInSchemaOrderRequiredAlwaysOptionalSkippable) {
  const std::string g = grammar(R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}},
                                    "required":["b"]})");
  EXPECT_THAT(g, HasSubstr("schema-from-2 ::= \"\\\"b\\\"\" ws \":\" ws \"null\"\n"));
  EXPECT_THAT(g, HasSubstr("schema-after-2 ::= ws \",\" ws \"\\\"b\\\"\" ws \":\" ws \"null\"\n"));
  EXPECT_THAT(g, HasSubstr("schema-from-1 ::= \"\\\"a\\\"\" ws \":\" ws \"null\" schema-after-2 | schema-from-2\n"));
  EXPECT_THAT(g, HasSubstr("schema ::= \"{\" ws schema-from-1 ws \"}\"\n"));
}

TEST(JsonSchemaToGbnf, AbsentAdditionalPropertiesClosesAListedObjectButNotABareOne) {
  EXPECT_THAT(grammar(R"({"type":"object","properties":{"a":{"type":"null"}}})"), Not(HasSubstr("json-value")));
  EXPECT_THAT(grammar(R"({"type":"object"})"),
              HasSubstr("schema-additional ::= \"\\\"\" key-rest \"\\\"\" ws \":\" ws json-value"));
  EXPECT_THAT(grammar(R"({"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":true})"),
              HasSubstr("json-value"));
}

TEST(JsonSchemaToGbnf, AdditionalPropertyNamesDifferFromTheListedOnes) {
  const std::string g = grammar(R"({"properties":{"ab":{"type":"null"}},"additionalProperties":{"type":"integer"}})");
  // The trie: a name may stop anywhere except right after "ab"; leaving it takes any other character.
  EXPECT_THAT(g, HasSubstr("\"\" | \"a\" schema-other-key-2 | ([^\\x00-\\x1F\\x22\\x5Ca]"));
  EXPECT_THAT(g, HasSubstr("schema-other-key ::= ([^\\x00-\\x1F\\x22\\x5C]"));
  EXPECT_THAT(g, HasSubstr("schema-additional-value ::= \"-\"? (\"0\" | [1-9] [0-9]*)"));
}

TEST(JsonSchemaToGbnf, RequiredWithoutPropertiesNeedsAdditionalProperties) {
  EXPECT_THAT(grammar(R"({"type":"object","required":["id"]})"), HasSubstr("\"\\\"id\\\"\" ws \":\" ws json-value"));
  EXPECT_THAT(error_of(R"({"properties":{"a":true},"required":["b"]})"),
              HasSubstr("schema at #/required: required property \"b\" is not in properties"));
}

TEST(JsonSchemaToGbnf, ArraysWithPrefixItemsAndCounts) {
  EXPECT_THAT(grammar(R"({"type":"array","items":{"type":"null"},"minItems":2,"maxItems":4})"),
              HasSubstr("\"[\" ws \"null\" (ws \",\" ws \"null\"){1,3} ws \"]\""));
  EXPECT_THAT(grammar(R"({"type":"array","items":{"type":"null"}})"),
              HasSubstr("\"[\" ws (\"null\" (ws \",\" ws \"null\")*)? ws \"]\""));
  // A closed tuple of two, the second optional.
  EXPECT_THAT(grammar(R"({"prefixItems":[{"type":"null"},{"type":"boolean"}],"minItems":1})"),
              HasSubstr("\"[\" ws \"null\" (ws \",\" ws (\"true\" | \"false\"))? ws \"]\""));
  // Draft 4-7 tuples: items as a list, additionalItems after it.
  EXPECT_THAT(grammar(R"({"items":[{"type":"null"}],"additionalItems":{"type":"null"},"maxItems":3})"),
              HasSubstr("(\"null\" (ws \",\" ws \"null\"){0,2})?"));
  EXPECT_THAT(grammar(R"({"type":"array","maxItems":0})"), HasSubstr("\"[\" ws ws \"]\""));
  EXPECT_THAT(error_of(R"({"prefixItems":[true],"items":false,"minItems":2})"),
              HasSubstr("schema at #/minItems: minItems 2 exceeds the 1 items the array may hold"));
  EXPECT_THAT(error_of(R"({"type":"array","minItems":3,"maxItems":2})"),
              HasSubstr("#/maxItems: maxItems 2 is below minItems 3"));
}

TEST(JsonSchemaToGbnf, StringLengthsPatternsAndFormats) {
  // A bounded string is a rule of its own, its plain characters in place and only the escapes a shared rule.
  const std::string bounded = grammar(R"({"type":"string","minLength":2,"maxLength":5})");
  EXPECT_THAT(bounded, HasSubstr("schema-string ::= \"\\\"\" ([^\\x22\\x5C\\x00-\\x1F] | char-escape){2,5} \"\\\"\""));
  EXPECT_THAT(bounded, HasSubstr("char-escape ::= \"\\\\\" ([\\x22\\x5C\\x2Fbfnrt] | \"u\""));
  EXPECT_THAT(grammar(R"({"type":"string","pattern":"^[ab]+$"})"),
              HasSubstr("schema-pattern ::= \"\\\"\" ([ab]+) \"\\\"\""));
  EXPECT_THAT(grammar(R"({"type":"string","format":"uuid"})"), HasSubstr("uuid ::= \"\\\"\" [0-9A-Fa-f]{8} \"-\""));
  EXPECT_THAT(error_of(R"({"type":"string","pattern":"a","maxLength":3})"),
              HasSubstr("schema at #/maxLength: maxLength together with pattern is not supported"));
  EXPECT_THAT(error_of(R"({"type":"string","format":"date","minLength":3})"),
              HasSubstr("schema at #/minLength: minLength together with format is not supported"));
  EXPECT_THAT(error_of(R"({"type":"string","format":"hostname"})"),
              HasSubstr("schema at #/format: format must be one of date, date-time, email, ipv4, time, uuid"));
  EXPECT_THAT(error_of(R"({"properties":{"p":{"type":"string","pattern":"(a"}}})"),
              HasSubstr("schema at #/properties/p/pattern: regex: missing ')' for the group opened at offset 0"));
}

TEST(JsonSchemaToGbnf, RecursiveRefsShareOneRule) {
  const std::string g = grammar(R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[
      {"$ref":"#/$defs/node"},{"type":"null"}]}}}},"$ref":"#/$defs/node"})");
  EXPECT_THAT(g, HasSubstr("root ::= node\n"));
  EXPECT_THAT(g, HasSubstr("next ::= node | \"null\"\n"));
  EXPECT_THAT(grammar(R"({"definitions":{"a~b/c":{"type":"null"}},"$ref":"#/definitions/a~0b~1c"})"),
              HasSubstr("\"null\""));
  EXPECT_THAT(grammar(R"({"definitions":{"a b":{"type":"null"}},"$ref":"#/definitions/a%20b"})"),
              HasSubstr("\"null\""));
  EXPECT_THAT(error_of(R"({"$ref":"#/$defs/missing"})"),
              HasSubstr("schema at #/$ref: $ref \"#/$defs/missing\" points to nothing"));
  EXPECT_THAT(error_of(R"({"$ref":"other.json#/a"})"),
              HasSubstr("leaves the document; only #/... references are supported"));
}

TEST(JsonSchemaToGbnf, AllOfFoldsIntoOneSchema) {
  const std::string folded =
      grammar(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                                                  {"properties":{"b":{"type":"boolean"}}}]})");
  EXPECT_EQ(
      folded,
      grammar(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a"]})"));
  EXPECT_EQ(grammar(R"({"allOf":[{"type":"integer","minimum":1},{"maximum":5,"minimum":3}]})"),
            grammar(R"({"type":"integer","minimum":3,"maximum":5})"));
  EXPECT_EQ(grammar(R"({"$defs":{"base":{"type":"string"}},"allOf":[{"$ref":"#/$defs/base"}],"maxLength":3})"),
            grammar(R"({"type":"string","maxLength":3})"));
  EXPECT_THAT(error_of(R"({"allOf":[{"pattern":"a"},{"pattern":"b"}]})"),
              HasSubstr("allOf at #/allOf/1: cannot merge \"pattern\": the branches give it different values"));
  EXPECT_THAT(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})"), HasSubstr("cannot merge \"type\""));
  EXPECT_THAT(
      error_of(R"({"allOf":[{"properties":{"a":true},"additionalProperties":false},{"properties":{"b":true}}]})"),
      HasSubstr("cannot merge \"additionalProperties\""));
  EXPECT_THAT(error_of(R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})"),
              HasSubstr("nest deeper than 64"));
}

TEST(JsonSchemaToGbnf, AnyOfWithSiblingsFoldsThemIntoEachBranch) {
  EXPECT_EQ(grammar(R"({"type":"integer","anyOf":[{"minimum":5},{"maximum":-5}]})"),
            grammar(R"({"anyOf":[{"type":"integer","minimum":5},{"type":"integer","maximum":-5}]})"));
  EXPECT_THAT(grammar(R"({"oneOf":[{"type":"null"},{"type":"boolean"}]})"),
              HasSubstr("schema ::= \"null\" | (\"true\" | \"false\")"));
}

TEST(JsonSchemaToGbnf, AnnotationsAreIgnoredAndAnythingElseUnknownIsRefused) {
  EXPECT_EQ(grammar(R"({"type":"integer","title":"t","description":"d","default":1,"examples":[1],"$schema":"x",
                       "$id":"y","$comment":"c","deprecated":true,"readOnly":true,"writeOnly":false,"x-extra":1})"),
            grammar(R"({"type":"integer"})"));
  EXPECT_THAT(error_of(R"({"type":"array","maxItem":3})"),
              HasSubstr("schema at #/maxItem: unknown keyword \"maxItem\": not one this server applies"));
}

TEST(JsonSchemaToGbnf, RefusesUnsupportedKeywordsByNameWithTheirPath) {
  const char* const refused[] = {"patternProperties",
                                 "propertyNames",
                                 "dependentSchemas",
                                 "dependentRequired",
                                 "dependencies",
                                 "if",
                                 "then",
                                 "else",
                                 "not",
                                 "unevaluatedProperties",
                                 "unevaluatedItems",
                                 "minProperties",
                                 "maxProperties",
                                 "uniqueItems",
                                 "multipleOf",
                                 "contains",
                                 "minContains",
                                 "maxContains",
                                 "$dynamicRef",
                                 "$dynamicAnchor",
                                 "$recursiveRef",
                                 "$recursiveAnchor",
                                 "contentSchema"};
  for (const char* keyword : refused) {
    const std::string schema =
        std::string(R"({"type":"object","properties":{"x":{"type":"array","items":{")") + keyword + R"(":{}}}}})";
    EXPECT_THAT(error_of(schema), HasSubstr(std::string("schema at #/properties/x/items/") + keyword + ": \"" +
                                            keyword + "\" is not supported"))
        << keyword;
  }
  // Refused wherever they are: inside $defs reached by $ref, anyOf branches and allOf parts.
  EXPECT_THAT(error_of(R"({"$defs":{"d":{"not":{}}},"$ref":"#/$defs/d"})"), HasSubstr("schema at #/$defs/d/not"));
  EXPECT_THAT(error_of(R"({"anyOf":[{"type":"null"},{"uniqueItems":true}]})"),
              HasSubstr("schema at #/anyOf/1/uniqueItems"));
  EXPECT_THAT(error_of(R"({"allOf":[{"type":"integer"},{"multipleOf":2}]})"),
              HasSubstr("schema at #/allOf/1/multipleOf"));
}

TEST(JsonSchemaToGbnf, InvalidSchemasNameWhatIsWrong) {
  EXPECT_THAT(error_of("{\"type\":"), HasSubstr("schema is not valid JSON: "));
  EXPECT_THAT(error_of(R"({"type":"strin"})"), HasSubstr("schema at #/type: type must be null, boolean"));
  EXPECT_THAT(error_of("false"), HasSubstr("schema at #: the schema false matches no value"));
  EXPECT_THAT(error_of(R"({"properties":{"a/b":{"minLength":-1}}})"),
              HasSubstr("schema at #/properties/a~1b/minLength: minLength must be a non-negative integer"));
  EXPECT_THAT(error_of(R"({"type":"integer","minimum":5,"maximum":3})"), HasSubstr("no value satisfies the bounds"));
  EXPECT_THAT(error_of(R"({"type":"number","minimum":0.5})"), HasSubstr("the number bound 0.5 is fractional"));
  EXPECT_THAT(error_of(R"({"type":"integer","maximum":1e300})"), HasSubstr("beyond ±2^53"));
  EXPECT_THAT(error_of(R"({"enum":[1],"minimum":0})"), HasSubstr("schema at #/minimum: \"minimum\" beside enum/const"));
  EXPECT_THAT(error_of(R"({"const":1,"enum":[2]})"), HasSubstr("const is none of the enum's values"));
}

TEST(JsonSchemaNumbers, IntegerRangesAreExact) {
  const std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> ranges[] = {
      {0, 120}, {-37, 250}, {5, std::nullopt}, {std::nullopt, -3}, {-999, -100}, {7, 7}, {19, 1000}, {-1, 0}};
  for (const auto& [lo, hi] : ranges) {
    NumericBounds bounds;
    if (lo) bounds.lower = NumericBound{static_cast<double>(*lo), false};
    if (hi) bounds.upper = NumericBound{static_cast<double>(*hi), false};
    const std::regex re = as_regex(integer_expression(bounds, "#"));
    for (int v = -1200; v <= 1200; ++v) {
      const bool inside = (!lo || v >= *lo) && (!hi || v <= *hi);
      EXPECT_EQ(std::regex_match(std::to_string(v), re), inside)
          << v << " in [" << lo.value_or(-9999) << ", " << hi.value_or(9999) << "]";
    }
    EXPECT_FALSE(std::regex_match("01", re));
    EXPECT_FALSE(std::regex_match("-0", re));
  }
}

TEST(JsonSchemaNumbers, ExclusiveAndFractionalIntegerBoundsRound) {
  NumericBounds bounds{NumericBound{1.5, false}, NumericBound{10, true}};
  const std::regex re = as_regex(integer_expression(bounds, "#"));
  EXPECT_FALSE(std::regex_match("1", re));
  EXPECT_TRUE(std::regex_match("2", re));
  EXPECT_TRUE(std::regex_match("9", re));
  EXPECT_FALSE(std::regex_match("10", re));
}

TEST(JsonSchemaNumbers, NumberBoundsAreExactForWholeNumberBounds) {
  const NumericBounds cases[] = {
      {NumericBound{0, false}, NumericBound{1, false}},
      {NumericBound{-2, true}, NumericBound{3, true}},
      {std::nullopt, NumericBound{-1, false}},
      {NumericBound{10, true}, std::nullopt},
  };
  const char* const samples[] = {"-3",   "-2.5", "-2",   "-2.0",   "-1.999", "-1",   "-0.5", "0",
                                 "0.0",  "0.25", "1",    "1.0",    "1.5",    "2.99", "3",    "3.000",
                                 "3.01", "10",   "10.0", "10.001", "11",     "250.5"};
  for (const NumericBounds& b : cases) {
    const std::regex re = as_regex(number_expression(b, "#"));
    for (const char* sample : samples) {
      const double v = std::stod(sample);
      const bool inside = (!b.lower || (b.lower->exclusive ? v > b.lower->value : v >= b.lower->value)) &&
                          (!b.upper || (b.upper->exclusive ? v < b.upper->value : v <= b.upper->value));
      EXPECT_EQ(std::regex_match(std::string(sample), re), inside) << sample;
    }
  }
}

TEST(JsonStringFormats, DatesFollowTheCalendar) {
  const std::regex date(std::string(*string_format_regex("date")));
  EXPECT_TRUE(std::regex_match("2024-02-29", date));
  EXPECT_TRUE(std::regex_match("2000-02-29", date));
  EXPECT_FALSE(std::regex_match("1900-02-29", date));
  EXPECT_FALSE(std::regex_match("2023-02-29", date));
  EXPECT_FALSE(std::regex_match("2023-04-31", date));
  EXPECT_TRUE(std::regex_match("2023-12-31", date));
  EXPECT_FALSE(std::regex_match("2023-13-01", date));
  const std::regex date_time(std::string(*string_format_regex("date-time")));
  EXPECT_TRUE(std::regex_match("2023-01-05T23:59:59.5+01:00", date_time));
  EXPECT_FALSE(std::regex_match("2023-01-05T24:00:00Z", date_time));
  EXPECT_TRUE(std::regex_match("192.168.0.255", std::regex(std::string(*string_format_regex("ipv4")))));
  EXPECT_FALSE(std::regex_match("192.168.0.256", std::regex(std::string(*string_format_regex("ipv4")))));
}

}  // namespace
}  // namespace engine::grammar
