#pragma once

// The request bodies of the OpenAI API as vLLM accepts them, parsed into plain structs. Parsing checks
// types and what can be checked without the model (ranges that need the vocabulary or the context length
// are checked when the prompt is built); every refusal is an ApiException naming the field. Unknown fields
// are ignored; known ones this server cannot honour are refused by name.

#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "serverd/api/structured_output_request.h"

namespace serverd::api {

struct ParseLimits {
  std::size_t max_n = 128;            // choices per prompt
  std::size_t max_prompts = 1024;     // prompts in one completions request
  std::size_t max_stop_strings = 64;  // bounds the per-token stop string search
  std::size_t max_stop_string_bytes = 1024;
};

// What both completion endpoints share.
struct CommonFields {
  std::optional<std::string> model;
  std::size_t n = 1;
  std::optional<std::size_t> max_tokens;  // as requested (max_completion_tokens wins for chat)
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats: usage in every chunk
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<std::uint64_t> seed;  // a negative seed keeps its bits
  std::vector<std::string> stop;
  std::vector<std::int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::size_t min_tokens = 0;
  bool skip_special_tokens = true;
  std::vector<std::pair<std::int32_t, float>> logit_bias;
  std::optional<std::int64_t> truncate_prompt_tokens;  // -1: the context length
  bool add_special_tokens = true;
  bool echo = false;
  std::optional<std::int64_t> prompt_logprobs;     // vLLM's prompt_logprobs; -1: the whole vocabulary
  std::optional<bool> return_tokens_as_token_ids;  // nullopt: the server's --return-tokens-as-token-ids
  // response_format, structured_outputs or guided_*: what the output must match (structured_output_request.h).
  std::optional<StructuredOutputRequest> structured_output;
};

struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<std::int32_t> tokens;
};

struct CompletionRequest {
  CommonFields common;
  std::vector<PromptInput> prompts;
  // Top log-probabilities per token; 0: the chosen token's only; -1: the whole vocabulary. Checked against
  // --max-logprobs with the vocabulary (resolve_logprobs).
  std::optional<std::int64_t> logprobs;
};

// Chat messages as the template receives them, in both of vLLM's content formats (which one a template gets
// is decided once the template is known): every message has a "content", null or absent content reads as
// empty, and the role "developer" reads as "system" (OpenAI's meaning; the templates serverd runs know no
// developer role). Content is text only.
struct ChatMessages {
  std::string json;         // content as a string: text parts joined by newlines
  std::string openai_json;  // content as a list of {"type": "text", "text": ...} parts (a tool's stays a string)
  std::string last_role;
  std::optional<std::string> last_content;  // the final message's text; nullopt when it had none
};

// The request's tool_choice. "required" and a named function constrain the output (structured outputs) to
// the calls' JSON: an array of calls, or the named function's parameters.
enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ChatRequest {
  CommonFields common;
  ChatMessages messages;
  std::string tools_json;                      // empty: no tools
  ToolChoice tool_choice = ToolChoice::kNone;  // "auto" when tools are given without a tool_choice
  std::string tool_choice_name;                // kNamed: the function's name
  bool parallel_tool_calls = true;
  bool include_reasoning = true;        // vLLM's include_reasoning: false leaves the reasoning out of the reply
  std::string template_kwargs_json;     // empty: none
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking, for the reasoning parser
  // The request's own template ("chat_template", or chat_template_kwargs' "chat_template"), which the
  // server renders only with --trust-request-chat-template.
  std::optional<std::string> chat_template;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool logprobs = false;
  std::int64_t top_logprobs = 0;  // -1: the whole vocabulary
};

// POST /tokenize: a prompt, or messages through the chat template.
struct TokenizeRequest {
  std::optional<std::string> model;
  bool chat = false;
  std::string prompt;
  ChatMessages messages;
  std::string tools_json;
  std::string template_kwargs_json;
  std::optional<std::string> chat_template;  // as ChatRequest's
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = true;
  bool return_token_strs = false;
};

// POST /v1/embeddings: one embedding per input.
struct EmbeddingRequest {
  std::optional<std::string> model;
  std::vector<PromptInput> inputs;
  bool base64 = false;                     // encoding_format "base64": little-endian float32 bytes
  std::optional<std::int64_t> dimensions;  // checked against the model when the request is served
  std::optional<std::int64_t> truncate_prompt_tokens;
  bool add_special_tokens = true;
  std::optional<bool> normalize;  // vLLM's override of the model's normalisation
};

struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<std::int32_t> tokens;
};

CompletionRequest parse_completion_request(const rapidjson::Value& body, const ParseLimits& limits);
ChatRequest parse_chat_request(const rapidjson::Value& body, const ParseLimits& limits);
TokenizeRequest parse_tokenize_request(const rapidjson::Value& body);
EmbeddingRequest parse_embedding_request(const rapidjson::Value& body, const ParseLimits& limits);
DetokenizeRequest parse_detokenize_request(const rapidjson::Value& body);

}  // namespace serverd::api
