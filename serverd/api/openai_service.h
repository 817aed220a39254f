#pragma once

// The OpenAI-compatible API as vLLM serves it, over the HTTP server's exchanges:
//   POST /v1/completions, POST /v1/chat/completions, POST /v1/responses, GET /v1/models, POST /v1/embeddings
//   (a pooling model serves this one and refuses the generating three, as vLLM's pooling runner does)
//   (--api-key checked on /v1/*)
//   GET /health, GET|POST /ping, GET /load, GET /metrics, GET /version, POST /tokenize, POST /detokenize,
//   POST /invocations (completions or chat completions, by the body's shape)
// and vLLM's other endpoints refused by name (endpoints.h). Every response carries X-Request-Id (the
// client's, or a fresh one). Until serve() is called, /health answers 503 {"status": "<phase>"} and the
// model endpoints 503; after begin_drain(), /health and new generations answer 503 while requests in
// flight finish. Requests are recorded in vLLM's HTTP series (http_metrics.h).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/splitmix64.h"
#include "serverd/api/chat_parsing.h"
#include "serverd/api/embeddings.h"
#include "serverd/api/endpoints.h"
#include "serverd/api/generation_session.h"
#include "serverd/api/generator.h"
#include "serverd/api/http_metrics.h"
#include "serverd/api/logprob_request.h"
#include "serverd/api/metrics.h"
#include "serverd/api/prompts.h"
#include "serverd/api/protocol.h"
#include "serverd/api/responses_api.h"
#include "serverd/http/http_server.h"

namespace serverd::api {

struct ApiOptions {
  std::vector<std::string> api_keys;  // empty: no authentication; else any one of them opens /v1/*
  std::string version = "0.0.0";
  ParseLimits limits;
  ChatSettings chat;
  std::optional<std::uint64_t> seed;   // --seed: requests without one get seeds from this stream
  bool force_include_usage = false;    // --enable-force-include-usage
  bool prompt_tokens_details = false;  // --enable-prompt-tokens-details
  // --enable-log-requests: receives one line per request (unset: nothing is logged).
  std::function<void(const std::string&)> request_log;
  LogprobLimits logprobs;                    // --max-logprobs, --return-tokens-as-token-ids
  std::size_t max_active_sequences = 16384;  // sequences in flight beyond which requests get 503
  int retry_after_seconds = 1;
  ChatParserOptions parsers;  // tool calling and reasoning in chat completions
};

class OpenAiService {
 public:
  explicit OpenAiService(ApiOptions options);

  // The HTTP server's handler.
  void handle(const std::shared_ptr<http::Exchange>& exchange);

  // What /health reports until the model is served ("starting", "downloading", "loading", ...).
  void set_phase(std::string phase);
  // From now on requests go to `generator`. `model`'s pointers and `generator` must outlive the service
  // and every request in flight.
  void serve(ModelInfo model, Generator& generator);
  // Shutting down: /health and new generations answer 503.
  void begin_drain();

  // Sequences submitted and not finished yet.
  std::size_t active_sequences() const { return counters_->active_sequences.load(); }

  // The HTTP server's own error responses (413, 431, ...) in OpenAI's error shape.
  static http::Response http_error(int status, std::string_view message);

 private:
  struct Served {
    ModelInfo model;
    Generator* generator = nullptr;
    std::shared_ptr<Metrics> metrics;  // vLLM's series for this model
  };

  void route(const std::shared_ptr<http::Exchange>& exchange, const Route* found,
             const std::vector<http::Header>& headers);
  std::shared_ptr<const Served> require_served() const;
  void check_auth(const http::Request& request) const;
  void check_capacity(std::size_t sequences) const;

  // `body` is the request's, parsed.
  void completions(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                   const std::string& request_id, const rapidjson::Document& body);
  void chat_completions(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                        const std::string& request_id, const rapidjson::Document& body);
  void responses(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                 const std::string& request_id, const rapidjson::Document& body);
  void embeddings(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                  const std::string& request_id, const rapidjson::Document& body);
  void invocations(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                   const std::string& request_id);
  http::Response models() const;
  http::Response health() const;
  http::Response metrics() const;
  http::Response tokenize(const http::Request& request) const;
  http::Response detokenize(const http::Request& request) const;
  std::string random_id();
  // --seed: gives every sequence without a seed the next one from the server's stream.
  void seed_unseeded(std::vector<SequenceSpec>& sequences);
  void log_request(const std::string& id, const std::vector<std::size_t>& prompt_tokens, std::size_t max_tokens,
                   std::size_t n) const;

  const ApiOptions options_;
  const std::shared_ptr<ServiceCounters> counters_;
  const std::shared_ptr<prometheus::Registry> registry_;  // every series /metrics shows
  const std::shared_ptr<HttpMetrics> http_metrics_;
  mutable std::mutex mutex_;  // guards what follows
  std::string phase_ = "starting";
  std::shared_ptr<const Served> served_;
  bool draining_ = false;
  std::mt19937_64 random_;
  base::SplitMix64 seeds_{0};  // --seed's stream (unused without it)
};

}  // namespace serverd::api
