#include "engine/template/renderer.h"

#include <utility>

namespace engine::template_::detail {

// ---- scopes ----------------------------------------------------------------------------------------------

const Value* Scope::find_local(std::string_view name) const {
  for (auto it = variables.rbegin(); it != variables.rend(); ++it) {
    if (it->first == name) return &it->second;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [key, existing] : variables) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  variables.emplace_back(std::string(name), std::move(value));
}

// ---- macros ----------------------------------------------------------------------------------------------

class MacroValue : public Callable {
 public:
  MacroValue(const Node& node, ScopePtr closure) : node_(node), closure_(std::move(closure)) {}
  // Both branches must be views: a std::string and a literal would make a temporary string, and the view
  // would outlive it.
  std::string_view name() const override {
    return node_.kind == NodeKind::kMacro ? std::string_view(node_.text) : std::string_view("caller");
  }
  Value call(Renderer& renderer, CallArgs args) const override {
    if (!closure_) throw EvalError("macro '" + std::string(name()) + "' called after its render finished");
    return renderer.invoke_macro(node_, closure_, std::move(args));
  }
  void release() { closure_.reset(); }

 private:
  const Node& node_;
  ScopePtr closure_;
};

// The caller() of a {% call %} block: the block body, with the parameters of the call statement.
class CallerValue : public Callable {
 public:
  CallerValue(const Node& node, ScopePtr closure) : node_(node), closure_(std::move(closure)) {}
  std::string_view name() const override { return "caller"; }
  Value call(Renderer& renderer, CallArgs args) const override {
    return renderer.invoke_macro(node_, closure_, std::move(args));
  }

