#include "serverd/api/prompts.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"

namespace serverd::api {
namespace {

void truncate(std::vector<std::int32_t>& tokens, std::optional<std::int64_t> keep, const ModelInfo& model) {
  if (!keep) return;
  // vLLM keeps the end of the prompt; -1 means the whole context.
  const std::size_t limit = *keep < 0 ? model.max_model_len : static_cast<std::size_t>(*keep);
  if (tokens.size() > limit) tokens.erase(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(limit));
}

void check_not_empty(const std::vector<std::int32_t>& tokens, const char* param) {
  if (tokens.empty()) throw_bad_request("The decoder prompt cannot be empty", param);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view strip(std::string_view s, bool left, bool right) {
  while (left && !s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (right && !s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// continue_final_message as transformers does it: the rendered chat ends where the final message's content
// does, so the model continues that message instead of closing it.
std::string cut_after_final_message(std::string rendered, const std::optional<std::string>& content) {
  if (!content) {
    throw_bad_request("continue_final_message needs the final message to have text content", "messages");
  }
  const std::string_view stripped = strip(*content, true, true);
  const std::size_t at = rendered.rfind(stripped);
  if (stripped.empty() || at == std::string::npos) {
    throw_bad_request(
        "continue_final_message is set but the final message does not appear in the chat after applying the chat "
        "template",
        "messages");
  }
  // Keep the message's trailing spaces when the template kept them.
  const std::string_view left_stripped = strip(*content, true, false);
  const bool kept = std::string_view(rendered).substr(at, left_stripped.size()) == left_stripped;
  rendered.resize(at + (kept ? left_stripped.size() : stripped.size()));
  return rendered;
}

constexpr std::string_view kUntrustedTemplate =
    "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with "
    "untrusted chat template.";

// The server's default template kwargs with the request's over them, key by key (both JSON objects or empty).
std::string merged_kwargs(std::string_view defaults, std::string_view request) {
  if (defaults.empty()) return std::string(request);
  if (request.empty()) return std::string(defaults);
  rapidjson::Document merged;
  merged.Parse(defaults.data(), defaults.size());
  rapidjson::Document over;
  over.Parse(request.data(), request.size());
  if (!merged.IsObject() || !over.IsObject()) throw std::invalid_argument("chat template kwargs must be JSON objects");
  for (auto& member : over.GetObject()) {
    if (auto existing = merged.FindMember(member.name); existing != merged.MemberEnd()) {
      existing->value.CopyFrom(member.value, merged.GetAllocator());
    } else {
      merged.AddMember(rapidjson::Value(member.name, merged.GetAllocator()),
                       rapidjson::Value(member.value, merged.GetAllocator()), merged.GetAllocator());
    }
  }
  return to_json(merged);
}

}  // namespace

std::size_t vocab_size(const ModelInfo& model) {
  return model.vocab_size != 0 ? model.vocab_size : model.tokenizer->vocab_size();
}

std::vector<std::int32_t> prompt_tokens(const PromptInput& input, bool add_special_tokens,
                                        std::optional<std::int64_t> truncate_prompt_tokens, const ModelInfo& model,
                                        const std::string& field) {
  std::vector<std::int32_t> tokens;
  if (input.is_tokens) {
    const std::size_t vocab = vocab_size(model);
    for (const std::int32_t id : input.tokens) {
      if (static_cast<std::size_t>(id) >= vocab) {
        throw_bad_request("Token id " + std::to_string(id) + " is out of vocabulary", field);
      }
    }
    tokens = input.tokens;
  } else {
    tokens = model.tokenizer->encode(input.text, add_special_tokens);
  }
  truncate(tokens, truncate_prompt_tokens, model);
  check_not_empty(tokens, field.c_str());
  return tokens;
}

std::vector<PreparedPrompt> build_completion_prompts(const CompletionRequest& request, const ModelInfo& model) {
  const auto& c = request.common;
  std::vector<PreparedPrompt> prompts;
  prompts.reserve(request.prompts.size());
  for (const PromptInput& input : request.prompts) {
    PreparedPrompt prompt;
    prompt.tokens = prompt_tokens(input, c.add_special_tokens, c.truncate_prompt_tokens, model, "prompt");
    if (!input.is_tokens) {
      prompt.text = input.text;
    } else if (c.echo) {
      prompt.text = model.tokenizer->decode(input.tokens, c.skip_special_tokens);
    }
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

std::optional<ContentFormat> parse_content_format(std::string_view name) {
  if (name == "auto") return ContentFormat::kAuto;
  if (name == "string") return ContentFormat::kString;
  if (name == "openai") return ContentFormat::kOpenAi;
  return std::nullopt;
}

std::string response_role(const ChatSettings& settings, bool add_generation_prompt, const ChatMessages& messages) {
  return add_generation_prompt ? settings.response_role : messages.last_role;
}

PreparedPrompt build_chat_prompt(const ChatPromptInputs& inputs, const ModelInfo& model, const ChatSettings& settings) {
  std::optional<engine::template_::ChatTemplate> own;
  if (inputs.request_template != nullptr && *inputs.request_template) {
    if (!settings.trust_request_chat_template) throw_bad_request(std::string(kUntrustedTemplate), "chat_template");
    try {
      own = engine::template_::ChatTemplate::parse(**inputs.request_template);
    } catch (const engine::template_::TemplateError& e) {
      throw_bad_request(std::string("The request's chat_template cannot be used: ") + e.what(), "chat_template");
    }
  }
  const engine::template_::ChatTemplate* tmpl = own ? &*own : model.chat_template;
  if (tmpl == nullptr) {
    std::string message =
        "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template "
        "if the tokenizer does not define one.";
    if (!model.chat_template_error.empty()) message += " (" + model.chat_template_error + ")";
    throw_bad_request(std::move(message));
  }
  const bool as_parts = settings.content_format == ContentFormat::kOpenAi ||
                        (settings.content_format == ContentFormat::kAuto && tmpl->loops_over_message_content());
  const std::string kwargs = merged_kwargs(settings.default_kwargs_json, inputs.template_kwargs_json);
  const auto& config = model.tokenizer->config();
  engine::template_::ChatInputs chat;
  chat.messages_json = as_parts ? inputs.messages->openai_json : inputs.messages->json;
  chat.tools_json = inputs.tools_json;
  chat.add_generation_prompt = inputs.add_generation_prompt;
  chat.extra_kwargs_json = kwargs;
  chat.bos_token = config.bos_token.value_or("");
  chat.eos_token = config.eos_token.value_or("");
  PreparedPrompt prompt;
  try {
    prompt.text = engine::template_::render_chat(*tmpl, chat);
  } catch (const engine::template_::TemplateError& e) {
    throw_bad_request(e.kind() == engine::template_::TemplateError::Kind::kRaised ? e.message() : e.what());
  } catch (const std::invalid_argument& e) {
    throw_bad_request(e.what(), "messages");
  }
  if (inputs.continue_final_message) {
    prompt.text = cut_after_final_message(std::move(prompt.text), inputs.messages->last_content);
  }
  prompt.tokens = model.tokenizer->encode(prompt.text, inputs.add_special_tokens);
  truncate(prompt.tokens, inputs.truncate_prompt_tokens, model);
  check_not_empty(prompt.tokens, "messages");
  return prompt;
}

void check_prompt_fits(std::size_t prompt_tokens, const ModelInfo& model) {
  if (prompt_tokens >= model.max_model_len) {
    throw ApiException(ApiError{400,
                                "This model's maximum context length is " + std::to_string(model.max_model_len) +
                                    " tokens. However, your request has " + std::to_string(prompt_tokens) +
                                    " input tokens. Please reduce the length of the input messages.",
                                "input_tokens", std::nullopt});
  }
}

std::size_t resolve_max_tokens(std::optional<std::size_t> requested, std::optional<std::size_t> default_max_tokens,
                               std::size_t prompt_tokens, const ModelInfo& model) {
  const std::size_t context = model.max_model_len;
  check_prompt_fits(prompt_tokens, model);
  const std::optional<std::size_t> asked = requested ? requested : default_max_tokens;
  if (asked && prompt_tokens + *asked > context) {
    const std::string m = std::to_string(*asked);
    throw ApiException(ApiError{
        400,
        "'max_tokens' or 'max_completion_tokens' is too large: " + m + ". This model's maximum context length is " +
            std::to_string(context) + " tokens and your request has " + std::to_string(prompt_tokens) +
            " input tokens (" + m + " > " + std::to_string(context) + " - " + std::to_string(prompt_tokens) + ").",
        "max_tokens", std::nullopt});
  }
  std::size_t max_tokens = asked.value_or(context - prompt_tokens);
  if (model.defaults.max_tokens) max_tokens = std::min(max_tokens, *model.defaults.max_tokens);
  return max_tokens;
}

engine::sampling::SamplingParams build_sampling(const CommonFields& fields, int logprobs, const ModelInfo& model) {
  const auto& defaults = model.defaults;
  engine::sampling::SamplingParams p;
  p.temperature = fields.temperature.value_or(defaults.temperature.value_or(1.0f));
  p.top_p = fields.top_p.value_or(defaults.top_p.value_or(1.0f));
  p.top_k = fields.top_k.value_or(defaults.top_k.value_or(0));
  p.min_p = fields.min_p.value_or(defaults.min_p.value_or(0.0f));
  p.repetition_penalty = fields.repetition_penalty.value_or(defaults.repetition_penalty.value_or(1.0f));
  p.presence_penalty = fields.presence_penalty;
  p.frequency_penalty = fields.frequency_penalty;
  p.logit_bias = fields.logit_bias;
  p.seed = fields.seed;
  p.logprobs = logprobs;
  try {
    engine::sampling::validate(p, vocab_size(model));
  } catch (const engine::sampling::SamplingError& e) {
    // The sampler's messages start with the parameter's name.
    static constexpr std::array<std::string_view, 10> kParams = {
        "temperature",       "top_p",      "top_k",    "min_p", "repetition_penalty", "presence_penalty",
        "frequency_penalty", "logit_bias", "logprobs", "seed"};
    const std::string_view message = e.what();
    const std::string_view first = message.substr(0, message.find_first_of(" :"));
    const bool known = std::find(kParams.begin(), kParams.end(), first) != kParams.end();
    throw_bad_request(std::string(message), known ? std::optional<std::string>(first) : std::nullopt);
  }
  return p;
}

}  // namespace serverd::api
