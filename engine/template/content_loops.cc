// ChatTemplate::loops_over_message_content: how vLLM's --chat-template-content-format auto reads a template.
// A template that iterates over a message's content ({% for part in message['content'] %}, through filters,
// tests or slices) expects a list of parts; any other template expects a string.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/ast.h"
#include "engine/template/chat_template.h"
#include "engine/template/renderer.h"

namespace engine::template_ {
namespace {

using detail::Body;
using detail::Expr;
using detail::ExprKind;
using detail::Node;
using detail::NodeKind;

bool is_name(const Expr* e, std::string_view var) {
  return e != nullptr && e->kind == ExprKind::kName && e->name == var;
}

// Whether `e` reads `var` (or, with a key, var[key] / var.key), possibly behind filters, tests and slices.
bool reads(const Expr* e, std::string_view var, std::string_view key = {}) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::kFilter || e->kind == ExprKind::kTest) return reads(e->a.get(), var, key);
  if (e->kind == ExprKind::kSlice) return !e->items.empty() && reads(e->items.front().get(), var, key);
  if (key.empty()) return is_name(e, var);
  if (e->kind == ExprKind::kAttribute) return e->name == key && is_name(e->a.get(), var);
  if (e->kind == ExprKind::kItem) {
    return e->b != nullptr && e->b->kind == ExprKind::kLiteral && e->b->literal.is_string() &&
           e->b->literal.as_string() == key && is_name(e->a.get(), var);
  }
  return false;
}

void each_node(const Body& body, const std::function<void(const Node&)>& visit) {
  for (const auto& node : body) {
    visit(*node);
    for (const auto& branch : node->branches) each_node(branch.body, visit);
    each_node(node->body, visit);
    each_node(node->otherwise, visit);
  }
}

// The single name a loop binds, or empty for a loop over tuples.
std::string_view loop_name(const Node& node) {
  return node.kind == NodeKind::kFor && node.targets.size() == 1 ? std::string_view(node.targets[0])
                                                                 : std::string_view();
}

}  // namespace

bool ChatTemplate::loops_over_message_content() const {
  const Body& body = program_->body;
  // The message lists: `messages` and names set from it ({% set loop_messages = messages[1:] %}).
  std::vector<std::string> lists{"messages"};
  each_node(body, [&](const Node& node) {
    if (node.kind == NodeKind::kSet && node.text.empty() && node.targets.size() == 1 &&
        reads(node.expr.get(), "messages")) {
      lists.push_back(node.targets[0]);
    }
  });
  // The names a message is bound to ({% for message in messages %}).
  std::vector<std::string> messages;
  each_node(body, [&](const Node& node) {
    const auto name = loop_name(node);
    if (name.empty()) return;
    for (const auto& list : lists) {
      if (reads(node.expr.get(), list)) messages.emplace_back(name);
    }
  });
  bool found = false;
  each_node(body, [&](const Node& node) {
    if (loop_name(node).empty()) return;
    for (const auto& message : messages) found = found || reads(node.expr.get(), message, "content");
  });
  return found;
}

}  // namespace engine::template_
