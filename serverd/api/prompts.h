#pragma once

// From parsed requests to what the engine takes: token prompts (tokenized text, token ids checked against the
// vocabulary, chat messages through the model's template), the context-length checks with vLLM's wording,
// max_tokens as vLLM resolves it, and sampling parameters with the model's defaults, validated.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"
#include "serverd/api/generator.h"
#include "serverd/api/protocol.h"

namespace serverd::api {

struct PreparedPrompt {
  std::vector<std::int32_t> tokens;
  std::string text;  // the prompt as text (completions echo it)
};

// How message content reaches the template (--chat-template-content-format): auto decides by the template.
enum class ContentFormat { kAuto, kString, kOpenAi };
// "auto", "string", "openai"; nullopt otherwise.
std::optional<ContentFormat> parse_content_format(std::string_view name);

// The server's chat settings, from its flags.
struct ChatSettings {
  ContentFormat content_format = ContentFormat::kAuto;
  std::string default_kwargs_json;           // --default-chat-template-kwargs: a JSON object, or empty
  bool trust_request_chat_template = false;  // --trust-request-chat-template
  std::string response_role = "assistant";   // --response-role
};

struct ChatPromptInputs {
  const ChatMessages* messages = nullptr;
  std::string_view tools_json;
  std::string_view template_kwargs_json;
  const std::optional<std::string>* request_template = nullptr;  // the request's own template, if any
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = false;
  std::optional<std::int64_t> truncate_prompt_tokens;
};

// One prompt's tokens: its token ids checked against the vocabulary, or its text tokenized; then truncated
// (truncate_prompt_tokens). Throws ApiException (400, naming `field`) for an empty prompt or an id outside the
// vocabulary.
std::vector<std::int32_t> prompt_tokens(const PromptInput& input, bool add_special_tokens,
                                        std::optional<std::int64_t> truncate_prompt_tokens, const ModelInfo& model,
                                        const std::string& field);

// Throws ApiException (400) for empty prompts and token ids outside the vocabulary.
std::vector<PreparedPrompt> build_completion_prompts(const CompletionRequest& request, const ModelInfo& model);

// Renders the chat template (the request's when it has one and the server trusts it, else the model's) with
// the messages in its content format and the server's default kwargs under the request's, and tokenizes the
// result. Throws ApiException (400) for a request template the server does not trust or cannot parse, when
// the model has no template, when the template fails (its own raise_exception message included), or when the
// prompt is empty.
PreparedPrompt build_chat_prompt(const ChatPromptInputs& inputs, const ModelInfo& model, const ChatSettings& settings);

// The role a chat response carries: --response-role when the prompt ends with a generation prompt, else the
// role of the message being continued (vLLM's rule).
std::string response_role(const ChatSettings& settings, bool add_generation_prompt, const ChatMessages& messages);

// Throws ApiException (400, vLLM's message) when the prompt leaves no room in the context for a token.
void check_prompt_fits(std::size_t prompt_tokens, const ModelInfo& model);

// max_tokens for one prompt as vLLM resolves it: the request's value (or `default_max_tokens`, or the rest of
// the context when that is nullopt too), capped by the model's generation-config default. Throws
// ApiException (400) with vLLM's messages when the prompt fills the context or the request asks for more
// than the context leaves.
std::size_t resolve_max_tokens(std::optional<std::size_t> requested, std::optional<std::size_t> default_max_tokens,
                               std::size_t prompt_tokens, const ModelInfo& model);

// The request's sampling fields over the model's defaults over OpenAI's, checked with
// engine::sampling::validate (ApiException 400 naming the field).
engine::sampling::SamplingParams build_sampling(const CommonFields& fields, int logprobs, const ModelInfo& model);

// Number of logits per step (the model's vocabulary).
std::size_t vocab_size(const ModelInfo& model);

}  // namespace serverd::api
