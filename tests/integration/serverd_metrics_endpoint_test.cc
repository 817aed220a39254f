// /metrics over loopback against a fake Generator: every vLLM series declared with vLLM's type (the list in
// tests/data/serverd/vllm_metrics_series.txt), the request series counting what was served, the scheduler's
// timings reaching vLLM's interval histograms, the engine's counts brought in at each scrape, the cache
// config info, and the HTTP series as prometheus-fastapi-instrumentator records them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/serverd/api_server_fixture.h"
#include "tests/support/serverd/exposition.h"

namespace {

using serverd_test::declared_types;
using serverd_test::HttpConnection;
using serverd_test::sample;
using ::testing::HasSubstr;
using ::testing::Not;

// A series of the served model, with one more label if given.
std::string series(std::string_view name, std::string more_label = {}) {
  std::vector<std::string> labels = {R"(engine="0")", R"(model_name="test-model")"};
  if (!more_label.empty()) labels.push_back(std::move(more_label));
  return serverd_test::series(name, std::move(labels));
}

class MetricsEndpointTest : public serverd_test::ApiServerTest {
 protected:
  std::string scrape() {
    const auto reply = get("/metrics");
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    return reply.body;
  }
};

#define EXPECT_SAMPLE(text, line_start, value) \
  EXPECT_EQ(sample(text, line_start), std::optional<double>(value)) << (line_start)

TEST_F(MetricsEndpointTest, DeclaresEveryVllmSeriesWithVllmsType) {
  start();
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hello"})").status, 200);  // the HTTP series have a request
  const auto declared = declared_types(scrape());
  std::ifstream list(VLLM_SERIES_FILE);
  ASSERT_TRUE(list) << VLLM_SERIES_FILE;
  std::map<std::string, std::string> expected;
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line.starts_with('#')) continue;
    std::istringstream fields(line);
    std::string name, type;
    fields >> name >> type;
    expected[name] = type;
  }
  ASSERT_GE(expected.size(), 30u);
  for (const auto& [name, type] : expected) {
    const auto found = declared.find(name);
    if (found == declared.end()) {
      ADD_FAILURE() << name << " (" << type << ") is not on /metrics";
    } else {
      EXPECT_EQ(found->second, type) << name;
    }
  }
  for (const auto& [name, type] : declared) EXPECT_TRUE(expected.contains(name)) << name << " is not vLLM's";
}

TEST_F(MetricsEndpointTest, RequestSeriesCountWhatWasServed) {
  start();
  // Two choices of "Hello" (5 prompt tokens): each echoes it and ends with EOS, 6 tokens.
  ASSERT_EQ(post("/v1/completions", R"({"prompt": "Hello", "n": 2})").status, 200);
  const std::string text = scrape();
  EXPECT_SAMPLE(text, series("vllm:prompt_tokens_total"), 10);
  EXPECT_SAMPLE(text, series("vllm:generation_tokens_total"), 12);
  EXPECT_SAMPLE(text, series("vllm:request_success_total", R"(finished_reason="stop")"), 2);
  for (const char* reason : {"length", "abort", "error", "repetition"}) {
    EXPECT_SAMPLE(text, series("vllm:request_success_total", "finished_reason=\"" + std::string(reason) + "\""), 0);
  }
  EXPECT_SAMPLE(text, series("vllm:time_to_first_token_seconds_count"), 2);
  EXPECT_SAMPLE(text, series("vllm:inter_token_latency_seconds_count"), 10);
  EXPECT_SAMPLE(text, series("vllm:e2e_request_latency_seconds_count"), 2);
  // Token counts in 1-2-5 buckets up to max_model_len (256).
  EXPECT_SAMPLE(text, series("vllm:request_prompt_tokens_sum"), 10);
  EXPECT_SAMPLE(text, series("vllm:request_prompt_tokens_bucket", R"(le="2")"), 0);
  EXPECT_SAMPLE(text, series("vllm:request_prompt_tokens_bucket", R"(le="5")"), 2);
  EXPECT_SAMPLE(text, series("vllm:request_prompt_tokens_bucket", R"(le="200")"), 2);
  EXPECT_SAMPLE(text, series("vllm:request_generation_tokens_sum"), 12);
  EXPECT_SAMPLE(text, series("vllm:request_generation_tokens_bucket", R"(le="5")"), 0);
  EXPECT_SAMPLE(text, series("vllm:request_generation_tokens_bucket", R"(le="10")"), 2);
  EXPECT_SAMPLE(text, series("vllm:request_params_max_tokens_sum"), 32);  // completions' default 16, twice
  // Once per prompt: its n, and its longest choice.
  EXPECT_SAMPLE(text, series("vllm:request_params_n_count"), 1);
  EXPECT_SAMPLE(text, series("vllm:request_params_n_bucket", R"(le="1")"), 0);
  EXPECT_SAMPLE(text, series("vllm:request_params_n_bucket", R"(le="2")"), 1);
  EXPECT_SAMPLE(text, series("vllm:request_max_num_generation_tokens_sum"), 6);
  // The intervals between the generator's timings, one per sequence.
  for (const char* name : {"vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count",
                           "vllm:request_decode_time_seconds_count", "vllm:request_inference_time_seconds_count",
                           "vllm:request_time_per_output_token_seconds_count"}) {
    EXPECT_SAMPLE(text, series(name), 2);
  }
}

