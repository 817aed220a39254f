#pragma once

// The interpreter: evaluates a parsed template against a context. One Renderer per render call.

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/ast.h"
#include "engine/template/chat_template.h"

namespace engine::template_::detail {

struct Program {
  Body body;
  Limits limits;
};

// Thrown by builtins; the evaluator adds the location of the expression that failed.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message, TemplateError::Kind kind = TemplateError::Kind::kRender)
      : std::runtime_error(message), kind_(kind) {}
  TemplateError::Kind kind() const { return kind_; }

 private:
  TemplateError::Kind kind_;
};

// Variables visible at one point of the template. Loop iterations, macro calls and with-blocks get a child
// scope; `set` writes into the innermost one, as in Jinja.
struct Scope {
  std::shared_ptr<Scope> parent;
  const Dict* context = nullptr;  // the render's variables, at the root only
  std::vector<std::pair<std::string, Value>> variables;

  const Value* find_local(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class MacroValue;

class Renderer {
 public:
  Renderer(const Program& program, const RenderOptions& options);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const Value& context);

  // Services for builtins and macros.
  const Limits& limits() const { return program_.limits; }
  const RenderOptions& options() const { return options_; }
  void count_iteration();
  void check_string(std::size_t bytes) const;
  void check_list(std::size_t items) const;
  Value make_namespace(Dict attributes);
  Value call_value(const Value& callee, CallArgs args, std::string_view what);
  // Runs a macro-like body (macro, call-block caller) in a new scope below `closure`.
  Value invoke_macro(const Node& node, const ScopePtr& closure, CallArgs args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Node& node, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Node& node, const ScopePtr& scope, std::string& out);
  void exec_set(const Node& node, const ScopePtr& scope);
  void append(std::string& out, std::string_view text);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_inner(const Expr& expr, const ScopePtr& scope);
  Value eval_call(const Expr& expr, const ScopePtr& scope);
  CallArgs eval_arguments(const std::vector<Argument>& arguments, const ScopePtr& scope);
  Value lookup(std::string_view name, const ScopePtr& scope) const;

  const Program& program_;
  const RenderOptions& options_;
  std::size_t produced_ = 0;
  std::size_t iterations_ = 0;
  int call_depth_ = 0;
  // Namespaces and macros can end up referring to themselves (a namespace stored in its own attribute, a
  // macro closing over the scope that holds it); the renderer breaks those cycles when it finishes.
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
  std::vector<std::shared_ptr<MacroValue>> macros_;
};

// Builtins (builtins/).
Value apply_filter(Renderer& renderer, std::string_view name, const Value& operand, CallArgs args);
bool apply_test(Renderer& renderer, std::string_view name, const Value& operand, CallArgs args);
bool has_filter(std::string_view name);
bool has_test(std::string_view name);
// Calls a method of a str, dict or list; returns false when the type has no such method.
bool call_method(Renderer& renderer, const Value& object, std::string_view name, CallArgs& args, Value& result);
// Jinja's getattr (methods and dict keys) and getitem; both give undefined when there is nothing there.
Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The iteration Jinja does in for loops and filters: list items, dict keys, string characters.
std::vector<Value> iterate(const Value& value);
// Global functions (range, namespace, dict, raise_exception, strftime_now, ...); undefined when unknown.
Value global_function(std::string_view name);
// Binary operators + - * / // % ** ~ with Python semantics.
Value binary_operation(Renderer& renderer, std::string_view op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

}  // namespace engine::template_::detail
