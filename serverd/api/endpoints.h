#pragma once

// The endpoints of vLLM's OpenAI server as serverd answers them: those it serves, and those it refuses by
// name with a status and a sentence (404 where vLLM has no such endpoint either, 501 where vLLM has one
// that serverd does not implement). A path in neither is an ordinary 404.

#include <string_view>

namespace serverd::api {

enum class Endpoint {
  kHealth,
  kPing,
  kLoad,
  kMetrics,
  kVersion,
  kModels,
  kCompletions,
  kChatCompletions,
  kResponses,
  kEmbeddings,
  kTokenize,
  kDetokenize,
  kInvocations,
  kRefused,
};

struct Route {
  // vLLM's route template: a "{name}" segment matches one segment, a last "{name:path}" the rest.
  std::string_view path;
  std::string_view allow;  // the methods served, as an Allow header lists them; empty for kRefused (any)
  Endpoint endpoint;
  int status = 0;            // kRefused: 404 or 501
  std::string_view message;  // kRefused: why, and what to use instead
};

// The route `path` (without its query) falls under; nullptr when none does.
const Route* find_route(std::string_view path);

// Whether the route serves `method`.
bool allows(const Route& route, std::string_view method);

}  // namespace serverd::api
