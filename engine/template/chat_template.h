#pragma once

// A Jinja interpreter for chat templates: the template language as transformers renders it (Jinja2 with
// trim_blocks and lstrip_blocks, loop controls, the immutable sandbox, its tojson, raise_exception and
// strftime_now), checked byte for byte against @huggingface/jinja on generated conversations.
//
//   auto tmpl = ChatTemplate::parse(source);          // once per model; throws TemplateError
//   std::string prompt = render_chat(tmpl, inputs);   // per request; const, safe from many threads

#include <cstddef>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/template/error.h"
#include "engine/template/value.h"

namespace engine::template_ {

namespace detail {
struct Program;
}

// Bounds on what one template may cost, so a hostile template cannot hang or exhaust memory.
struct Limits {
  std::size_t max_output_bytes = 16u << 20;    // all text a render produces, captured blocks included
  std::size_t max_value_bytes = 16u << 20;     // any single string built while rendering
  std::size_t max_list_items = 1u << 20;       // any single list built while rendering (range(), +, *)
  std::size_t max_loop_iterations = 1u << 20;  // loop iterations over the whole render
  int max_call_depth = 64;                     // nested macro calls
  int max_nesting = 128;                       // statement and expression nesting in the source
};

struct TemplateOptions {
  bool trim_blocks = true;  // transformers' settings for chat templates
  bool lstrip_blocks = true;
  Limits limits;
};

struct RenderOptions {
  // Local time for strftime_now(); empty means the system clock in the local time zone.
  std::function<std::tm()> now;
};

class ChatTemplate {
 public:
  // Parses the template; throws TemplateError(kSyntax) naming the line and column.
  static ChatTemplate parse(std::string_view source, const TemplateOptions& options = {});

  // Renders with `context` (a dict) as the template's variables. Throws TemplateError.
  std::string render(const Value& context, const RenderOptions& options = {}) const;

  // Whether the template loops over a message's content ({% for part in message['content'] %}): what vLLM
  // takes, for --chat-template-content-format auto, as a template wanting content as a list of parts.
  bool loops_over_message_content() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const detail::Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const detail::Program> program_;
};

// A model's chat template as the prompt builders hold it: parsed once when the model loads, or the reason
// chat prompts cannot be built (the model has none, or it does not parse).
struct ModelChatTemplate {
  std::optional<ChatTemplate> parsed;
  std::string unusable_reason;  // empty when parsed

  // `source` is the checkpoint's template text (tokenizer_config.json or GGUF metadata), if any.
  static ModelChatTemplate from_source(const std::optional<std::string>& source);
  const ChatTemplate* get() const { return parsed ? &*parsed : nullptr; }
};

// What an OpenAI-style chat request hands to the template, as JSON text.
struct ChatInputs {
  std::string_view messages_json = "[]";  // array of message objects
  std::string_view tools_json;            // array of tool definitions; empty: no tools (None)
  bool add_generation_prompt = false;
  std::string_view extra_kwargs_json;  // object of extra template variables (enable_thinking, ...); may be empty
  std::string bos_token;
  std::string eos_token;
};

// The variables transformers' apply_chat_template passes: messages, tools (None when absent), documents
// (None), add_generation_prompt, bos_token, eos_token, then the extra kwargs (which may override them).
// Throws std::invalid_argument on malformed JSON.
Value chat_context(const ChatInputs& inputs);

inline std::string render_chat(const ChatTemplate& tmpl, const ChatInputs& inputs, const RenderOptions& options = {}) {
  return tmpl.render(chat_context(inputs), options);
}

}  // namespace engine::template_
