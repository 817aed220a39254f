#pragma once

// The Prometheus metrics vLLM exposes on /metrics that this server can know, under vLLM's names, buckets and
// labels (model_name, engine), in the text exposition format. Thread-safe; owned by the API service.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/generator.h"

namespace serverd::api {

class Histogram {
 public:
  explicit Histogram(std::span<const double> upper_bounds);
  void observe(double value);
  // Appends the _bucket, _count and _sum samples.
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0.0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void set_model_name(std::string name);
  void add_prompt_tokens(std::size_t count);
  void add_generation_tokens(std::size_t count);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  // A finished sequence: "stop", "length" or "abort", and its submit-to-finish time.
  void record_finished(std::string_view reason, double e2e_seconds);

  // The exposition text; `stats` fills the engine's gauges and prefix-cache counters.
  std::string render(const GeneratorStats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::string model_name_;
  std::uint64_t prompt_tokens_ = 0;
  std::uint64_t generation_tokens_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> finished_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram e2e_latency_;
};

}  // namespace serverd::api
