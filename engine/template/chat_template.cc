#include "engine/template/chat_template.h"

#include <stdexcept>

#include "engine/template/parser.h"
#include "engine/template/renderer.h"

namespace engine::template_ {

namespace {

std::string describe(TemplateError::Kind kind, const Location& where, const std::string& message) {
  std::string prefix = kind == TemplateError::Kind::kRaised   ? "chat template raised an exception"
                       : kind == TemplateError::Kind::kSyntax ? "chat template syntax error"
                       : kind == TemplateError::Kind::kLimit  ? "chat template exceeded a limit"
                                                              : "chat template error";
  if (where.line > 0) {
    prefix += " at line " + std::to_string(where.line) + ", column " + std::to_string(where.column);
  }
  return prefix + ": " + message;
}

}  // namespace

TemplateError::TemplateError(Kind kind, Location where, std::string message)
    : std::runtime_error(describe(kind, where, message)), kind_(kind), location_(where), message_(std::move(message)) {}

ChatTemplate ChatTemplate::parse(std::string_view source, const TemplateOptions& options) {
  auto program = std::make_shared<detail::Program>();
  program->limits = options.limits;
  program->body = detail::parse(source, detail::LexerOptions{options.trim_blocks, options.lstrip_blocks},
                                options.limits.max_nesting);
  return ChatTemplate(std::move(program));
}

ModelChatTemplate ModelChatTemplate::from_source(const std::optional<std::string>& source) {
  ModelChatTemplate out;
  if (!source) {
    out.unusable_reason = "the model has no chat template (tokenizer_config.json or GGUF metadata)";
    return out;
  }
  try {
    out.parsed = ChatTemplate::parse(*source);
  } catch (const std::exception& e) {
    out.unusable_reason = std::string("the model's chat template cannot be used: ") + e.what();
  }
  return out;
}

std::string ChatTemplate::render(const Value& context, const RenderOptions& options) const {
  if (!context.is_dict() && !context.is_undefined()) {
    throw std::invalid_argument("the render context must be a dict of variables");
  }
  detail::Renderer renderer(*program_, options);
  try {
    return renderer.render(context);
  } catch (const detail::EvalError& e) {
    // Errors always carry a location by the time they leave a statement; this is a safety net.
    throw TemplateError(e.kind(), Location{}, e.what());
  } catch (const std::invalid_argument& e) {
    throw TemplateError(TemplateError::Kind::kRender, Location{}, e.what());
  }
}

Value chat_context(const ChatInputs& inputs) {
  Dict context;
  const Value messages = Value::parse_json(inputs.messages_json, "messages");
  if (!messages.is_list()) throw std::invalid_argument("messages must be a JSON array");
  context.set("messages", messages);
  if (inputs.tools_json.empty()) {
    context.set("tools", Value::none());
  } else {
    const Value tools = Value::parse_json(inputs.tools_json, "tools");
    if (!tools.is_list() && !tools.is_none()) throw std::invalid_argument("tools must be a JSON array or null");
    context.set("tools", tools);
  }
  context.set("documents", Value::none());
  context.set("add_generation_prompt", Value::boolean(inputs.add_generation_prompt));
  context.set("bos_token", Value::string(inputs.bos_token));
  context.set("eos_token", Value::string(inputs.eos_token));
  if (!inputs.extra_kwargs_json.empty()) {
    const Value extra = Value::parse_json(inputs.extra_kwargs_json, "chat template kwargs");
    if (!extra.is_dict()) throw std::invalid_argument("chat template kwargs must be a JSON object");
    for (const auto& [key, value] : extra.as_dict().entries()) context.set(key, value);
  }
  return Value::dict(std::move(context));
}

}  // namespace engine::template_