 private:
  const Node& node_;
  ScopePtr closure_;
};

// ---- renderer --------------------------------------------------------------------------------------------

Renderer::Renderer(const Program& program, const RenderOptions& options) : program_(program), options_(options) {}

Renderer::~Renderer() {
  for (auto& ns : namespaces_) ns->attributes = Dict();
  for (auto& macro : macros_) macro->release();
}

std::string Renderer::render(const Value& context) {
  auto root = std::make_shared<Scope>();
  if (context.is_dict()) root->context = &context.as_dict();
  std::string out;
  exec_body(program_.body, root, out);
  return out;
}

void Renderer::count_iteration() {
  if (++iterations_ > program_.limits.max_loop_iterations) {
    throw EvalError(
        "the template ran more than " + std::to_string(program_.limits.max_loop_iterations) + " loop iterations",
        TemplateError::Kind::kLimit);
  }
}

void Renderer::check_string(std::size_t bytes) const {
  if (bytes > program_.limits.max_value_bytes) {
    throw EvalError("a string grew past " + std::to_string(program_.limits.max_value_bytes) + " bytes",
                    TemplateError::Kind::kLimit);
  }
}

void Renderer::check_list(std::size_t items) const {
  if (items > program_.limits.max_list_items) {
    throw EvalError("a list grew past " + std::to_string(program_.limits.max_list_items) + " items",
                    TemplateError::Kind::kLimit);
  }
}

Value Renderer::make_namespace(Dict attributes) {
  auto data = std::make_shared<NamespaceData>(NamespaceData{std::move(attributes)});
  // Keep a handle so the destructor can clear it: a namespace may hold itself.
  namespaces_.push_back(data);
  return Value::make_namespace(std::move(data));
}

void Renderer::append(std::string& out, std::string_view text) {
  produced_ += text.size();
  if (produced_ > program_.limits.max_output_bytes) {
    throw EvalError(
        "the template produced more than " + std::to_string(program_.limits.max_output_bytes) + " bytes of output",
        TemplateError::Kind::kLimit);
  }
  out += text;
}

Value Renderer::lookup(std::string_view name, const ScopePtr& scope) const {
  for (const Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    if (const Value* v = s->find_local(name)) return *v;
    if (s->context != nullptr) {
      if (const Value* v = s->context->find(name)) return *v;
    }
  }
  Value global = global_function(name);
  if (!global.is_undefined()) return global;
  return Value::undefined(std::string(name));
}

Value Renderer::call_value(const Value& callee, CallArgs args, std::string_view what) {
  if (callee.is_callable()) return callee.as_callable().call(*this, std::move(args));
  if (callee.is_undefined()) {
    const std::string name = callee.undefined_name().empty() ? std::string(what) : callee.undefined_name();
    throw EvalError("'" + name + "' is undefined");
  }
  throw EvalError("'" + std::string(callee.type_name()) + "' object is not callable");
}

Value Renderer::invoke_macro(const Node& node, const ScopePtr& closure, CallArgs args) {
  if (call_depth_ >= program_.limits.max_call_depth) {
    throw EvalError("macro calls nested deeper than " + std::to_string(program_.limits.max_call_depth),
                    TemplateError::Kind::kLimit);
  }
  const std::string display = node.kind == NodeKind::kMacro ? "macro '" + node.text + "'" : "the call block";
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  std::vector<bool> bound(node.parameters.size(), false);
  if (args.positional.size() > node.parameters.size() && !node.uses_varargs) {
    throw EvalError(display + " takes not more than " + std::to_string(node.parameters.size()) + " argument(s)");
  }
  for (std::size_t i = 0; i < node.parameters.size() && i < args.positional.size(); ++i) {
    scope->set(node.parameters[i].name, args.positional[i]);
    bound[i] = true;
  }
  Dict extra_keywords;
  for (auto& [key, value] : args.keyword) {
    bool matched = false;
    for (std::size_t i = 0; i < node.parameters.size(); ++i) {
      if (node.parameters[i].name == key) {
        if (bound[i]) throw EvalError(display + " got multiple values for argument '" + key + "'");
        scope->set(key, value);
        bound[i] = matched = true;
        break;
      }
    }
    if (matched) continue;
    if (key == "caller" && node.uses_caller) {
      scope->set("caller", value);
    } else if (node.uses_kwargs) {
      extra_keywords.set(key, value);
    } else {
      throw EvalError(display + " takes no keyword argument '" + key + "'");
    }
  }
  std::vector<Value> varargs;
  for (std::size_t i = node.parameters.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  scope->set("varargs", Value::list(std::move(varargs), true));
  scope->set("kwargs", Value::dict(std::move(extra_keywords)));
  // Defaults are evaluated in the macro's scope, after the passed arguments are bound.
  for (std::size_t i = 0; i < node.parameters.size(); ++i) {
    if (bound[i]) continue;
    const auto& parameter = node.parameters[i];
    scope->set(parameter.name,
               parameter.default_value ? eval(*parameter.default_value, scope) : Value::undefined(parameter.name));
  }
  ++call_depth_;
  std::string out;
  try {
    exec_body(node.body, scope, out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

// ---- statements ------------------------------------------------------------------------------------------

Renderer::Flow Renderer::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& node : body) {
    const Flow flow = exec(*node, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Node& node, const ScopePtr& scope, std::string& out) {
  try {
    switch (node.kind) {
      case NodeKind::kText: append(out, node.text); return Flow::kNormal;
      case NodeKind::kOutput: {
        const Value v = eval(*node.expr, scope);
        if (v.is_string()) {
          append(out, v.as_string());
        } else {
          append(out, v.str(program_.limits.max_value_bytes));
        }
        return Flow::kNormal;
      }
      case NodeKind::kIf:
        for (const auto& branch : node.branches) {
          if (!branch.condition || eval(*branch.condition, scope).truthy()) return exec_body(branch.body, scope, out);
        }
        return Flow::kNormal;
      case NodeKind::kFor: return exec_for(node, scope, out);
      case NodeKind::kSet: exec_set(node, scope); return Flow::kNormal;
      case NodeKind::kMacro: {
        auto macro = std::make_shared<MacroValue>(node, scope);
        macros_.push_back(macro);
        scope->set(node.text, Value::callable(macro));
        return Flow::kNormal;
      }
      case NodeKind::kCallBlock: {
        const Value caller = Value::callable(std::make_shared<CallerValue>(node, scope));
        const Expr& call = *node.expr;
        const Value callee = eval(*call.a, scope);
        CallArgs args = eval_arguments(call.arguments, scope);
        Value result;
        if (callee.is_callable() && dynamic_cast<const MacroValue*>(&callee.as_callable()) != nullptr) {
          args.keyword.emplace_back("caller", caller);
        }
        try {
          result = call_value(callee, std::move(args), call.a->kind == ExprKind::kName ? call.a->name : "callee");
        } catch (const EvalError& e) {
          throw TemplateError(e.kind(), call.location, e.what());
        }
        append(out, result.str());
        return Flow::kNormal;
      }
      case NodeKind::kFilterBlock: {
        std::string captured;
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        exec_body(node.body, inner, captured);
        Value v = Value::string(std::move(captured));
        for (const auto& filter : node.filters) {
          try {
            v = apply_filter(*this, filter->name, v, eval_arguments(filter->arguments, scope));
          } catch (const EvalError& e) {
            throw TemplateError(e.kind(), filter->location, e.what());
          }
        }
        append(out, v.str());
        return Flow::kNormal;
      }
      case NodeKind::kBreak: return Flow::kBreak;
      case NodeKind::kContinue: return Flow::kContinue;
      case NodeKind::kWith: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        for (const auto& [name, value] : node.assignments) inner->set(name, eval(*value, scope));
        return exec_body(node.body, inner, out);
      }
      case NodeKind::kGeneration: return exec_body(node.body, scope, out);
    }
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), node.location, e.what());
  } catch (const std::invalid_argument& e) {
    throw TemplateError(TemplateError::Kind::kRender, node.location, e.what());
  }
  return Flow::kNormal;
}

namespace {

// The `loop` variable of one iteration.
class CycleValue : public Callable {
 public:
  explicit CycleValue(std::size_t index) : index_(index) {}
  std::string_view name() const override { return "cycle"; }
  Value call(Renderer&, CallArgs args) const override {
    if (args.positional.empty()) throw EvalError("no items for cycling given");
    return args.positional[index_ % args.positional.size()];
  }

 private:
  std::size_t index_;
};

Value loop_object(const std::vector<Value>& items, std::size_t i) {
  const auto n = static_cast<std::int64_t>(items.size());
  const auto k = static_cast<std::int64_t>(i);
  Dict loop;
  loop.set("index", Value::integer(k + 1));
  loop.set("index0", Value::integer(k));
  loop.set("revindex", Value::integer(n - k));
  loop.set("revindex0", Value::integer(n - k - 1));
  loop.set("first", Value::boolean(k == 0));
  loop.set("last", Value::boolean(k == n - 1));
  loop.set("length", Value::integer(n));
  loop.set("depth", Value::integer(1));
  loop.set("depth0", Value::integer(0));
  loop.set("previtem", k > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
  loop.set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
  loop.set("cycle", Value::callable(std::make_shared<CycleValue>(i)));
  return Value::dict(std::move(loop));
}

void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& item) {
  if (targets.size() == 1) {
    scope.set(targets[0], item);
    return;
  }
  const std::vector<Value> parts = iterate(item);
  if (parts.size() != targets.size()) {
    throw EvalError(std::string(parts.size() < targets.size() ? "not enough" : "too many") +
                    " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                    std::to_string(parts.size()) + ")");
  }
  for (std::size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
}

}  // namespace

Renderer::Flow Renderer::exec_for(const Node& node, const ScopePtr& scope, std::string& out) {
  const Value iterable = eval(*node.expr, scope);
  std::vector<Value> items;
  try {
    items = iterate(iterable);
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), node.expr->location, e.what());
  }
  if (node.filter) {
    // Jinja filters before the loop starts, so loop.length and loop.last see only the kept items.
    std::vector<Value> kept;
    for (const auto& item : items) {
      count_iteration();
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      bind_targets(*probe, node.targets, item);
      if (eval(*node.filter, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  bool iterated = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    count_iteration();
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    inner->set("loop", loop_object(items, i));
    bind_targets(*inner, node.targets, items[i]);
    iterated = true;
    const Flow flow = exec_body(node.body, inner, out);
    if (flow == Flow::kBreak) break;
  }
  if (!iterated && !node.otherwise.empty()) {
    // The else block is outside the loop: a break or continue there belongs to an enclosing loop.
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    return exec_body(node.otherwise, inner, out);
  }
  return Flow::kNormal;
}

void Renderer::exec_set(const Node& node, const ScopePtr& scope) {
  if (!node.text.empty()) {
    // {% set ns.attribute = value %}
    const Value target = lookup(node.targets[0], scope);
    if (!target.is_namespace()) {
      throw EvalError("cannot assign attribute on non-namespace object '" + node.targets[0] + "'");
    }
    Value v = eval(*node.expr, scope);
    target.as_namespace().attributes.set(node.text, std::move(v));
    return;
  }
  Value v;
  if (node.expr) {
    v = eval(*node.expr, scope);
  } else {
    std::string captured;
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    exec_body(node.body, inner, captured);
    v = Value::string(std::move(captured));
    for (const auto& filter : node.filters) {
      try {
        v = apply_filter(*this, filter->name, v, eval_arguments(filter->arguments, scope));
      } catch (const EvalError& e) {
        throw TemplateError(e.kind(), filter->location, e.what());
      }
    }
  }
  bind_targets(*scope, node.targets, v);
}

// ---- expressions -----------------------------------------------------------------------------------------

Value Renderer::eval(const Expr& expr, const ScopePtr& scope) {
  try {
    return eval_inner(expr, scope);
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), expr.location, e.what());
  } catch (const std::invalid_argument& e) {
    throw TemplateError(TemplateError::Kind::kRender, expr.location, e.what());
  }
}

CallArgs Renderer::eval_arguments(const std::vector<Argument>& arguments, const ScopePtr& scope) {
  CallArgs args;
  for (const auto& argument : arguments) {
    if (argument.name.empty()) {
      args.positional.push_back(eval(*argument.value, scope));
    } else {
      args.keyword.emplace_back(argument.name, eval(*argument.value, scope));
    }
  }
  return args;
}

Value Renderer::eval_call(const Expr& expr, const ScopePtr& scope) {
  const Expr& callee = *expr.a;
  if (callee.kind == ExprKind::kAttribute) {
    // obj.method(...): dispatch str/dict/list methods directly instead of building a bound method.
    const Value object = eval(*callee.a, scope);
    CallArgs args = eval_arguments(expr.arguments, scope);
    Value result;
    if (call_method(*this, object, callee.name, args, result)) return result;
    const Value attribute = get_attribute(object, callee.name);
    if (attribute.is_undefined()) {
      if (object.is_undefined()) {
        const std::string name = object.undefined_name();
        throw EvalError("'" + (name.empty() ? std::string("value") : name) + "' is undefined");
      }
      throw EvalError("'" + std::string(object.type_name()) + " object' has no attribute '" + callee.name + "'");
    }
    return call_value(attribute, std::move(args), callee.name);
  }
  const Value fn = eval(callee, scope);
  return call_value(fn, eval_arguments(expr.arguments, scope), callee.kind == ExprKind::kName ? callee.name : "callee");
}

Value Renderer::eval_inner(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.literal;
    case ExprKind::kName: return lookup(expr.name, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.items.size());
      for (const auto& item : expr.items) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), expr.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (std::size_t i = 0; i + 1 < expr.items.size(); i += 2) {
        const Value key = eval(*expr.items[i], scope);
        if (!key.is_string())
          throw EvalError("dict keys must be strings in chat templates, got " + std::string(key.type_name()));
        d.set(key.as_string(), eval(*expr.items[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kAttribute: return get_attribute(eval(*expr.a, scope), expr.name);
    case ExprKind::kItem: return get_item(eval(*expr.a, scope), eval(*expr.b, scope));
    case ExprKind::kSlice: {
      const Value object = eval(*expr.items[0], scope);
      const Value start = expr.a ? eval(*expr.a, scope) : Value::none();
      const Value stop = expr.b ? eval(*expr.b, scope) : Value::none();
      const Value step = expr.c ? eval(*expr.c, scope) : Value::none();
      return slice(object, start, stop, step);
    }
    case ExprKind::kCall: return eval_call(expr, scope);
    case ExprKind::kFilter: {
      const Value operand = eval(*expr.a, scope);
      return apply_filter(*this, expr.name, operand, eval_arguments(expr.arguments, scope));
    }
    case ExprKind::kTest: {
      const Value operand = eval(*expr.a, scope);
      const bool result = apply_test(*this, expr.name, operand, eval_arguments(expr.arguments, scope));
      return Value::boolean(result != expr.negated);
    }
    case ExprKind::kNegate:
    case ExprKind::kPlus: {
      const Value v = eval(*expr.a, scope);
      if (!v.is_number()) {
        throw EvalError("bad operand type for unary " + std::string(expr.kind == ExprKind::kNegate ? "-" : "+") +
                        ": '" + std::string(v.type_name()) + "'");
      }
      if (expr.kind == ExprKind::kPlus) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == INT64_MIN) throw EvalError("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::kNot: return Value::boolean(!eval(*expr.a, scope).truthy());
    case ExprKind::kAnd: {
      Value left = eval(*expr.a, scope);
      return left.truthy() ? eval(*expr.b, scope) : left;
    }
    case ExprKind::kOr: {
      Value left = eval(*expr.a, scope);
      return left.truthy() ? left : eval(*expr.b, scope);
    }
    case ExprKind::kBinary: return binary_operation(*this, expr.name, eval(*expr.a, scope), eval(*expr.b, scope));
    case ExprKind::kCompare: {
      // Chained like Python: a < b < c means a < b and b < c, each operand evaluated once.
      Value left = eval(*expr.items[0], scope);
      for (std::size_t i = 0; i < expr.ops.size(); ++i) {
        Value right = eval(*expr.items[i + 1], scope);
        const std::string& op = expr.ops[i];
        bool ok;
        if (op == "==") {
          ok = equals(left, right);
        } else if (op == "!=") {
          ok = !equals(left, right);
        } else if (op == "in") {
          ok = contains(right, left);
        } else if (op == "not in") {
          ok = !contains(right, left);
        } else {
          const int c = compare(left, right);
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::kCondition:
      if (eval(*expr.b, scope).truthy()) return eval(*expr.a, scope);
      return expr.c ? eval(*expr.c, scope) : Value::undefined();
  }
  return Value::undefined();
}

}  // namespace engine::template_::detail
