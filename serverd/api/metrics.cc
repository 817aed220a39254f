#include "serverd/api/metrics.h"

#include <prometheus/text_serializer.h>

#include <charconv>
#include <chrono>

namespace serverd::api {
namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py).
const std::vector<double> kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                      0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                    5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};
// vLLM's FinishReason values: every one labels a request_success series from the start, zero or not.
constexpr std::string_view kFinishReasons[] = {"stop", "length", "abort", "error", "repetition"};
// vllm:engine_sleep_state's states; serverd never sleeps, so it is always awake.
constexpr std::string_view kSleepStates[] = {"awake", "weights_offloaded", "discard_all"};

// 1, 2, 5, 10, 20, 50, ... while at most `max_value` (vLLM's build_1_2_5_buckets).
std::vector<double> one_two_five_buckets(std::size_t max_value) {
  std::vector<double> buckets;
  for (std::size_t scale = 1;; scale *= 10) {
    for (const std::size_t mantissa : {1, 2, 5}) {
      if (mantissa * scale > max_value) return buckets;
      buckets.push_back(static_cast<double>(mantissa * scale));
    }
  }
}

// A value as Python's str() spells it, as vLLM's info labels carry it: "0.9", "1.0", "True".
std::string python_str(double value) {
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  std::string text(buffer, end);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
std::string python_str(bool value) {
  return value ? "True" : "False";
}

double seconds(SequenceTimings::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

prometheus::Gauge& gauge(prometheus::Registry& registry, const std::string& name, const std::string& help,
                         const prometheus::Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Counter& counter(prometheus::Registry& registry, const std::string& name, const std::string& help,
                             const prometheus::Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

void add_delta(prometheus::Counter& counter, std::uint64_t now, std::uint64_t before) {
  if (now > before) counter.Increment(static_cast<double>(now - before));
}

}  // namespace

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry, const MetricsConfig& config)
    : registry_(std::move(registry)),
      labels_{{"model_name", config.model_name}, {"engine", "0"}},
      running_(
          gauge(*registry_, "vllm:num_requests_running", "Number of requests in model execution batches.", labels_)),
      waiting_(gauge(*registry_, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels_)),
      kv_cache_usage_(
          gauge(*registry_, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels_)),
      prefix_cache_queries_(counter(*registry_, "vllm:prefix_cache_queries_total",
                                    "Prefix cache queries, in terms of number of queried tokens.", labels_)),
      prefix_cache_hits_(counter(*registry_, "vllm:prefix_cache_hits_total",
                                 "Prefix cache hits, in terms of number of cached tokens.", labels_)),
      preemptions_(counter(*registry_, "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
                           labels_)),
      prompt_tokens_(counter(*registry_, "vllm:prompt_tokens_total", "Number of prefill tokens processed.", labels_)),
      generation_tokens_(
          counter(*registry_, "vllm:generation_tokens_total", "Number of generation tokens processed.", labels_)),
      request_success_(prometheus::BuildCounter()
                           .Name("vllm:request_success_total")
                           .Help("Count of successfully processed requests.")
                           .Register(*registry_)),
      request_prompt_tokens_(histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                                       one_two_five_buckets(config.max_model_len))),
      request_generation_tokens_(histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                           one_two_five_buckets(config.max_model_len))),
      iteration_tokens_(histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                  {kIterationTokenBuckets.begin(), kIterationTokenBuckets.end()})),
      request_max_num_generation_tokens_(histogram("vllm:request_max_num_generation_tokens",
                                                   "Histogram of maximum number of requested generation tokens.",
                                                   one_two_five_buckets(config.max_model_len))),
      request_params_n_(histogram("vllm:request_params_n", "Histogram of the n request parameter.", kParamsNBuckets)),
      request_params_max_tokens_(histogram("vllm:request_params_max_tokens",
                                           "Histogram of the max_tokens request parameter.",
                                           one_two_five_buckets(config.max_model_len))),
      time_to_first_token_(histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                     kTimeToFirstTokenBuckets)),
      inter_token_latency_(histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                                     kTokenLatencyBuckets)),
      request_time_per_output_token_(histogram("vllm:request_time_per_output_token_seconds",
                                               "Histogram of time_per_output_token_seconds per request.",
                                               kTokenLatencyBuckets)),
      e2e_request_latency_(histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                     kRequestLatencyBuckets)),
      request_queue_time_(histogram("vllm:request_queue_time_seconds",
                                    "Histogram of time spent in WAITING phase for request.", kRequestLatencyBuckets)),
      request_inference_time_(histogram("vllm:request_inference_time_seconds",
                                        "Histogram of time spent in RUNNING phase for request.",
                                        kRequestLatencyBuckets)),
      request_prefill_time_(histogram("vllm:request_prefill_time_seconds",
                                      "Histogram of time spent in PREFILL phase for request.", kRequestLatencyBuckets)),
      request_decode_time_(histogram("vllm:request_decode_time_seconds",
                                     "Histogram of time spent in DECODE phase for request.", kRequestLatencyBuckets)) {
  for (const std::string_view reason : kFinishReasons) {
    auto labels = labels_;
    labels.emplace("finished_reason", reason);
    request_success_.Add(labels);
  }
  auto& sleep_state = prometheus::BuildGauge()
                          .Name("vllm:engine_sleep_state")
                          .Help(
                              "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
                              "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
                              "level 2.")
                          .Register(*registry_);
  for (const std::string_view state : kSleepStates) {
    auto labels = labels_;
    labels.emplace("sleep_state", state);
    sleep_state.Add(labels).Set(state == "awake" ? 1.0 : 0.0);
  }
  // An info metric as vLLM emulates one: a gauge at 1 whose labels are the cache config (and the engine,
  // without model_name).
  const KvCacheConfig& kv = config.kv_cache;
  gauge(*registry_, "vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
        {{"block_size", std::to_string(kv.block_size)},
         {"cache_dtype", "auto"},
         {"enable_prefix_caching", python_str(kv.prefix_caching)},
         {"gpu_memory_utilization", python_str(kv.gpu_memory_utilization)},
         {"num_gpu_blocks", std::to_string(kv.num_blocks)},
         {"engine", "0"}})
      .Set(1.0);
}

