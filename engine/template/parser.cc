#include "engine/template/parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace engine::template_::detail {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  Body parse_template() {
    Body body = parse_body({});
    if (current().type != TokenType::kEnd) {
      // parse_body only stops early at a block tag whose name it was asked to stop at.
      fail(current(), "unexpected '" + peek(1).value + "'");
    }
    return body;
  }

 private:
  // ---- token helpers -----------------------------------------------------------------------------------

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(std::size_t ahead) const {
    const std::size_t at = pos_ + ahead;
    return at < tokens_.size() ? tokens_[at] : tokens_.back();
  }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool is_op(std::string_view op) const { return current().type == TokenType::kOperator && current().value == op; }
  bool is_name(std::string_view name) const { return current().type == TokenType::kName && current().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case TokenType::kText: return "template data";
      case TokenType::kVariableBegin: return "'{{'";
      case TokenType::kVariableEnd: return "'}}'";
      case TokenType::kBlockBegin: return "'{%'";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kName: return "'" + token.value + "'";
      case TokenType::kString: return "string literal";
      case TokenType::kInteger:
      case TokenType::kFloat: return "number " + token.value;
      case TokenType::kOperator: return "'" + token.value + "'";
      case TokenType::kEnd: return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const Token& at, const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kSyntax, at.location, message);
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(current(), "expected '" + std::string(op) + "', got " + describe(current()));
  }
  void expect(TokenType type, std::string_view what) {
    if (current().type != type) fail(current(), "expected " + std::string(what) + ", got " + describe(current()));
    next();
  }
  std::string expect_name() {
    if (current().type != TokenType::kName) fail(current(), "expected a name, got " + describe(current()));
    return next().value;
  }

  // Bounds recursion: statement and expression nesting both pass through here.
  class DepthGuard {
   public:
    DepthGuard(Parser& parser, const Token& at) : parser_(parser) {
      if (++parser_.depth_ > parser_.max_depth_) parser_.fail(at, "template nested too deeply");
    }
    ~DepthGuard() { --parser_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
  };

  static ExprPtr make(ExprKind kind, Location where) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->location = where;
    return e;
  }
  static NodePtr make_node(NodeKind kind, Location where) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->location = where;
    return n;
  }

  // ---- statements --------------------------------------------------------------------------------------

  bool at_block_named(std::initializer_list<std::string_view> names) const {
    if (current().type != TokenType::kBlockBegin || peek(1).type != TokenType::kName) return false;
    for (auto name : names) {
      if (peek(1).value == name) return true;
    }
    return false;
  }

  // Parses statements until a block tag named in `end` (left unconsumed) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> end) {
    Body body;
    while (current().type != TokenType::kEnd) {
      const Token& token = current();
      if (token.type == TokenType::kText) {
        auto node = make_node(NodeKind::kText, token.location);
        node->text = token.value;
        body.push_back(std::move(node));
        next();
      } else if (token.type == TokenType::kVariableBegin) {
        next();
        auto node = make_node(NodeKind::kOutput, token.location);
        node->expr = parse_tuple(true, false, {});
        expect(TokenType::kVariableEnd, "'}}'");
        body.push_back(std::move(node));
      } else if (token.type == TokenType::kBlockBegin) {
        if (end.size() > 0 && at_block_named(end)) return body;
        body.push_back(parse_statement());
      } else {
        fail(token, "unexpected " + describe(token));
      }
    }
    if (end.size() > 0) {
      std::string names;
      for (auto name : end) names += (names.empty() ? "'" : " or '") + std::string(name) + "'";
      fail(current(), "unexpected end of template: expected " + names);
    }
    return body;
  }

  // Consumes "{% name %}" where name closes the current block.
  void end_block(std::string_view name) {
    expect(TokenType::kBlockBegin, "'{%'");
    if (!skip_name(name)) fail(current(), "expected '" + std::string(name) + "', got " + describe(current()));
    expect(TokenType::kBlockEnd, "'%}'");
  }

  NodePtr parse_statement() {
    const Token& open = next();  // {%
    DepthGuard guard(*this, open);
    if (current().type != TokenType::kName) fail(current(), "expected a tag name, got " + describe(current()));
    const Token& tag = next();
    const std::string& name = tag.value;
    if (name == "if") return parse_if(open);
    if (name == "for") return parse_for(open);
    if (name == "set") return parse_set(open);
    if (name == "macro") return parse_macro(open);
    if (name == "call") return parse_call_block(open);
    if (name == "filter") return parse_filter_block(open);
    if (name == "with") return parse_with(open);
    if (name == "generation") {
      auto node = make_node(NodeKind::kGeneration, open.location);
      expect(TokenType::kBlockEnd, "'%}'");
      node->body = parse_body({"endgeneration"});
      end_block("endgeneration");
      return node;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(tag, "'" + name + "' outside of a loop");
      expect(TokenType::kBlockEnd, "'%}'");
      return make_node(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, open.location);
    }
    static constexpr std::string_view kUnsupported[] = {"extends", "block",      "include", "import", "from",
                                                        "do",      "autoescape", "trans",   "raw"};
    for (auto unsupported : kUnsupported) {
      if (name == unsupported) fail(tag, "the '" + name + "' tag is not supported in chat templates");
    }
    fail(tag, "unknown tag '" + name + "'");
  }

  NodePtr parse_if(const Token& open) {
    auto node = make_node(NodeKind::kIf, open.location);
    ExprPtr condition = parse_tuple(false, false, {});
    expect(TokenType::kBlockEnd, "'%}'");
    while (true) {
      Branch branch{std::move(condition), parse_body({"elif", "else", "endif"})};
      node->branches.push_back(std::move(branch));
      next();  // {%
      const std::string keyword = next().value;
      if (keyword == "elif") {
        condition = parse_tuple(false, false, {});
        expect(TokenType::kBlockEnd, "'%}'");
        continue;
      }
      if (keyword == "else") {
        expect(TokenType::kBlockEnd, "'%}'");
        node->branches.push_back(Branch{nullptr, parse_body({"endif"})});
        end_block("endif");
      } else {
        expect(TokenType::kBlockEnd, "'%}'");
      }
      return node;
    }
  }

  // Loop and set targets: a name, or names separated by commas (optionally in parentheses).
  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool parenthesized = skip_op("(");
    do {
      targets.push_back(expect_name());
    } while (skip_op(",") && current().type == TokenType::kName);
    if (parenthesized) expect_op(")");
    return targets;
  }

  NodePtr parse_for(const Token& open) {
    auto node = make_node(NodeKind::kFor, open.location);
    node->targets = parse_targets();
    if (!skip_name("in")) fail(current(), "expected 'in' in for loop, got " + describe(current()));
    node->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name("recursive")) fail(current(), "recursive loops are not supported");
    expect(TokenType::kBlockEnd, "'%}'");
    ++loop_depth_;
    node->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (at_block_named({"else"})) {
      next();
      next();
      expect(TokenType::kBlockEnd, "'%}'");
      node->otherwise = parse_body({"endfor"});
    }
    end_block("endfor");
    return node;
  }

  NodePtr parse_set(const Token& open) {
    auto node = make_node(NodeKind::kSet, open.location);
    if (current().type == TokenType::kName && peek(1).type == TokenType::kOperator && peek(1).value == ".") {
      // {% set ns.attribute = value %}
      node->targets.push_back(next().value);
      next();
      node->text = expect_name();
      expect_op("=");
      node->expr = parse_tuple(true, false, {});
      expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
    node->targets = parse_targets();
    if (skip_op("=")) {
      node->expr = parse_tuple(true, false, {});
      expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
    if (node->targets.size() != 1) fail(current(), "a block set assigns exactly one name");
    while (skip_op("|")) node->filters.push_back(parse_filter(nullptr));
    expect(TokenType::kBlockEnd, "'%}'");
    node->body = parse_body({"endset"});
    end_block("endset");
    return node;
  }

  std::vector<Parameter> parse_parameters() {
    std::vector<Parameter> parameters;
    expect_op("(");
    while (!is_op(")")) {
      if (!parameters.empty()) expect_op(",");
      if (is_op(")")) break;
      const Token& at = current();
      Parameter parameter{expect_name(), nullptr};
      for (const auto& other : parameters) {
        if (other.name == parameter.name) fail(at, "duplicate parameter '" + parameter.name + "'");
      }
      if (skip_op("=")) {
        parameter.default_value = parse_expression(true);
      } else if (!parameters.empty() && parameters.back().default_value) {
        fail(at, "non-default parameter follows default parameter");
      }
      parameters.push_back(std::move(parameter));
    }
    expect_op(")");
    return parameters;
  }

  static void scan_names(const Expr* e, Node& macro) {
    if (e == nullptr) return;
    if (e->kind == ExprKind::kName) {
      macro.uses_caller |= e->name == "caller";
      macro.uses_varargs |= e->name == "varargs";
      macro.uses_kwargs |= e->name == "kwargs";
    }
    for (const auto& item : e->items) scan_names(item.get(), macro);
    for (const auto& argument : e->arguments) scan_names(argument.value.get(), macro);
    scan_names(e->a.get(), macro);
    scan_names(e->b.get(), macro);
    scan_names(e->c.get(), macro);
  }
  static void scan_names(const Body& body, Node& macro) {
    for (const auto& n : body) {
      scan_names(n->expr.get(), macro);
      scan_names(n->filter.get(), macro);
      for (const auto& branch : n->branches) {
        scan_names(branch.condition.get(), macro);
        scan_names(branch.body, macro);
      }
      for (const auto& parameter : n->parameters) scan_names(parameter.default_value.get(), macro);
      for (const auto& f : n->filters) scan_names(f.get(), macro);
      for (const auto& assignment : n->assignments) scan_names(assignment.second.get(), macro);
      scan_names(n->body, macro);
      scan_names(n->otherwise, macro);
    }
  }

  NodePtr parse_macro(const Token& open) {
    auto node = make_node(NodeKind::kMacro, open.location);
    node->text = expect_name();
    node->parameters = parse_parameters();
    expect(TokenType::kBlockEnd, "'%}'");
    const int saved_loops = std::exchange(loop_depth_, 0);  // break cannot leave a macro
    node->body = parse_body({"endmacro"});
    loop_depth_ = saved_loops;
    end_block("endmacro");
    scan_names(node->body, *node);
    return node;
  }

  NodePtr parse_call_block(const Token& open) {
    auto node = make_node(NodeKind::kCallBlock, open.location);
    if (is_op("(")) node->parameters = parse_parameters();
    node->expr = parse_expression(true);
    if (node->expr->kind != ExprKind::kCall) fail(open, "expected a call after 'call'");
    expect(TokenType::kBlockEnd, "'%}'");
    const int saved_loops = std::exchange(loop_depth_, 0);
    node->body = parse_body({"endcall"});
    loop_depth_ = saved_loops;
    end_block("endcall");
    scan_names(node->body, *node);
    return node;
  }

  NodePtr parse_filter_block(const Token& open) {
    auto node = make_node(NodeKind::kFilterBlock, open.location);
    do {
      node->filters.push_back(parse_filter(nullptr));
    } while (skip_op("|"));
    expect(TokenType::kBlockEnd, "'%}'");
    node->body = parse_body({"endfilter"});
    end_block("endfilter");
    return node;
  }

  NodePtr parse_with(const Token& open) {
    auto node = make_node(NodeKind::kWith, open.location);
    while (current().type != TokenType::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      node->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    expect(TokenType::kBlockEnd, "'%}'");
    node->body = parse_body({"endwith"});
    end_block("endwith");
    return node;
  }

  // ---- expressions -------------------------------------------------------------------------------------

  ExprPtr parse_expression(bool with_condition) {
    DepthGuard guard(*this, current());
    return with_condition ? parse_condition() : parse_or();
  }

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const auto type = current().type;
    if (type == TokenType::kVariableEnd || type == TokenType::kBlockEnd || type == TokenType::kEnd) return true;
    if (is_op(")")) return true;
    for (auto name : extra_end) {
      if (is_name(name)) return true;
    }
    return false;
  }

  // Comma-separated expressions form a tuple (Jinja's parse_tuple).
  ExprPtr parse_tuple(bool with_condition, bool explicit_parentheses,
                      std::initializer_list<std::string_view> extra_end) {
    const Location where = current().location;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condition));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items.front());
      if (!explicit_parentheses) fail(current(), "expected an expression, got " + describe(current()));
    }
    auto tuple = make(ExprKind::kTuple, where);
    tuple->items = std::move(items);
    return tuple;
  }

  ExprPtr parse_condition() {
    ExprPtr value = parse_or();
    while (is_name("if")) {
      const Location where = next().location;
      auto condition = make(ExprKind::kCondition, where);
      condition->b = parse_or();
      condition->a = std::move(value);
      if (skip_name("else")) condition->c = parse_expression(true);
      value = std::move(condition);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      auto e = make(ExprKind::kOr, next().location);
      e->a = std::move(left);
      e->b = parse_and();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      auto e = make(ExprKind::kAnd, next().location);
      e->a = std::move(left);
      e->b = parse_not();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, current());
      auto e = make(ExprKind::kNot, next().location);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Location where = current().location;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<std::string> ops;
    while (true) {
      if (current().type == TokenType::kOperator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        ops.push_back(next().value);
      } else if (is_name("in")) {
        next();
        ops.emplace_back("in");
      } else if (is_name("not") && peek(1).type == TokenType::kName && peek(1).value == "in") {
        next();
        next();
        ops.emplace_back("not in");
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::kCompare, where);
    e->items.push_back(std::move(first));
    for (auto& operand : operands) e->items.push_back(std::move(operand));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr binary(ExprPtr left, const Token& op, ExprPtr right) {
    auto e = make(ExprKind::kBinary, op.location);
    e->name = op.value;
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      left = binary(std::move(left), op, parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& op = next();
      left = binary(std::move(left), op, parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      left = binary(std::move(left), op, parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& op = next();
      left = binary(std::move(left), op, parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, current());
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      node = make(op.value == "-" ? ExprKind::kNegate : ExprKind::kPlus, op.location);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    switch (token.type) {
      case TokenType::kName: {
        next();
        const std::string& name = token.value;
        if (name == "true" || name == "True") return literal(Value::boolean(true), token.location);
        if (name == "false" || name == "False") return literal(Value::boolean(false), token.location);
        if (name == "none" || name == "None") return literal(Value::none(), token.location);
        auto e = make(ExprKind::kName, token.location);
        e->name = name;
        return e;
      }
      case TokenType::kString: {
        std::string value = next().value;
        while (current().type == TokenType::kString) value += next().value;  // adjacent literals join
        return literal(Value::string(std::move(value)), token.location);
      }
      case TokenType::kInteger: {
        next();
        std::int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(token.value.data(), token.value.data() + token.value.size(), v);
        if (ec != std::errc() || ptr != token.value.data() + token.value.size()) {
          fail(token, "integer literal out of range");
        }
        return literal(Value::integer(v), token.location);
      }
      case TokenType::kFloat: {
        next();
        return literal(Value::floating(std::strtod(token.value.c_str(), nullptr)), token.location);
      }
      case TokenType::kOperator:
        if (token.value == "(") {
          next();
          ExprPtr inner = parse_tuple(true, true, {});
          expect_op(")");
          return inner;
        }
        if (token.value == "[") return parse_list();
        if (token.value == "{") return parse_dict();
        break;
      default: break;
    }
    fail(token, "unexpected " + describe(token));
  }

  static ExprPtr literal(Value value, Location where) {
    auto e = make(ExprKind::kLiteral, where);
    e->literal = std::move(value);
    return e;
  }

  ExprPtr parse_list() {
    auto e = make(ExprKind::kList, next().location);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = make(ExprKind::kDict, next().location);
    while (!is_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const Token& dot = next();
        if (current().type == TokenType::kName) {
          auto e = make(ExprKind::kAttribute, dot.location);
          e->name = next().value;
          e->a = std::move(node);
          node = std::move(e);
        } else if (current().type == TokenType::kInteger) {
          auto e = make(ExprKind::kItem, dot.location);
          e->a = std::move(node);
          e->b = parse_primary();
          node = std::move(e);
        } else {
          fail(current(), "expected an attribute name after '.', got " + describe(current()));
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const Location where = next().location;  // [
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!is_op(":")) start = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
      if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    }
    expect_op("]");
    if (!is_slice) {
      if (!start) fail(current(), "expected a subscript");
      auto e = make(ExprKind::kItem, where);
      e->a = std::move(object);
      e->b = std::move(start);
      return e;
    }
    auto e = make(ExprKind::kSlice, where);
    e->items.push_back(std::move(object));
    e->a = std::move(start);
    e->b = std::move(stop);
    e->c = std::move(step);
    return e;
  }

  std::vector<Argument> parse_arguments() {
    expect_op("(");
    std::vector<Argument> arguments;
    bool keyword_seen = false;
    while (!is_op(")")) {
      if (!arguments.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(current(), "argument unpacking (* and **) is not supported");
      if (current().type == TokenType::kName && peek(1).type == TokenType::kOperator && peek(1).value == "=") {
        std::string name = next().value;
        next();
        for (const auto& other : arguments) {
          if (other.name == name) fail(current(), "keyword argument '" + name + "' repeated");
        }
        arguments.push_back(Argument{std::move(name), parse_expression(true)});
        keyword_seen = true;
      } else {
        if (keyword_seen) fail(current(), "positional argument follows keyword argument");
        arguments.push_back(Argument{{}, parse_expression(true)});
      }
    }
    expect_op(")");
    return arguments;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(ExprKind::kCall, current().location);
    e->a = std::move(callee);
    e->arguments = parse_arguments();
    return e;
  }

  // `operand | name(args)`, or a filter of a {% filter %} block / block set when operand is null.
  ExprPtr parse_filter(ExprPtr operand) {
    auto e = make(ExprKind::kFilter, current().location);
    e->name = expect_name();
    while (is_op(".") && peek(1).type == TokenType::kName) {
      next();
      e->name += "." + next().value;
    }
    if (is_op("(")) e->arguments = parse_arguments();
    e->a = std::move(operand);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr operand) {
    auto e = make(ExprKind::kTest, next().location);  // is
    e->negated = skip_name("not");
    e->name = expect_name();
    while (is_op(".") && peek(1).type == TokenType::kName) {
      next();
      e->name += "." + next().value;
    }
    const Token& token = current();
    if (is_op("(")) {
      e->arguments = parse_arguments();
    } else if ((token.type == TokenType::kName && token.value != "else" && token.value != "or" &&
                token.value != "and") ||
               token.type == TokenType::kString || token.type == TokenType::kInteger ||
               token.type == TokenType::kFloat || is_op("[") || is_op("{")) {
      // Jinja's one-argument form: `x is divisibleby 3`, `x is sameas false`.
      if (is_name("is")) fail(token, "tests cannot be chained with 'is'");
      ExprPtr argument = parse_postfix(parse_primary());
      e->arguments.push_back(Argument{{}, std::move(argument)});
    }
    e->a = std::move(operand);
    return e;
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(std::string_view source, const LexerOptions& options, int max_depth) {
  return Parser(tokenize(source, options), max_depth).parse_template();
}

}  // namespace engine::template_::detail
