#pragma once

// POST /v1/embeddings as vLLM's pooling runner answers it: one sequence per input submitted to the Generator
// as a pooling request, the embeddings collected as their sequences finish, and one response with all of
// them (OpenAI's shape: floats, or base64 of little-endian float32 bytes) once the last is in. A client that
// goes away cancels every sequence of the request.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serverd/api/generation_session.h"
#include "serverd/api/generator.h"
#include "serverd/api/protocol.h"
#include "serverd/http/http_server.h"

namespace serverd::api {

// The pooling one request asks for: the model's pooling, `dimensions` checked against the model's matryoshka
// lengths (vLLM's messages), `normalize` overriding the model's. Throws ApiException (400).
PoolingRequest plan_pooling(const EmbeddingRequest& request, const ModelInfo& model);

// The response body: data[i] is embeddings[i] (as floats, or base64 of their little-endian float32 bytes),
// usage counts the prompt tokens.
std::string embedding_response_json(const std::string& id, std::int64_t created, const std::string& model,
                                    const std::vector<std::vector<float>>& embeddings, bool base64,
                                    std::size_t prompt_tokens);

struct EmbeddingSettings {
  std::string id;  // "embd-<request id>"
  std::int64_t created = 0;
  std::string model_name;
  bool base64 = false;
  std::size_t prompt_tokens = 0;      // of every input
  std::vector<http::Header> headers;  // sent with the response (X-Request-Id)
};

class EmbeddingSession : public std::enable_shared_from_this<EmbeddingSession> {
 public:
  EmbeddingSession(EmbeddingSettings settings, std::shared_ptr<ServiceCounters> counters,
                   std::shared_ptr<http::Exchange> exchange, Generator& generator);
  ~EmbeddingSession();

  // Submits one pooling sequence per request. Throws ApiException 503 when the generator is overloaded
  // (whatever was submitted is cancelled).
  void start(std::vector<GenerationRequest> requests);

  // From the sinks (any thread): input `index` pooled, or its sequence ended.
  void pooled(std::size_t index, std::vector<float> embedding);
  void finished(std::size_t index, FinishReason reason);

 private:
  void cancel_locked();
  void respond_locked();

  const EmbeddingSettings settings_;
  const std::shared_ptr<ServiceCounters> counters_;
  const std::shared_ptr<http::Exchange> exchange_;
  Generator& generator_;
  std::mutex mutex_;  // guards what follows
  std::vector<std::optional<std::uint64_t>> handles_;
  std::vector<std::vector<float>> embeddings_;
  std::vector<bool> done_;
  std::size_t finished_ = 0;
  bool failed_ = false;     // a sequence ended without its embedding
  bool cancelled_ = false;  // the client went away, or submitting failed
  bool responded_ = false;
};

}  // namespace serverd::api