prometheus::Histogram& Metrics::histogram(std::string_view name, std::string_view help, std::vector<double> buckets) {
  return prometheus::BuildHistogram()
      .Name(std::string(name))
      .Help(std::string(help))
      .Register(*registry_)
      .Add(labels_, std::move(buckets));
}

void Metrics::first_token(std::size_t prompt_tokens, double ttft_seconds) {
  prompt_tokens_.Increment(static_cast<double>(prompt_tokens));
  time_to_first_token_.Observe(ttft_seconds);
}

void Metrics::inter_token(double seconds) {
  inter_token_latency_.Observe(seconds);
}

void Metrics::generation_tokens(std::size_t count) {
  generation_tokens_.Increment(static_cast<double>(count));
}

void Metrics::finished(const FinishedSequence& sequence) {
  auto labels = labels_;
  labels.emplace("finished_reason", sequence.finish_reason);
  request_success_.Add(labels).Increment();
  e2e_request_latency_.Observe(sequence.e2e_seconds);
  request_prompt_tokens_.Observe(static_cast<double>(sequence.prompt_tokens));
  request_generation_tokens_.Observe(static_cast<double>(sequence.generation_tokens));
  if (sequence.max_tokens > 0) request_params_max_tokens_.Observe(static_cast<double>(sequence.max_tokens));

  // vLLM's intervals (vllm/v1/metrics/stats.py), each from the scheduler's own clock; an interval whose
  // events the sequence never reached (cancelled while queued or prefilling) is not observed.
  const SequenceTimings& t = sequence.timings;
  if (!t.scheduled) return;
  request_queue_time_.Observe(seconds(*t.scheduled - t.queued));
  if (!t.first_token || !t.last_token) return;
  request_prefill_time_.Observe(seconds(*t.first_token - *t.scheduled));
  const double decode = seconds(*t.last_token - *t.first_token);
  request_decode_time_.Observe(decode);
  request_inference_time_.Observe(seconds(*t.last_token - *t.scheduled));
  request_time_per_output_token_.Observe(
      sequence.generation_tokens > 1 ? decode / static_cast<double>(sequence.generation_tokens - 1) : 0.0);
}

void Metrics::prompt_finished(std::size_t n, std::size_t max_generation_tokens) {
  request_params_n_.Observe(static_cast<double>(n));
  request_max_num_generation_tokens_.Observe(static_cast<double>(max_generation_tokens));
}

void Metrics::update(const GeneratorStats& stats) {
  running_.Set(static_cast<double>(stats.running));
  waiting_.Set(static_cast<double>(stats.waiting));
  kv_cache_usage_.Set(stats.kv_cache_usage);
  // The engine's counts are cumulative; the counters take what was added since the last scrape.
  const std::lock_guard lock(update_mutex_);
  add_delta(prefix_cache_queries_, stats.prefix_cache_queries, last_.prefix_cache_queries);
  add_delta(prefix_cache_hits_, stats.prefix_cache_hits, last_.prefix_cache_hits);
  add_delta(preemptions_, stats.preemptions, last_.preemptions);
  std::vector<double> new_steps(stats.steps_by_tokens.size());
  bool any = false;
  for (std::size_t i = 0; i < new_steps.size(); ++i) {
    const std::uint64_t before = last_.steps_by_tokens[i];
    const std::uint64_t now = stats.steps_by_tokens[i];
    new_steps[i] = now > before ? static_cast<double>(now - before) : 0.0;
    any = any || now > before;
  }
  if (any) {
    const double new_tokens =
        stats.step_tokens > last_.step_tokens ? static_cast<double>(stats.step_tokens - last_.step_tokens) : 0.0;
    iteration_tokens_.ObserveMultiple(new_steps, new_tokens);
  }
  last_ = stats;
}

std::string render_exposition(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace serverd::api
