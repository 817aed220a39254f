#pragma once

// Pieces of OpenAI's response bodies, in vLLM's shapes: usage, stop_reason, and the two log-probability
// formats (completions: text_offset / token_logprobs / tokens / top_logprobs; chat: content entries with
// token, logprob, bytes and top_logprobs).

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/choice_output.h"
#include "serverd/api/json_io.h"
#include "serverd/parsers/choice_parser.h"

namespace serverd::api {

// vLLM floors log-probabilities at this value (so -inf never reaches JSON).
inline constexpr double kMinLogprob = -9999.0;

// `reasoning_tokens` (a reasoning parser is on) adds completion_tokens_details, as vLLM does.
void write_usage(JsonWriter& w, std::size_t prompt_tokens, std::size_t completion_tokens,
                 std::optional<std::size_t> reasoning_tokens = std::nullopt);
// A whole chat response's message: role, content, refusal, tool_calls and reasoning, in vLLM's order.
void write_message(JsonWriter& w, const parsers::ChoiceResult& message);
// A parsed stream chunk's delta: content, reasoning and tool_calls, each only when it has something (vLLM
// leaves unset fields out of chunks).
void write_delta(JsonWriter& w, const parsers::ChoiceDelta& delta);
void write_stop_reason(JsonWriter& w, const StopReason& reason);

// The completions "logprobs" object for `records`. `text_offset` is where the first token's text starts; it
// is advanced past the last one (so a stream continues the count).
void write_completion_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                               std::span<const LogprobRecord> records, int top_logprobs, std::size_t& text_offset);

// The chat "logprobs" object ({"content": [...]}) for `records`.
void write_chat_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                         std::span<const LogprobRecord> records, int top_logprobs);

// One server-sent event carrying `json`.
std::string sse_event(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace serverd::api
