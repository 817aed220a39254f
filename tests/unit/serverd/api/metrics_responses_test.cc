// vLLM's series as Metrics records them (names, labels, buckets, the scheduler's intervals); the response
// pieces in vLLM's shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <optional>

#include "serverd/api/api_error.h"
#include "serverd/api/metrics.h"
#include "serverd/api/response_json.h"
#include "tests/support/serverd/exposition.h"
#include "tests/support/serverd/fake_generator.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;

class MetricsTest : public ::testing::Test {
 protected:
  std::string text() const { return render_exposition(*registry_); }
  std::optional<double> value(const std::string& name, const std::string& more_label = {}) const {
    std::vector<std::string> labels = {R"(engine="0")", R"(model_name="m")"};
    if (!more_label.empty()) labels.push_back(more_label);
    return serverd_test::sample(text(), serverd_test::series(name, labels));
  }

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  Metrics metrics_{registry_, MetricsConfig{"m", 100, KvCacheConfig{}}};
};

SequenceTimings timings_ms(int scheduled, std::optional<int> first_token, std::optional<int> last_token) {
  using std::chrono::milliseconds;
  SequenceTimings t;
  t.queued = SequenceTimings::Clock::time_point{} + std::chrono::hours(1);
  t.scheduled = t.queued + milliseconds(scheduled);
  if (first_token) t.first_token = t.queued + milliseconds(*first_token);
  if (last_token) t.last_token = t.queued + milliseconds(*last_token);
  return t;
}

TEST_F(MetricsTest, VllmIntervalsBetweenTheSchedulersTimings) {
  // Queued 0.4 s, prefill 1 s, decode 2 s over 5 tokens (0.5 s per output token after the first).
  metrics_.finished({"stop", 4.0, 7, 5, 16, timings_ms(400, 1400, 3400)});
  EXPECT_EQ(value("vllm:request_queue_time_seconds_sum"), 0.4);
  EXPECT_EQ(value("vllm:request_queue_time_seconds_bucket", R"(le="0.3")"), 0);
  EXPECT_EQ(value("vllm:request_queue_time_seconds_bucket", R"(le="0.5")"), 1);
  EXPECT_EQ(value("vllm:request_prefill_time_seconds_sum"), 1.0);
  EXPECT_EQ(value("vllm:request_decode_time_seconds_sum"), 2.0);
  EXPECT_EQ(value("vllm:request_inference_time_seconds_sum"), 3.0);
  EXPECT_EQ(value("vllm:request_time_per_output_token_seconds_sum"), 0.5);
  EXPECT_EQ(value("vllm:request_time_per_output_token_seconds_bucket", R"(le="0.5")"), 1);
  EXPECT_EQ(value("vllm:request_time_per_output_token_seconds_bucket", R"(le="0.4")"), 0);
  EXPECT_EQ(value("vllm:e2e_request_latency_seconds_sum"), 4.0);
  EXPECT_EQ(value("vllm:e2e_request_latency_seconds_bucket", R"(le="2.5")"), 0);
  EXPECT_EQ(value("vllm:e2e_request_latency_seconds_bucket", R"(le="5")"), 1);
  EXPECT_EQ(value("vllm:request_success_total", R"(finished_reason="stop")"), 1);
  EXPECT_EQ(value("vllm:request_params_max_tokens_sum"), 16);
  // 1-2-5 buckets up to max_model_len (100), then +Inf.
  EXPECT_EQ(value("vllm:request_prompt_tokens_bucket", R"(le="5")"), 0);
  EXPECT_EQ(value("vllm:request_prompt_tokens_bucket", R"(le="10")"), 1);
  EXPECT_EQ(value("vllm:request_prompt_tokens_bucket", R"(le="100")"), 1);
  EXPECT_EQ(value("vllm:request_prompt_tokens_bucket", R"(le="200")"), std::nullopt);
  EXPECT_EQ(value("vllm:request_generation_tokens_sum"), 5);
}

