#pragma once

// What a completions or chat request asks of log-probabilities, resolved as vLLM resolves it: counts of -1
// mean the whole vocabulary, every count is checked against the server's --max-logprobs (-1: no cap) with
// vLLM's messages, prompt_logprobs defaults to the sampled count when echo is set, and what the response
// shows decides what the engine computes.

#include <cstddef>
#include <optional>

#include "serverd/api/generator.h"
#include "serverd/api/protocol.h"

namespace serverd::api {

// The server's side (vLLM's --max-logprobs and --return-tokens-as-token-ids).
struct LogprobLimits {
  int max_logprobs = 20;  // -1: no cap (the vocabulary)
  bool return_tokens_as_token_ids = false;
};

struct LogprobPlan {
  std::optional<std::size_t> sampled;  // top log-probabilities per generated token; nullopt: none
  // Per prompt token (vLLM's prompt_logprobs), when the response shows them; the engine computes them then.
  std::optional<std::size_t> prompt;
  bool prompt_field = false;   // the response's "prompt_logprobs" list carries them (never when streamed)
  bool echo_prompt = false;    // completions with echo and logprobs: the legacy logprobs start with the prompt's
  bool tokens_as_ids = false;  // tokens written "token_id:ID" (return_tokens_as_token_ids)
};

// Throws ApiException (400, naming "logprobs" or "prompt_logprobs") for a count past --max-logprobs.
LogprobPlan plan_completion_logprobs(const CompletionRequest& request, const LogprobLimits& limits,
                                     const ModelInfo& model);
LogprobPlan plan_chat_logprobs(const ChatRequest& request, const LogprobLimits& limits, const ModelInfo& model);

}  // namespace serverd::api
