#include "serverd/api/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace serverd::api {
namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py).
constexpr std::array<double, 22> kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                             0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                             20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
constexpr std::array<double, 19> kInterTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                              0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
constexpr std::array<double, 21> kRequestLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                           5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                           60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// vLLM labels request_success with every finish reason it knows, zero or not.
constexpr std::array<std::string_view, 3> kFinishReasons = {"stop", "length", "abort"};

// A number as Python's prometheus_client prints it: "1.0", "0.25", "+Inf".
std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

// A label value with \, " and newlines escaped.
std::string label_value(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out.append(name).append("{").append(labels).append("} ").append(number(value)).append("\n");
}

}  // namespace

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds_(upper_bounds.begin(), upper_bounds.end()), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(bucket)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::uint64_t cumulative = 0;
  const std::string bucket_name = std::string(name) + "_bucket";
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    sample(out, bucket_name, std::string(labels) + ",le=\"" + le + "\"", static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count_));
  sample(out, std::string(name) + "_sum", labels, sum_);
}

Metrics::Metrics()
    : time_to_first_token_(kTimeToFirstTokenBuckets),
      inter_token_latency_(kInterTokenLatencyBuckets),
      e2e_latency_(kRequestLatencyBuckets) {}

void Metrics::set_model_name(std::string name) {
  std::lock_guard lock(mutex_);
  model_name_ = std::move(name);
}

void Metrics::add_prompt_tokens(std::size_t count) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += count;
}

void Metrics::add_generation_tokens(std::size_t count) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += count;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  time_to_first_token_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_latency_.observe(seconds);
}

void Metrics::record_finished(std::string_view reason, double e2e_seconds) {
  std::lock_guard lock(mutex_);
  const auto found = finished_.find(reason);
  if (found == finished_.end()) {
    finished_.emplace(std::string(reason), 1);
  } else {
    ++found->second;
  }
  e2e_latency_.observe(e2e_seconds);
}

std::string Metrics::render(const GeneratorStats& stats) const {
  std::lock_guard lock(mutex_);
  const std::string labels = "model_name=\"" + label_value(model_name_) + "\",engine=\"0\"";
  std::string out;

  header(out, "vllm:num_requests_running", "Number of requests in model execution batches.", "gauge");
  sample(out, "vllm:num_requests_running", labels, static_cast<double>(stats.running));
  header(out, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge");
  sample(out, "vllm:num_requests_waiting", labels, static_cast<double>(stats.waiting));
  header(out, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge");
  sample(out, "vllm:kv_cache_usage_perc", labels, stats.kv_cache_usage);

  header(out, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", "counter");
  sample(out, "vllm:prefix_cache_queries_total", labels, static_cast<double>(stats.prefix_cache_queries));
  header(out, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", "counter");
  sample(out, "vllm:prefix_cache_hits_total", labels, static_cast<double>(stats.prefix_cache_hits));

  header(out, "vllm:prompt_tokens", "Number of prefill tokens processed.", "counter");
  sample(out, "vllm:prompt_tokens_total", labels, static_cast<double>(prompt_tokens_));
  header(out, "vllm:generation_tokens", "Number of generation tokens processed.", "counter");
  sample(out, "vllm:generation_tokens_total", labels, static_cast<double>(generation_tokens_));

  header(out, "vllm:request_success", "Count of successfully processed requests.", "counter");
  for (const std::string_view reason : kFinishReasons) {
    const auto found = finished_.find(reason);
    sample(out, "vllm:request_success_total", labels + ",finished_reason=\"" + std::string(reason) + "\"",
           found == finished_.end() ? 0.0 : static_cast<double>(found->second));
  }

  header(out, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "histogram");
  time_to_first_token_.render(out, "vllm:time_to_first_token_seconds", labels);
  header(out, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "histogram");
  inter_token_latency_.render(out, "vllm:inter_token_latency_seconds", labels);
  header(out, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "histogram");
  e2e_latency_.render(out, "vllm:e2e_request_latency_seconds", labels);
  return out;
}

}  // namespace serverd::api
