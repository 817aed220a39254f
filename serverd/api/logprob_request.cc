#include "serverd/api/logprob_request.h"

#include <string>

#include "serverd/api/api_error.h"
#include "serverd/api/prompts.h"

namespace serverd::api {
namespace {

enum class Kind { kSampled, kPrompt };

// vLLM's engine-side check: -1 is the vocabulary, and a count that asks for something (not 0) must fit
// --max-logprobs, itself the vocabulary when -1.
std::size_t checked_count(std::int64_t requested, Kind kind, const LogprobLimits& limits, const ModelInfo& model) {
  const auto vocab = static_cast<std::int64_t>(vocab_size(model));
  const std::int64_t count = requested == -1 ? vocab : requested;
  const std::int64_t allowed = limits.max_logprobs == -1 ? vocab : limits.max_logprobs;
  if (count != 0 && count > allowed) {
    const bool sampled = kind == Kind::kSampled;
    throw_bad_request(std::string("Requested ") + (sampled ? "sample" : "prompt") + " logprobs of " +
                          std::to_string(count) + ", which is greater than max allowed: " + std::to_string(allowed),
                      sampled ? "logprobs" : "prompt_logprobs");
  }
  return static_cast<std::size_t>(count);
}

bool tokens_as_ids(const CommonFields& fields, const LogprobLimits& limits) {
  return fields.return_tokens_as_token_ids.value_or(limits.return_tokens_as_token_ids);
}

}  // namespace

LogprobPlan plan_completion_logprobs(const CompletionRequest& request, const LogprobLimits& limits,
                                     const ModelInfo& model) {
  const CommonFields& c = request.common;
  LogprobPlan plan;
  plan.tokens_as_ids = tokens_as_ids(c, limits);
  if (request.logprobs) plan.sampled = checked_count(*request.logprobs, Kind::kSampled, limits, model);
  // echo asks for the prompt's log-probabilities as many as the generated tokens'.
  const std::optional<std::int64_t> prompt = c.prompt_logprobs ? c.prompt_logprobs
                                             : c.echo          ? request.logprobs
                                                               : std::nullopt;
  if (!prompt) return plan;
  const std::size_t count = checked_count(*prompt, Kind::kPrompt, limits, model);
  plan.prompt_field = !c.stream;
  plan.echo_prompt = c.echo && request.logprobs.has_value();
  if (plan.prompt_field || plan.echo_prompt) plan.prompt = count;
  return plan;
}

LogprobPlan plan_chat_logprobs(const ChatRequest& request, const LogprobLimits& limits, const ModelInfo& model) {
  const CommonFields& c = request.common;
  LogprobPlan plan;
  plan.tokens_as_ids = tokens_as_ids(c, limits);
  if (request.logprobs) plan.sampled = checked_count(request.top_logprobs, Kind::kSampled, limits, model);
  // Chat's echo takes top_logprobs for the prompt, whether or not logprobs is set.
  const std::optional<std::int64_t> prompt = c.prompt_logprobs ? c.prompt_logprobs
                                             : c.echo          ? std::optional(request.top_logprobs)
                                                               : std::nullopt;
  if (!prompt) return plan;
  const std::size_t count = checked_count(*prompt, Kind::kPrompt, limits, model);
  // A chat stream has no place for them.
  plan.prompt_field = !c.stream;
  if (plan.prompt_field) plan.prompt = count;
  return plan;
}

}  // namespace serverd::api