TEST_F(MetricsTest, IntervalsASequenceNeverReachedAreNotObserved) {
  metrics_.finished({"abort", 1.0, 3, 0, 16, timings_ms(200, std::nullopt, std::nullopt)});  // cancelled in prefill
  SequenceTimings queued_only;
  metrics_.finished({"abort", 1.0, 3, 0, 16, queued_only});              // cancelled while waiting
  metrics_.finished({"length", 1.0, 3, 1, 1, timings_ms(0, 100, 100)});  // one token: no time per output token
  EXPECT_EQ(value("vllm:request_success_total", R"(finished_reason="abort")"), 2);
  EXPECT_EQ(value("vllm:e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(value("vllm:request_queue_time_seconds_count"), 2);
  EXPECT_EQ(value("vllm:request_prefill_time_seconds_count"), 1);
  EXPECT_EQ(value("vllm:request_decode_time_seconds_count"), 1);
  EXPECT_EQ(value("vllm:request_time_per_output_token_seconds_count"), 1);
  EXPECT_EQ(value("vllm:request_time_per_output_token_seconds_sum"), 0);
}

TEST_F(MetricsTest, TokensAndLatenciesAsTheyStream) {
  metrics_.first_token(7, 0.003);
  metrics_.inter_token(0.02);
  metrics_.generation_tokens(2);
  metrics_.prompt_finished(3, 9);
  EXPECT_EQ(value("vllm:prompt_tokens_total"), 7);
  EXPECT_EQ(value("vllm:generation_tokens_total"), 2);
  EXPECT_EQ(value("vllm:time_to_first_token_seconds_bucket", R"(le="0.001")"), 0);
  EXPECT_EQ(value("vllm:time_to_first_token_seconds_bucket", R"(le="0.005")"), 1);
  EXPECT_EQ(value("vllm:time_to_first_token_seconds_bucket", R"(le="2560")"), 1);
  EXPECT_EQ(value("vllm:inter_token_latency_seconds_bucket", R"(le="0.01")"), 0);
  EXPECT_EQ(value("vllm:inter_token_latency_seconds_bucket", R"(le="0.025")"), 1);
  EXPECT_EQ(value("vllm:request_params_n_bucket", R"(le="2")"), 0);
  EXPECT_EQ(value("vllm:request_params_n_bucket", R"(le="5")"), 1);
  EXPECT_EQ(value("vllm:request_max_num_generation_tokens_sum"), 9);
  // Every finish reason vLLM knows has its series from the start.
  for (const char* reason : {"stop", "length", "abort", "error", "repetition"}) {
    EXPECT_EQ(value("vllm:request_success_total", "finished_reason=\"" + std::string(reason) + "\""), 0) << reason;
  }
  EXPECT_THAT(text(), HasSubstr("# TYPE vllm:prompt_tokens_total counter\n"));
  EXPECT_THAT(text(),
              HasSubstr("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"));
}

TEST(Errors, OpenAiShapeWithVllmTypes) {
  const auto response = error_response(ApiError{503, "busy", std::nullopt, 2});
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.body, R"({"error":{"message":"busy","type":"ServiceUnavailableError","param":null,"code":503}})");
  ASSERT_EQ(response.headers.size(), 2u);
  EXPECT_EQ(response.headers[1].name, "Retry-After");
  EXPECT_EQ(response.headers[1].value, "2");
  EXPECT_EQ(error_body(ApiError{404, "x", "model", std::nullopt}),
            R"({"error":{"message":"x","type":"NotFoundError","param":"model","code":404}})");
}

class LogprobsTest : public ::testing::Test {
 protected:
  std::vector<LogprobRecord> records(const std::string& text, int top) {
    std::vector<LogprobRecord> out;
    for (const char c : text) {
      const auto s = serverd_test::FakeGenerator::sampled(static_cast<unsigned char>(c), top);
      out.push_back({s.token, s.logprob, s.top});
    }
    return out;
  }
  serverd_test::TestModel model_;
};

TEST_F(LogprobsTest, CompletionShapeCountsTextOffsetsInCharacters) {
  auto recs = records("ab", 2);
  recs.push_back({serverd_test::kEos, -1e30f, {}});  // floored like vLLM
  JsonWriter w;
  std::size_t offset = 3;
  write_completion_logprobs(w, model_.tokenizer, recs, 2, offset, false);
  rapidjson::Document d;
  d.Parse(w.take().c_str());
  ASSERT_TRUE(d.IsObject());
  EXPECT_EQ(d["text_offset"][0].GetInt(), 3);
  EXPECT_EQ(d["text_offset"][1].GetInt(), 4);
  EXPECT_EQ(d["text_offset"][2].GetInt(), 5);
  EXPECT_EQ(offset, 5u + 13u);  // "<|endoftext|>" is 13 characters
  EXPECT_STREQ(d["tokens"][0].GetString(), "a");
  EXPECT_STREQ(d["tokens"][2].GetString(), "<|endoftext|>");
  EXPECT_DOUBLE_EQ(d["token_logprobs"][2].GetDouble(), -9999.0);
  // The chosen token first, then the most likely others: "a" (chosen and top), "b".
  const auto& top = d["top_logprobs"][0];
  ASSERT_EQ(top.MemberCount(), 2u);
  EXPECT_TRUE(top.HasMember("a"));
  EXPECT_TRUE(top.HasMember("b"));
}

TEST_F(LogprobsTest, ChatShapeHasBytesAndTopLists) {
  JsonWriter w;
  write_chat_logprobs(w, model_.tokenizer, records("\xC3", 2), 2, false);
  rapidjson::Document d;
  d.Parse(w.take().c_str());
  const auto& entry = d["content"][0];
  EXPECT_STREQ(entry["token"].GetString(), "\xEF\xBF\xBD");  // half a character decodes to U+FFFD
  ASSERT_EQ(entry["bytes"].Size(), 3u);
  EXPECT_EQ(entry["bytes"][0].GetInt(), 0xEF);
  ASSERT_EQ(entry["top_logprobs"].Size(), 2u);
  EXPECT_TRUE(entry["top_logprobs"][1].HasMember("bytes"));
  EXPECT_LT(entry["top_logprobs"][1]["logprob"].GetDouble(), entry["top_logprobs"][0]["logprob"].GetDouble());
}

// A sampled token that is not the most likely leads its top_logprobs list, as vLLM's dict order has it,
// and the list keeps its length (the least likely of the others drops out).
TEST_F(LogprobsTest, ChatTopListsLeadWithASampledTokenThatIsNotTheMostLikely) {
  auto recs = records("ab", 3);
  ASSERT_GE(recs[0].top.size(), 3u);
  const auto most_likely = recs[0].top[0].token;
  recs[0].token = recs[0].top[2].token;  // sampled: the third most likely
  recs[0].logprob = recs[0].top[2].logprob;
  JsonWriter w;
  write_chat_logprobs(w, model_.tokenizer, recs, 2, true);
  rapidjson::Document d;
  d.Parse(w.take().c_str());
  const auto& list = d["content"][0]["top_logprobs"];
  ASSERT_EQ(list.Size(), 2u);
  EXPECT_EQ(std::string(list[0]["token"].GetString()), "token_id:" + std::to_string(recs[0].token));
  EXPECT_EQ(std::string(list[1]["token"].GetString()), "token_id:" + std::to_string(most_likely));
  // The greedy position is unchanged: the most likely first, then the next.
  const auto& greedy = d["content"][1]["top_logprobs"];
  EXPECT_EQ(std::string(greedy[0]["token"].GetString()), "token_id:" + std::to_string(recs[1].top[0].token));
  EXPECT_EQ(std::string(greedy[1]["token"].GetString()), "token_id:" + std::to_string(recs[1].top[1].token));
}

// An echoed prompt leads the completions logprobs: its first token has a text, an offset and nulls (nothing
// predicts it); every token after it is a prompt log-probability record.
TEST_F(LogprobsTest, CompletionShapeWithAnEchoedPromptAndTokenIds) {
  const std::vector<PromptLogprob> entries = {serverd_test::FakeGenerator::prompt_scored('b', 1)};
  auto recs = prompt_records('a', entries);
  const auto generated = records("c", 1);
  recs.insert(recs.end(), generated.begin(), generated.end());
  JsonWriter w;
  std::size_t offset = 0;
  write_completion_logprobs(w, model_.tokenizer, recs, 1, offset, false);
  rapidjson::Document d;
  d.Parse(w.take().c_str());
  ASSERT_EQ(d["tokens"].Size(), 3u);
  EXPECT_STREQ(d["tokens"][0].GetString(), "a");
  EXPECT_TRUE(d["token_logprobs"][0].IsNull());
  EXPECT_TRUE(d["top_logprobs"][0].IsNull());
  EXPECT_EQ(d["text_offset"][2].GetInt(), 2);
  EXPECT_DOUBLE_EQ(d["token_logprobs"][1].GetDouble(), static_cast<double>(entries[0].logprob));
  // 'b' is not the most likely: it comes first, then 'a' (logprobs 1 + 1 entries).
  const auto& top = d["top_logprobs"][1];
  ASSERT_EQ(top.MemberCount(), 2u);
  EXPECT_STREQ(top.MemberBegin()->name.GetString(), "b");
  EXPECT_TRUE(top.HasMember("a"));

  // Token ids instead of texts, for every token and top entry; offsets count what is written.
  JsonWriter ids;
  offset = 0;
  write_completion_logprobs(ids, model_.tokenizer, recs, 1, offset, true);
  d.Parse(ids.take().c_str());
  EXPECT_STREQ(d["tokens"][0].GetString(), "token_id:97");
  EXPECT_STREQ(d["tokens"][2].GetString(), "token_id:99");
  EXPECT_EQ(d["text_offset"][1].GetInt(), 11);
  EXPECT_TRUE(d["top_logprobs"][1].HasMember("token_id:97"));
  EXPECT_EQ(offset, 33u);
}

TEST_F(LogprobsTest, ChatTokenIdsAndTheirBytes) {
  JsonWriter w;
  write_chat_logprobs(w, model_.tokenizer, records("H", 2), 2, true);
  rapidjson::Document d;
  d.Parse(w.take().c_str());
  const auto& entry = d["content"][0];
  EXPECT_STREQ(entry["token"].GetString(), "token_id:72");
  ASSERT_EQ(entry["bytes"].Size(), 11u);
  EXPECT_EQ(entry["bytes"][0].GetInt(), 't');
  EXPECT_STREQ(entry["top_logprobs"][1]["token"].GetString(), "token_id:73");
}

// vLLM's prompt_logprobs: null first, then per token its id -> {logprob, rank, decoded_token}, the prompt
// token first and each id once (a prompt token among the top keeps the top list's place as its rank).
TEST_F(LogprobsTest, PromptLogprobsListShape) {
  const std::vector<PromptLogprob> entries = {serverd_test::FakeGenerator::prompt_scored('z', 2),
                                              serverd_test::FakeGenerator::prompt_scored('b', 2)};
  JsonWriter w;
  write_prompt_logprobs(w, model_.tokenizer, entries);
  EXPECT_EQ(w.take(), R"([null,)"
                      R"({"122":{"logprob":-6.220000267028809,"rank":1122,"decoded_token":"z"},)"
                      R"("97":{"logprob":-0.10000000149011612,"rank":1,"decoded_token":"a"},)"
                      R"("98":{"logprob":-0.20000000298023225,"rank":2,"decoded_token":"b"}},)"
                      R"({"98":{"logprob":-0.20000000298023225,"rank":2,"decoded_token":"b"},)"
                      R"("97":{"logprob":-0.10000000149011612,"rank":1,"decoded_token":"a"}}])");
}

TEST(Responses, UsageAndStopReason) {
  JsonWriter w;
  w.begin_array();
  write_usage(w, 3, 4);
  write_stop_reason(w, StopReason{});
  write_stop_reason(w, StopReason{std::int32_t{7}});
  write_stop_reason(w, StopReason{std::string("END")});
  w.end_array();
  EXPECT_EQ(
      w.take(),
      R"([{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4,"prompt_tokens_details":null},null,7,"END"])");
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
}

}  // namespace
}  // namespace serverd::api
