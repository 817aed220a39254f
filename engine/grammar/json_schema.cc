#include "engine/grammar/json_schema.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema_keywords.h"
#include "engine/grammar/json_schema_merge.h"
#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_string_formats.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

using rapidjson::Value;

// allOf and $ref folded into one another deeper than this is a cycle (A = allOf[$ref A]) or close to one.
constexpr int kMaxFoldDepth = 64;
// Indentation a newline may bring in the default whitespace rule.
constexpr int kMaxIndent = 20;

const char* const kTypeNames[] = {"null", "boolean", "object", "array", "string", "integer", "number"};

std::string_view text_of(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

std::string pointer_token(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child(const std::string& path, std::string_view token) {
  return path + "/" + pointer_token(token);
}
std::string child(const std::string& path, std::string_view token, std::size_t index) {
  return child(path, token) + "/" + std::to_string(index);
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

// A repetition suffix for between `low` and `high` more of something (high: SIZE_MAX for no limit).
constexpr std::size_t kUnlimited = static_cast<std::size_t>(-1);
std::string repeat(std::size_t low, std::size_t high) {
  if (high == kUnlimited) return low == 0 ? "*" : low == 1 ? "+" : "{" + std::to_string(low) + ",}";
  if (low == 0 && high == 1) return "?";
  if (low == high) return "{" + std::to_string(low) + "}";
  return "{" + std::to_string(low) + "," + std::to_string(high) + "}";
}

bool value_has_type(const Value& v, std::string_view type) {
  if (type == "null") return v.IsNull();
  if (type == "boolean") return v.IsBool();
  if (type == "object") return v.IsObject();
  if (type == "array") return v.IsArray();
  if (type == "string") return v.IsString();
  if (type == "number") return v.IsNumber();
  // integer: a number with no fractional part (JSON Schema counts 1.0 as an integer).
  return v.IsInt64() || v.IsUint64() || (v.IsDouble() && std::floor(v.GetDouble()) == v.GetDouble());
}

// The type a keyword implies when the schema gives none (its constraint only bites on that type, so
// generating only that type stays inside the schema's language).
const char* type_implied_by(std::string_view keyword) {
  static const std::map<std::string_view, const char*> implied{{"properties", "object"},
                                                               {"required", "object"},
                                                               {"additionalProperties", "object"},
                                                               {"items", "array"},
                                                               {"prefixItems", "array"},
                                                               {"additionalItems", "array"},
                                                               {"minItems", "array"},
                                                               {"maxItems", "array"},
                                                               {"pattern", "string"},
                                                               {"minLength", "string"},
                                                               {"maxLength", "string"},
                                                               {"format", "string"},
                                                               {"minimum", "number"},
                                                               {"maximum", "number"},
                                                               {"exclusiveMinimum", "number"},
                                                               {"exclusiveMaximum", "number"}};
  const auto found = implied.find(keyword);
  return found == implied.end() ? nullptr : found->second;
}

class SchemaConverter {
 public:
  SchemaConverter(const Value& root, const std::optional<std::string>& whitespace_pattern) : root_(root) {
    std::string ws_body;
    if (whitespace_pattern) {
      try {
        ws_body = "(" + regex_to_gbnf_expression(*whitespace_pattern) + ")";
      } catch (const GrammarError& e) {
        throw GrammarError(std::string("whitespace pattern: ") + e.what());
      }
    } else {
      CodepointSet indent = CodepointSet::of(' ');
      indent.add('\t');
      ws_body = "(\" \" | \"\\n\" " + gbnf_class(indent) + "{0," + std::to_string(kMaxIndent) + "})?";
    }
    ws_ = rules_.add("ws", ws_body);
    sep_ = ws_ + " \",\" " + ws_;
  }

  std::string convert() { return rules_.text(visit(root_, "", "schema")); }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw GrammarError("schema at #" + path + ": " + what);
  }

  void check_keywords(const Value& schema, const std::string& path) const {
    for (const auto& member : schema.GetObject()) {
      const std::string_view keyword = text_of(member.name);
      const KeywordUse use = keyword_use(keyword);
      if (use == KeywordUse::Refused) {
        const std::string_view reason = refusal_reason(keyword);
        fail(child(path, keyword), "\"" + std::string(keyword) + "\" is not supported" +
                                       (reason.empty() ? "" : " (" + std::string(reason) + ")"));
      }
      if (use == KeywordUse::Unknown) {
        fail(child(path, keyword), "unknown keyword \"" + std::string(keyword) +
                                       "\": not one this server applies or knows to be an annotation "
                                       "(remove it, or name an annotation x-...)");
      }
    }
  }

  // Keywords that constrain, other than those in `except`.
  std::vector<std::string_view> constraints(const Value& schema, std::initializer_list<std::string_view> except) const {
    std::vector<std::string_view> out;
    for (const auto& member : schema.GetObject()) {
      const std::string_view keyword = text_of(member.name);
      if (keyword_use(keyword) != KeywordUse::Applied) continue;
      if (std::find(except.begin(), except.end(), keyword) == except.end()) out.push_back(keyword);
    }
    return out;
  }

  const Value* member(const Value& schema, const char* name) const {
    const auto found = schema.FindMember(name);
    return found == schema.MemberEnd() ? nullptr : &found->value;
  }

  std::string visit(const Value& schema, const std::string& path, const std::string& hint) {
    if (schema.IsBool()) {
      if (schema.IsTrue()) return any_value();
      fail(path, "the schema false matches no value");
    }
    if (!schema.IsObject()) fail(path, "a schema must be an object or a boolean");
    check_keywords(schema, path);
    if (const Value* ref = member(schema, "$ref")) {
      if (constraints(schema, {"$ref"}).empty()) return ref_rule(*ref, child(path, "$ref"), hint);
      return visit_folded(schema, path, hint);
    }
    if (member(schema, "allOf")) return visit_folded(schema, path, hint);
    if (member(schema, "anyOf") || member(schema, "oneOf")) return visit_alternatives(schema, path, hint);
    if (member(schema, "enum") || member(schema, "const")) return visit_enum(schema, path, hint);
    const std::vector<std::string> types = schema_types(schema, path);
    if (types.empty()) return any_value();
    std::vector<std::string> options;
    for (const std::string& type : types) options.push_back(visit_type(type, schema, path, hint));
    return options.size() == 1 ? options.front() : rules_.add(hint, join(options, " | "));
  }

  std::string visit_type(const std::string& type, const Value& schema, const std::string& path,
                         const std::string& hint) {
    if (type == "null") return "\"null\"";
    if (type == "boolean") return "(\"true\" | \"false\")";
    if (type == "string") return visit_string(schema, path, hint);
    if (type == "integer") return integer_expression(bounds(schema, path), "#" + path);
    if (type == "number") return number_expression(bounds(schema, path), "#" + path);
    if (type == "object") return visit_object(schema, path, hint);
    return visit_array(schema, path, hint);
  }

  // The types to generate: "type" as given (integer dropped when number is there too), else those the
  // schema's keywords imply; empty means any value.
  std::vector<std::string> schema_types(const Value& schema, const std::string& path) const {
    std::set<std::string> wanted;
    if (const Value* type = member(schema, "type")) {
      std::vector<const Value*> names;
      if (type->IsArray()) {
        for (const Value& t : type->GetArray()) names.push_back(&t);
      } else {
        names.push_back(type);
      }
      if (names.empty()) fail(child(path, "type"), "an empty type list matches no value");
      for (const Value* t : names) {
        const bool known = t->IsString() && std::any_of(std::begin(kTypeNames), std::end(kTypeNames),
                                                        [&](const char* n) { return text_of(*t) == n; });
        if (!known) fail(child(path, "type"), "type must be null, boolean, object, array, string, integer or number");
        wanted.emplace(text_of(*t));
      }
    } else {
      for (const auto& m : schema.GetObject()) {
        if (const char* implied = type_implied_by(text_of(m.name))) wanted.emplace(implied);
      }
    }
    if (wanted.count("number")) wanted.erase("integer");
    std::vector<std::string> out;
    for (const char* name : kTypeNames) {
      if (wanted.count(name)) out.emplace_back(name);
    }
    return out;
  }

  // ---- $ref and allOf -------------------------------------------------------------------------------
  const Value& resolve(const Value& ref, const std::string& ref_path) const {
    if (!ref.IsString()) fail(ref_path, "$ref must be a string");
    const std::string_view target = text_of(ref);
    if (target.empty() || target.front() != '#') {
      fail(ref_path, "$ref \"" + std::string(target) + "\" leaves the document; only #/... references are supported");
    }
    // The fragment is percent-decoded, then read as a plain JSON pointer (RapidJSON's URI-fragment form
    // rejects characters such as '$' that schemas use unencoded: "#/$defs/node").
    std::string decoded;
    for (std::size_t i = 1; i < target.size(); ++i) {
      const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
      if (target[i] == '%' && i + 2 < target.size() && hex(target[i + 1]) && hex(target[i + 2])) {
        decoded += static_cast<char>(std::stoi(std::string(target.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        decoded += target[i];
      }
    }
    const rapidjson::Pointer pointer(decoded.data(), decoded.size());
    if (!pointer.IsValid()) fail(ref_path, "$ref \"" + std::string(target) + "\" is not a valid JSON pointer");
    const Value* found = pointer.Get(root_);
    if (!found) fail(ref_path, "$ref \"" + std::string(target) + "\" points to nothing in the schema");
    return *found;
  }

  std::string ref_rule(const Value& ref, const std::string& ref_path, const std::string& hint) {
    const Value& target = resolve(ref, ref_path);
    const std::string key(text_of(ref));
    if (const auto found = ref_rules_.find(key); found != ref_rules_.end()) return found->second;
    const std::size_t slash = key.find_last_of('/');
    const std::string name_hint = slash == std::string::npos || slash + 1 == key.size() ? hint : key.substr(slash + 1);
    // Named before its body is built, so that a recursive reference inside refers back to it.
    const std::string name = rules_.reserve(name_hint);
    ref_rules_.emplace(key, name);
    rules_.define(name, visit(target, key.substr(1), name_hint));
    return name;
  }

  void fold(Value& into, const Value& schema, const std::string& path, int depth) {
    if (depth > kMaxFoldDepth) fail(path, "allOf and $ref nest deeper than 64 (a $ref cycle through allOf?)");
    if (schema.IsBool()) {
      if (schema.IsTrue()) return;
      fail(path, "the schema false matches no value");
    }
    if (!schema.IsObject()) fail(path, "a schema must be an object or a boolean");
    check_keywords(schema, path);
    if (const Value* ref = member(schema, "$ref")) {
      fold(into, resolve(*ref, child(path, "$ref")), std::string(text_of(*ref)).substr(1), depth + 1);
    }
    Value flat(rapidjson::kObjectType);
    auto& allocator = scratch_.GetAllocator();
    for (const auto& m : schema.GetObject()) {
      const std::string_view keyword = text_of(m.name);
      if (keyword == "$ref" || keyword == "allOf" || keyword_use(keyword) != KeywordUse::Applied) continue;
      flat.AddMember(Value(m.name, allocator), Value(m.value, allocator), allocator);
    }
    merge_schema(into, flat, allocator, "#" + path);
    if (const Value* all = member(schema, "allOf")) {
      if (!all->IsArray() || all->Empty()) fail(child(path, "allOf"), "allOf must be a non-empty array of schemas");
      for (rapidjson::SizeType i = 0; i < all->Size(); ++i) fold(into, (*all)[i], child(path, "allOf", i), depth + 1);
    }
  }

  std::string visit_folded(const Value& schema, const std::string& path, const std::string& hint) {
    Value merged(rapidjson::kObjectType);
    fold(merged, schema, path, 0);
    return visit(merged, path, hint);
  }

  std::string visit_alternatives(const Value& schema, const std::string& path, const std::string& hint) {
    if (member(schema, "anyOf") && member(schema, "oneOf")) {
      fail(child(path, "oneOf"), "anyOf and oneOf in one schema are not supported (nest one in allOf)");
    }
    const char* keyword = member(schema, "anyOf") ? "anyOf" : "oneOf";
    const Value& branches = *member(schema, keyword);
    if (!branches.IsArray() || branches.Empty())
      fail(child(path, keyword), std::string(keyword) + " must be a non-empty array of schemas");
    // Keywords beside anyOf apply to every branch: each branch is folded with them.
    auto& allocator = scratch_.GetAllocator();
    Value siblings(rapidjson::kObjectType);
    for (const auto& m : schema.GetObject()) {
      if (text_of(m.name) == keyword || keyword_use(text_of(m.name)) != KeywordUse::Applied) continue;
      siblings.AddMember(Value(m.name, allocator), Value(m.value, allocator), allocator);
    }
    std::vector<std::string> options;
    for (rapidjson::SizeType i = 0; i < branches.Size(); ++i) {
      const std::string branch_path = child(path, keyword, i);
      if (siblings.ObjectEmpty()) {
        options.push_back(visit(branches[i], branch_path, hint));
      } else {
        Value merged(rapidjson::kObjectType);
        fold(merged, siblings, path, 0);
        fold(merged, branches[i], branch_path, 0);
        options.push_back(visit(merged, branch_path, hint));
      }
    }
    return options.size() == 1 ? options.front() : rules_.add(hint, join(options, " | "));
  }

  std::string visit_enum(const Value& schema, const std::string& path, const std::string& hint) {
    for (const std::string_view other : constraints(schema, {"enum", "const", "type"})) {
      fail(child(path, other),
           "\"" + std::string(other) + "\" beside enum/const is not supported (list only the allowed values)");
    }
    std::vector<const Value*> values;
    const Value* constant = member(schema, "const");
    if (const Value* listed = member(schema, "enum")) {
      if (!listed->IsArray() || listed->Empty()) fail(child(path, "enum"), "enum must be a non-empty array");
      for (const Value& v : listed->GetArray()) {
        if (!constant || v == *constant) values.push_back(&v);
      }
      if (values.empty()) fail(child(path, "const"), "const is none of the enum's values, so no value satisfies both");
    } else {
      values.push_back(constant);
    }
    const std::vector<std::string> types =
        member(schema, "type") ? schema_types(schema, path) : std::vector<std::string>{};
    std::vector<std::string> options;
    for (const Value* v : values) {
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) {
                           return value_has_type(*v, t) || (t == "number" && v->IsNumber());
                         });
      if (!typed) continue;
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
      v->Accept(writer);
      options.push_back(gbnf_literal({buffer.GetString(), buffer.GetSize()}));
    }
    if (options.empty()) fail(child(path, "type"), "no enum/const value has the schema's type");
    return options.size() == 1 ? options.front() : rules_.add(hint, join(options, " | "));
  }

  // ---- scalars --------------------------------------------------------------------------------------
  NumericBounds bounds(const Value& schema, const std::string& path) const {
    auto number = [&](const char* keyword) -> std::optional<double> {
      const Value* v = member(schema, keyword);
      if (!v || v->IsBool()) return std::nullopt;
      if (!v->IsNumber()) fail(child(path, keyword), std::string(keyword) + " must be a number");
      return v->GetDouble();
    };
    auto draft4_exclusive = [&](const char* keyword) {
      const Value* v = member(schema, keyword);
      return v && v->IsTrue();
    };
    auto tighter = [](std::optional<NumericBound> current, std::optional<double> value, bool exclusive, bool lower) {
      if (!value) return current;
      const NumericBound candidate{*value, exclusive};
      if (!current) return std::optional<NumericBound>(candidate);
      const bool stronger = lower ? (*value > current->value || (*value == current->value && exclusive))
                                  : (*value < current->value || (*value == current->value && exclusive));
      return stronger ? std::optional<NumericBound>(candidate) : current;
    };
    NumericBounds out;
    out.lower = tighter(out.lower, number("minimum"), draft4_exclusive("exclusiveMinimum"), true);
    out.lower = tighter(out.lower, number("exclusiveMinimum"), true, true);
    out.upper = tighter(out.upper, number("maximum"), draft4_exclusive("exclusiveMaximum"), false);
    out.upper = tighter(out.upper, number("exclusiveMaximum"), true, false);
    return out;
  }

  std::optional<std::size_t> count(const Value& schema, const char* keyword, const std::string& path) const {
    const Value* v = member(schema, keyword);
    if (!v) return std::nullopt;
    if (!v->IsUint64() && !(v->IsDouble() && v->GetDouble() >= 0 && std::floor(v->GetDouble()) == v->GetDouble())) {
      fail(child(path, keyword), std::string(keyword) + " must be a non-negative integer");
    }
    const double value = v->GetDouble();
    if (value > static_cast<double>(kMaxRegexRepeat)) {
      fail(child(path, keyword), std::string(keyword) + " " + std::to_string(static_cast<std::uint64_t>(value)) +
                                     " is over " + std::to_string(kMaxRegexRepeat) + ", the most this server repeats");
    }
    return static_cast<std::size_t>(value);
  }

  std::string string_char() { return rules_.add("char", json_any_string_char()); }
  // A bounded string's character: the plain class written in place, so each counted copy's plain-character
  // position is a node of its own (the mask cache then knows where a token of several characters leads);
  // only the escapes stay a shared rule, whose positions few tokens start at.
  std::string bounded_string_char() {
    return "([^\\x22\\x5C\\x00-\\x1F] | " + rules_.add("char-escape", json_string_escape()) + ")";
  }

  std::string visit_string(const Value& schema, const std::string& path, const std::string& hint) {
    const Value* pattern = member(schema, "pattern");
    const Value* format = member(schema, "format");
    const std::optional<std::size_t> min_length = count(schema, "minLength", path);
    const std::optional<std::size_t> max_length = count(schema, "maxLength", path);
    const char* length_keyword = min_length ? "minLength" : max_length ? "maxLength" : nullptr;
    if (pattern && format) fail(child(path, "format"), "format together with pattern is not supported");
    if ((pattern || format) && length_keyword) {
      fail(child(path, length_keyword),
           std::string(length_keyword) + " together with " + (pattern ? "pattern" : "format") + " is not supported");
    }
    const std::string quote = gbnf_literal("\"");
    if (pattern) {
      if (!pattern->IsString()) fail(child(path, "pattern"), "pattern must be a string");
      try {
        const std::string body = regex_to_gbnf_expression(text_of(*pattern), RegexTarget::JsonString);
        return rules_.add(hint + "-pattern", quote + " (" + body + ") " + quote);
      } catch (const GrammarError& e) {
        fail(child(path, "pattern"), e.what());
      }
    }
    if (format) {
      const std::optional<std::string_view> regex =
          format->IsString() ? string_format_regex(text_of(*format)) : std::nullopt;
      if (!regex) {
        std::string supported;
        for (const std::string_view name : supported_string_formats())
          supported += (supported.empty() ? "" : ", ") + std::string(name);
        fail(child(path, "format"), "format must be one of " + supported);
      }
      const std::string name(text_of(*format));
      return rules_.add(name, quote + " " + regex_to_gbnf_expression(*regex, RegexTarget::JsonString) + " " + quote);
    }
    if (min_length && max_length && *max_length < *min_length) {
      fail(child(path, "maxLength"),
           "maxLength " + std::to_string(*max_length) + " is below minLength " + std::to_string(*min_length));
    }
    if (!length_keyword) return rules_.add("string", quote + " " + string_char() + "* " + quote);
    // A rule of its own: a bounded array of such strings then refers to one set of the characters' copies
    // instead of expanding them once per item.
    return rules_.add(hint + "-string", quote + " " + bounded_string_char() +
                                            repeat(min_length.value_or(0), max_length.value_or(kUnlimited)) + " " +
                                            quote);
  }

  // ---- any value ------------------------------------------------------------------------------------
  std::string any_value() {
    if (any_value_) return *any_value_;
    any_value_ = rules_.reserve("json-value");
    const std::string string =
        rules_.add("string", gbnf_literal("\"") + " " + string_char() + "* " + gbnf_literal("\""));
    const std::string member_rule = rules_.add("json-member", string + " " + ws_ + " \":\" " + ws_ + " " + *any_value_);
    const std::string object = rules_.add("json-object", "\"{\" " + ws_ + " (" + member_rule + " (" + sep_ + " " +
                                                             member_rule + ")*)? " + ws_ + " \"}\"");
    const std::string array = rules_.add(
        "json-array", "\"[\" " + ws_ + " (" + *any_value_ + " (" + sep_ + " " + *any_value_ + ")*)? " + ws_ + " \"]\"");
    const std::string number = rules_.add("json-number", any_number_expression());
    rules_.define(*any_value_, join({object, array, string, number, "\"true\"", "\"false\"", "\"null\""}, " | "));
    return *any_value_;
  }

  // ---- objects --------------------------------------------------------------------------------------
  struct Entry {
    std::u32string name;
    std::string key_value;  // the member as GBNF: "\"name\"" ws ":" ws value
    bool required = false;
  };

  std::string member_expr(const std::string& key, const std::string& value) const {
    return key + " " + ws_ + " \":\" " + ws_ + " " + value;
  }

  // Key text (between the quotes) of any name but the listed ones, written canonically so that each name
  // has one spelling: a trie of the names, leaving it anywhere except at a listed name's end.
  std::string other_key(const std::vector<std::u32string>& names, const std::string& hint) {
    const std::string any_char = json_string_char(CodepointSet::everything());
    const std::string rest = rules_.add("key-rest", any_char + "*");
    if (names.empty()) return rest;
    struct Node {
      std::map<char32_t, std::size_t> children;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::u32string& name : names) {
      std::size_t at = 0;
      for (const char32_t c : name) {
        auto found = trie[at].children.find(c);
        if (found == trie[at].children.end()) {
          trie.emplace_back();
          found = trie[at].children.emplace(c, trie.size() - 1).first;
        }
        at = found->second;
      }
      trie[at].end = true;
    }
    std::vector<std::string> rule_names(trie.size());
    for (std::size_t i = trie.size(); i-- > 0;) {  // children come after parents: build from the back
      std::vector<std::string> options;
      if (!trie[i].end) options.push_back("\"\"");
      CodepointSet listed;
      for (const auto& [c, next] : trie[i].children) {
        options.push_back(gbnf_literal(json_escape(std::u32string(1, c))) + " " + rule_names[next]);
        listed.add(c);
      }
      const CodepointSet others = CodepointSet::everything().minus(listed);
      options.push_back(json_string_char(others) + " " + rest);
      rule_names[i] = rules_.add(hint + "-other-key", join(options, " | "));
    }
    return rule_names[0];
  }

  std::string visit_object(const Value& schema, const std::string& path, const std::string& hint) {
    const Value* properties = member(schema, "properties");
    const Value* required = member(schema, "required");
    const Value* additional = member(schema, "additionalProperties");
    if (properties && !properties->IsObject()) fail(child(path, "properties"), "properties must be an object");
    if (required && !required->IsArray()) fail(child(path, "required"), "required must be an array of names");
    std::set<std::string> required_names;
    if (required) {
      for (const Value& name : required->GetArray()) {
        if (!name.IsString()) fail(child(path, "required"), "required must be an array of names");
        required_names.emplace(text_of(name));
      }
    }
    // Absent additionalProperties: closed when properties are listed (xgrammar's strict mode), open when
    // none are ({"type":"object"} is any object).
    const bool additional_allowed = additional ? !additional->IsFalse() : properties == nullptr;
    if (additional && !additional->IsBool() && !additional->IsObject()) {
      fail(child(path, "additionalProperties"), "additionalProperties must be a boolean or a schema");
    }
    std::string additional_value;
    if (additional_allowed) {
      additional_value = additional && additional->IsObject()
                             ? visit(*additional, child(path, "additionalProperties"), hint + "-value")
                             : any_value();
    }
    std::vector<Entry> entries;
    std::set<std::string> listed;
    auto add_entry = [&](std::string_view name, const std::string& value) {
      Entry entry;
      std::size_t bad = 0;
      decode_utf8(name, entry.name, bad);  // the parser validated the encoding
      // A value longer than one rule name gets a rule of its own: it appears in two rules below.
      const bool simple = value.find_first_of(" (|") == std::string::npos;
      const std::string value_rule = simple ? value : rules_.add(std::string(name) + "-value", value);
      entry.key_value = member_expr(gbnf_literal("\"" + json_escape(entry.name) + "\""), value_rule);
      entry.required = required_names.count(std::string(name)) != 0;
      entries.push_back(std::move(entry));
      listed.emplace(name);
    };
    if (properties) {
      for (const auto& property : properties->GetObject()) {
        const std::string_view name = text_of(property.name);
        add_entry(name, visit(property.value, child(child(path, "properties"), name), std::string(name)));
      }
    }
    for (const std::string& name : required_names) {
      if (listed.count(name)) continue;
      if (!additional_allowed) {
        fail(child(path, "required"),
             "required property \"" + name + "\" is not in properties and additional properties are not allowed");
      }
      add_entry(name, additional_value);
    }
    std::string additional_member;
    if (additional_allowed) {
      std::vector<std::u32string> names;
      for (const Entry& e : entries) names.push_back(e.name);
      const std::string quote = gbnf_literal("\"");
      const bool simple = additional_value.find_first_of(" (|") == std::string::npos;
      const std::string value_rule =
          simple ? additional_value : rules_.add(hint + "-additional-value", additional_value);
      additional_member =
          rules_.add(hint + "-additional", member_expr(quote + " " + other_key(names, hint) + " " + quote, value_rule));
    }
    // tail(i): members i.. after at least one member was written (each led by a comma);
    // start(i): members i.. when none was written yet. Both as rules, each referring to the next.
    const std::size_t n = entries.size();
    std::string tail = additional_allowed ? "(" + sep_ + " " + additional_member + ")*" : "";
    std::string start = additional_allowed ? "(" + additional_member + " " + tail + ")?" : "\"\"";
    if (additional_allowed && n > 0) tail = rules_.add(hint + "-rest", tail);
    for (std::size_t i = n; i-- > 0;) {
      const Entry& e = entries[i];
      const std::string after = tail.empty() ? "" : " " + tail;
      start = rules_.add(hint + "-from-" + std::to_string(i + 1),
                         e.required ? e.key_value + after : e.key_value + after + " | " + start);
      if (i == 0) break;  // members from the first on always start without a comma
      const std::string with = sep_ + " " + e.key_value;
      tail = rules_.add(hint + "-after-" + std::to_string(i + 1), (e.required ? with : "(" + with + ")?") + after);
    }
    return rules_.add(hint, "\"{\" " + ws_ + " " + start + " " + ws_ + " \"}\"");
  }

  // ---- arrays ---------------------------------------------------------------------------------------
  std::string visit_array(const Value& schema, const std::string& path, const std::string& hint) {
    const Value* prefix = member(schema, "prefixItems");
    const Value* items = member(schema, "items");
    const char* prefix_keyword = "prefixItems";
    const Value* rest = items;
    const char* rest_keyword = "items";
    if (items && items->IsArray()) {  // draft 4-7 tuples: items as a list, additionalItems after it
      if (prefix) fail(child(path, "items"), "items as a list beside prefixItems is not supported");
      prefix = items;
      prefix_keyword = "items";
      rest = member(schema, "additionalItems");
      rest_keyword = "additionalItems";
    }
    if (prefix && !prefix->IsArray())
      fail(child(path, prefix_keyword), std::string(prefix_keyword) + " must be an array of schemas");
    const std::size_t k_all = prefix ? prefix->Size() : 0;
    // Without items, a tuple is closed (xgrammar's strict mode); a plain array takes any items.
    const bool rest_allowed = rest ? !rest->IsFalse() : prefix == nullptr;
    const std::size_t min_items = count(schema, "minItems", path).value_or(0);
    std::optional<std::size_t> max_items = count(schema, "maxItems", path);
    if (max_items && *max_items < min_items) {
      fail(child(path, "maxItems"),
           "maxItems " + std::to_string(*max_items) + " is below minItems " + std::to_string(min_items));
    }
    if (!rest_allowed && min_items > k_all) {
      fail(child(path, "minItems"), "minItems " + std::to_string(min_items) + " exceeds the " + std::to_string(k_all) +
                                        " items the array may hold");
    }
    const std::size_t k = max_items ? std::min(k_all, *max_items) : k_all;
    std::vector<std::string> element;
    for (std::size_t i = 0; i < k; ++i) {
      element.push_back(visit((*prefix)[static_cast<rapidjson::SizeType>(i)], child(path, prefix_keyword, i),
                              hint + "-" + std::to_string(i + 1)));
    }
    std::string rest_item;
    const bool more = rest_allowed && (!max_items || *max_items > k);
    if (more) {
      rest_item = rest && rest->IsObject() ? visit(*rest, child(path, rest_keyword), hint + "-item") : any_value();
    }
    std::string body;
    if (k == 0) {
      if (more) {
        const std::size_t first_min = std::max<std::size_t>(min_items, 1) - 1;
        const std::size_t first_max = max_items ? *max_items - 1 : kUnlimited;
        body = rest_item + (first_max == 0 ? "" : " (" + sep_ + " " + rest_item + ")" + repeat(first_min, first_max));
        if (min_items == 0) body = "(" + body + ")?";
      }
    } else {
      std::string next;
      if (more) {
        const std::size_t low = min_items > k ? min_items - k : 0;
        next = "(" + sep_ + " " + rest_item + ")" + repeat(low, max_items ? *max_items - k : kUnlimited);
      }
      for (std::size_t i = k; i-- > 1;) {  // item i+1 (1-based) is required when minItems reaches it
        const std::string inner = sep_ + " " + element[i] + (next.empty() ? "" : " " + next);
        next = i + 1 <= min_items ? inner : "(" + inner + ")?";
      }
      body = element[0] + (next.empty() ? "" : " " + next);
      if (min_items == 0) body = "(" + body + ")?";
    }
    return rules_.add(hint + "-array", "\"[\" " + ws_ + (body.empty() ? "" : " " + body) + " " + ws_ + " \"]\"");
  }

  const Value& root_;
  GbnfRules rules_;
  rapidjson::Document scratch_;  // owns the schemas folded from allOf
  std::map<std::string, std::string> ref_rules_;
  std::optional<std::string> any_value_;
  std::string ws_;
  std::string sep_;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json, const std::optional<std::string>& whitespace_pattern) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag>(schema_json.data(), schema_json.size());
  if (document.HasParseError()) {
    throw GrammarError(std::string("schema is not valid JSON: ") +
                       rapidjson::GetParseError_En(document.GetParseError()) + " at offset " +
                       std::to_string(document.GetErrorOffset()));
  }
  return SchemaConverter(document, whitespace_pattern).convert();
}

}  // namespace engine::grammar
