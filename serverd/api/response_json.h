#pragma once

// Pieces of OpenAI's response bodies, in vLLM's shapes: usage, stop_reason, the two log-probability
// formats (completions: text_offset / token_logprobs / tokens / top_logprobs; chat: content entries with
// token, logprob, bytes and top_logprobs) and vLLM's prompt_logprobs list. With `tokens_as_ids`
// (return_tokens_as_token_ids) the two formats write each token as "token_id:ID" instead of its text.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/choice_output.h"
#include "serverd/api/json_io.h"
#include "serverd/parsers/choice_parser.h"

namespace serverd::api {

// vLLM floors log-probabilities at this value (so -inf never reaches JSON).
inline constexpr double kMinLogprob = -9999.0;

// `cached_tokens`: prompt tokens the prefix cache served, written as prompt_tokens_details when given and
// not zero (vLLM's --enable-prompt-tokens-details); otherwise prompt_tokens_details is null.
// `reasoning_tokens` (a reasoning parser is on) adds completion_tokens_details, as vLLM does.
void write_usage(JsonWriter& w, std::size_t prompt_tokens, std::size_t completion_tokens,
                 std::optional<std::size_t> cached_tokens = std::nullopt,
                 std::optional<std::size_t> reasoning_tokens = std::nullopt);
// A whole chat response's message: role, content, refusal, tool_calls and reasoning, in vLLM's order.
void write_message(JsonWriter& w, std::string_view role, const parsers::ChoiceResult& message);
// A parsed stream chunk's delta: content, reasoning and tool_calls, each only when it has something (vLLM
// leaves unset fields out of chunks).
void write_delta(JsonWriter& w, const parsers::ChoiceDelta& delta);
void write_stop_reason(JsonWriter& w, const StopReason& reason);

// The completions "logprobs" object for `records`. `text_offset` is where the first token's text starts; it
// is advanced past the last one (so a stream continues the count).
void write_completion_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                               std::span<const LogprobRecord> records, std::size_t top_logprobs,
                               std::size_t& text_offset, bool tokens_as_ids);

// The chat "logprobs" object ({"content": [...]}) for `records`.
void write_chat_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                         std::span<const LogprobRecord> records, std::size_t top_logprobs, bool tokens_as_ids);

// vLLM's "prompt_logprobs": null for the first prompt token, then per token (entries[i] is prompt token
// i + 1) an object from token id to {"logprob", "rank", "decoded_token"}: the prompt token first, then the
// most likely ones. decoded_token is always the text, whatever return_tokens_as_token_ids says (as in vLLM).
void write_prompt_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                           std::span<const PromptLogprob> entries);

// `entries` (prompt tokens 1, 2, ...) as records for write_completion_logprobs, after the unscored first token.
std::vector<LogprobRecord> prompt_records(std::int32_t first_token, std::span<const PromptLogprob> entries);

// One server-sent event carrying `json`.
std::string sse_event(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace serverd::api
