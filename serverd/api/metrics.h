#pragma once

// vLLM's Prometheus series for the served model (vllm/v1/metrics/loggers.py): vLLM's names, types, labels
// (model_name and engine) and buckets, in a prometheus-cpp registry that /metrics serializes. What the API
// layer sees of a request is recorded as it happens; what the engine counts (GeneratorStats) is brought in
// before every scrape. Thread-safe.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/generator.h"

namespace serverd::api {

struct MetricsConfig {
  std::string model_name;
  std::size_t max_model_len = 0;  // the token-count histograms' buckets go 1, 2, 5, 10, ... up to it
  KvCacheConfig kv_cache;
};

// One sequence as /metrics records it once the generator is done with it.
struct FinishedSequence {
  std::string_view finish_reason;  // as the response says it: "stop", "length", "abort"
  double e2e_seconds = 0.0;        // the request's arrival to the sequence's end, on the API layer's clock
  std::size_t prompt_tokens = 0;
  std::size_t generation_tokens = 0;
  std::size_t max_tokens = 0;  // the request's max_tokens as resolved
  SequenceTimings timings;     // the scheduler's
};

class Metrics {
 public:
  // Adds vLLM's families to `registry`, which this object keeps alive.
  Metrics(std::shared_ptr<prometheus::Registry> registry, const MetricsConfig& config);

  // A sequence's first token arrived `ttft_seconds` after its request did; vLLM counts the prompt as
  // processed then.
  void first_token(std::size_t prompt_tokens, double ttft_seconds);
  void inter_token(double seconds);
  void generation_tokens(std::size_t count);
  void finished(const FinishedSequence& sequence);
  // Every sequence of one prompt (its n choices) has finished; the longest has `max_generation_tokens`.
  void prompt_finished(std::size_t n, std::size_t max_generation_tokens);
  // Brings the engine's gauges and counters up to `stats`; called before each scrape.
  void update(const GeneratorStats& stats);

 private:
  prometheus::Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> buckets);

  const std::shared_ptr<prometheus::Registry> registry_;
  const prometheus::Labels labels_;  // model_name, engine

  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Gauge& kv_cache_usage_;
  prometheus::Counter& prefix_cache_queries_;
  prometheus::Counter& prefix_cache_hits_;
  prometheus::Counter& preemptions_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Family<prometheus::Counter>& request_success_;

  prometheus::Histogram& request_prompt_tokens_;
  prometheus::Histogram& request_generation_tokens_;
  prometheus::Histogram& iteration_tokens_;
  prometheus::Histogram& request_max_num_generation_tokens_;
  prometheus::Histogram& request_params_n_;
  prometheus::Histogram& request_params_max_tokens_;
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& inter_token_latency_;
  prometheus::Histogram& request_time_per_output_token_;
  prometheus::Histogram& e2e_request_latency_;
  prometheus::Histogram& request_queue_time_;
  prometheus::Histogram& request_inference_time_;
  prometheus::Histogram& request_prefill_time_;
  prometheus::Histogram& request_decode_time_;

  std::mutex update_mutex_;  // guards the engine counts last brought in
  GeneratorStats last_;
};

// The Prometheus text exposition (format 0.0.4) of everything in `registry`.
std::string render_exposition(const prometheus::Registry& registry);

}  // namespace serverd::api
