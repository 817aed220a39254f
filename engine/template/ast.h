#pragma once

// The parsed form of a template. Immutable after parsing and shared by every render.

#include <memory>
#include <string>
#include <vector>

#include "engine/template/error.h"
#include "engine/template/value.h"

namespace engine::template_::detail {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Argument {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // items
  kTuple,      // items
  kDict,       // items: key, value, key, value, ...
  kAttribute,  // a.name
  kItem,       // a[b]
  kSlice,      // a[b:c:d]; missing parts are null
  kCall,       // a(arguments)
  kFilter,     // a | name(arguments); a is null inside {% filter %}
  kTest,       // a is [not] name(arguments); negated
  kNegate,     // -a
  kPlus,       // +a
  kNot,        // not a
  kBinary,     // a op b: + - * / // % ** ~
  kAnd,        // a and b
  kOr,         // a or b
  kCompare,    // items[0] ops[0] items[1] ops[1] items[2] ... (chained like Python)
  kCondition,  // a if b else c (c may be null: undefined)
};

struct Expr {
  ExprKind kind;
  Location location;
  Value literal;
  std::string name;  // variable, attribute, filter or test name; operator for kBinary
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  ExprPtr a, b, c;
  std::vector<Argument> arguments;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches
  kFor,          // targets in expr [if filter] body [else otherwise]
  kSet,          // targets = expr, or {% set ns.attr = expr %} (attribute set), or block set (body, filters)
  kMacro,        // name(parameters) body
  kCallBlock,    // {% call(parameters) expr %} body
  kFilterBlock,  // {% filter filters %} body
  kBreak,
  kContinue,
  kWith,        // {% with assignments %} body
  kGeneration,  // {% generation %} body: rendered in place (transformers' assistant-mask marker)
};

struct Branch {
  ExprPtr condition;  // null for else
  Body body;
};

struct Parameter {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  NodeKind kind;
  Location location;
  std::string text;  // kText; macro name; attribute name for an attribute set
  ExprPtr expr;      // output, loop iterable, set value, call expression, attribute-set target object
  ExprPtr filter;    // loop filter
  std::vector<std::string> targets;
  std::vector<Branch> branches;
  Body body;
  Body otherwise;
  std::vector<Parameter> parameters;
  std::vector<ExprPtr> filters;  // kFilter expressions with a null operand, applied in order
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kWith
  bool uses_caller = false;  // macros: whether the body references caller / varargs / kwargs
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

}  // namespace engine::template_::detail