TEST_F(MetricsEndpointTest, EngineCountsAreBroughtInAtEachScrape) {
  start();
  serverd::api::GeneratorStats stats;
  stats.waiting = 3;
  stats.kv_cache_usage = 0.5;
  stats.prefix_cache_queries = 12;
  stats.prefix_cache_hits = 3;
  stats.preemptions = 2;
  stats.steps_by_tokens[0] = 4;  // steps of one token
  stats.steps_by_tokens[3] = 1;  // a step of 17 to 32
  stats.step_tokens = 25;
  generator_.set_stats(stats);
  std::string text = scrape();
  EXPECT_SAMPLE(text, series("vllm:num_requests_running"), 0);
  EXPECT_SAMPLE(text, series("vllm:num_requests_waiting"), 3);
  EXPECT_SAMPLE(text, series("vllm:kv_cache_usage_perc"), 0.5);
  EXPECT_SAMPLE(text, series("vllm:prefix_cache_queries_total"), 12);
  EXPECT_SAMPLE(text, series("vllm:prefix_cache_hits_total"), 3);
  EXPECT_SAMPLE(text, series("vllm:num_preemptions_total"), 2);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_count"), 5);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_sum"), 25);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_bucket", R"(le="1")"), 4);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_bucket", R"(le="16")"), 4);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_bucket", R"(le="32")"), 5);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_bucket", R"(le="+Inf")"), 5);

  // The engine's counts are totals: a later scrape shows the new totals, not their sum with the old.
  stats.prefix_cache_queries = 20;
  stats.steps_by_tokens[0] = 6;
  stats.step_tokens = 27;
  generator_.set_stats(stats);
  text = scrape();
  EXPECT_SAMPLE(text, series("vllm:prefix_cache_queries_total"), 20);
  EXPECT_SAMPLE(text, series("vllm:prefix_cache_hits_total"), 3);
  EXPECT_SAMPLE(text, series("vllm:num_preemptions_total"), 2);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_count"), 7);
  EXPECT_SAMPLE(text, series("vllm:iteration_tokens_total_sum"), 27);
}

TEST_F(MetricsEndpointTest, CacheConfigInfoAndSleepState) {
  start();
  const std::string text = scrape();
  EXPECT_SAMPLE(text,
                R"(vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",)"
                R"(gpu_memory_utilization="0.9",num_gpu_blocks="64"})",
                1);
  EXPECT_SAMPLE(text, series("vllm:engine_sleep_state", R"(sleep_state="awake")"), 1);
  EXPECT_SAMPLE(text, series("vllm:engine_sleep_state", R"(sleep_state="weights_offloaded")"), 0);
  EXPECT_SAMPLE(text, series("vllm:engine_sleep_state", R"(sleep_state="discard_all")"), 0);
}

TEST_F(MetricsEndpointTest, OnlyTheHttpSeriesBeforeTheModelIsServed) {
  start({}, /*serve=*/false);
  ASSERT_EQ(get("/nowhere").status, 404);
  const std::string text = scrape();
  EXPECT_THAT(text, Not(HasSubstr("vllm:")));
  EXPECT_SAMPLE(text, R"(http_requests_total{handler="none",method="GET",status="4xx"})", 1);
}

TEST_F(MetricsEndpointTest, HttpSeriesAsTheInstrumentatorRecordsThem) {
  start();
  const std::string whole_body = R"({"prompt": "Hello"})";
  const auto whole = post("/v1/completions", whole_body);
  ASSERT_EQ(whole.status, 200);
  const std::string stream_body = R"({"prompt": "Hi", "stream": true})";
  HttpConnection streaming(server_->port());
  streaming.send_request("POST", "/v1/completions", stream_body);
  ASSERT_EQ(streaming.read_response().status, 200);
  ASSERT_EQ(post("/v1/score", R"({"text_1": "x"})").status, 501);
  ASSERT_EQ(get("/nowhere").status, 404);
  for (const char* probe : {"/health", "/ping", "/version", "/load"}) ASSERT_EQ(get(probe).status, 200) << probe;
  scrape();

  const std::string text = scrape();
  EXPECT_SAMPLE(text, R"(http_requests_total{handler="/v1/completions",method="POST",status="2xx"})", 2);
  EXPECT_SAMPLE(text, R"(http_requests_total{handler="/v1/score",method="POST",status="5xx"})", 1);
  EXPECT_SAMPLE(text, R"(http_requests_total{handler="none",method="GET",status="4xx"})", 1);
  // Sizes are the Content-Length headers: a chunked stream's response counts 0 bytes.
  EXPECT_SAMPLE(text, R"(http_request_size_bytes_count{handler="/v1/completions"})", 2);
  EXPECT_SAMPLE(text, R"(http_request_size_bytes_sum{handler="/v1/completions"})",
                static_cast<double>(whole_body.size() + stream_body.size()));
  EXPECT_SAMPLE(text, R"(http_response_size_bytes_sum{handler="/v1/completions"})",
                static_cast<double>(whole.body.size()));
  EXPECT_SAMPLE(text, R"(http_request_duration_seconds_count{handler="/v1/completions",method="POST"})", 2);
  EXPECT_SAMPLE(text, "http_request_duration_highr_seconds_count", 4);
  // The probes, /version and /metrics are left out, as vLLM leaves them out.
  for (const char* excluded : {"/health", "/ping", "/version", "/load", "/metrics"}) {
    EXPECT_THAT(text, Not(HasSubstr("handler=\"" + std::string(excluded) + "\""))) << excluded;
  }
}

}  // namespace
