#include "serverd/api/endpoints.h"

#include <algorithm>
#include <iterator>

namespace serverd::api {
namespace {

// vLLM keeps no responses unless VLLM_ENABLE_RESPONSES_API_STORE is set; serverd has no store at all.
constexpr std::string_view kStoredResponsesRefusal =
    "serverd stores no responses (as vLLM without VLLM_ENABLE_RESPONSES_API_STORE), so there is no response to "
    "retrieve or cancel; POST /v1/responses answers each request whole or streamed.";
constexpr std::string_view kPoolingRefusal =
    "serverd serves text generation and embeddings: vLLM's other pooling endpoints (/pooling, /classify, /score, "
    "/rerank) are not implemented; use POST /v1/embeddings (--runner pooling) or /v1/completions.";
constexpr std::string_view kSpeechToTextRefusal =
    "serverd has no speech-to-text models: /v1/audio/transcriptions and /v1/audio/translations are not "
    "implemented.";
constexpr std::string_view kImagesRefusal =
    "Image generation (/v1/images/*) is not an endpoint of vLLM's server, nor of serverd, which serves text "
    "generation.";

constexpr Route kRoutes[] = {
    {"/health", "GET", Endpoint::kHealth, 0, {}},
    {"/ping", "GET, POST", Endpoint::kPing, 0, {}},
    {"/load", "GET", Endpoint::kLoad, 0, {}},
    {"/metrics", "GET", Endpoint::kMetrics, 0, {}},
    {"/version", "GET", Endpoint::kVersion, 0, {}},
    {"/v1/models", "GET", Endpoint::kModels, 0, {}},
    {"/v1/completions", "POST", Endpoint::kCompletions, 0, {}},
    {"/v1/chat/completions", "POST", Endpoint::kChatCompletions, 0, {}},
    {"/tokenize", "POST", Endpoint::kTokenize, 0, {}},
    {"/detokenize", "POST", Endpoint::kDetokenize, 0, {}},
    {"/invocations", "POST", Endpoint::kInvocations, 0, {}},
    {"/v1/models/{model:path}", "", Endpoint::kRefused, 404,
     "GET /v1/models/{model} is not an endpoint of vLLM's server, nor of serverd; GET /v1/models lists the "
     "served model."},
    {"/v1/responses", "POST", Endpoint::kResponses, 0, {}},
    {"/v1/responses/{response_id}", "", Endpoint::kRefused, 404, kStoredResponsesRefusal},
    {"/v1/responses/{response_id}/cancel", "", Endpoint::kRefused, 404, kStoredResponsesRefusal},
    {"/v1/embeddings", "POST", Endpoint::kEmbeddings, 0, {}},
    {"/pooling", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/classify", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/score", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/v1/score", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/rerank", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/v1/rerank", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/v2/rerank", "", Endpoint::kRefused, 501, kPoolingRefusal},
    {"/v1/audio/transcriptions", "", Endpoint::kRefused, 501, kSpeechToTextRefusal},
    {"/v1/audio/translations", "", Endpoint::kRefused, 501, kSpeechToTextRefusal},
    {"/v1/audio/speech", "", Endpoint::kRefused, 404,
     "Text-to-speech (/v1/audio/speech) is not an endpoint of vLLM's server, nor of serverd."},
    {"/v1/images/generations", "", Endpoint::kRefused, 404, kImagesRefusal},
    {"/v1/images/edits", "", Endpoint::kRefused, 404, kImagesRefusal},
    {"/v1/images/variations", "", Endpoint::kRefused, 404, kImagesRefusal},
};

// A pattern's literal parts must match exactly; a parameter takes one non-empty segment, or with ":path"
// the non-empty rest.
bool matches(std::string_view pattern, std::string_view path) {
  for (;;) {
    const auto open = pattern.find('{');
    if (open == std::string_view::npos) return pattern == path;
    if (path.substr(0, open) != pattern.substr(0, open)) return false;
    pattern.remove_prefix(open);
    path.remove_prefix(open);
    const auto close = pattern.find('}');
    const bool rest = pattern.substr(0, close).ends_with(":path");
    pattern.remove_prefix(close + 1);
    const std::size_t taken = rest ? path.size() : std::min(path.find('/'), path.size());
    if (taken == 0) return false;
    path.remove_prefix(taken);
  }
}

}  // namespace

const Route* find_route(std::string_view path) {
  const auto* found =
      std::find_if(std::begin(kRoutes), std::end(kRoutes), [&](const Route& r) { return matches(r.path, path); });
  return found == std::end(kRoutes) ? nullptr : found;
}

bool allows(const Route& route, std::string_view method) {
  if (route.endpoint == Endpoint::kRefused) return true;
  std::string_view rest = route.allow;
  while (!rest.empty()) {
    const auto comma = rest.find(", ");
    if (rest.substr(0, comma) == method) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return false;
}

}  // namespace serverd::api
