// /metrics text under vLLM's names, labels and buckets; the response pieces in vLLM's shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "serverd/api/api_error.h"
#include "serverd/api/metrics.h"
#include "serverd/api/response_json.h"
#include "tests/support/serverd/fake_generator.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Metrics, VllmNamesLabelsAndBuckets) {
  Metrics metrics;
  metrics.set_model_name("m");
  metrics.add_prompt_tokens(7);
  metrics.add_generation_tokens(3);
  metrics.observe_time_to_first_token(0.003);
  metrics.observe_inter_token_latency(0.02);
  metrics.record_finished("stop", 0.4);
  metrics.record_finished("length", 100.0);
  GeneratorStats stats;
  stats.running = 2;
  stats.waiting = 1;
  stats.kv_cache_usage = 0.25;
  stats.prefix_cache_queries = 10;
  stats.prefix_cache_hits = 4;
  const std::string text = metrics.render(stats);
  const std::string labels = R"({model_name="m",engine="0")";
  EXPECT_THAT(text, HasSubstr("# TYPE vllm:num_requests_running gauge\n"));
  EXPECT_THAT(text, HasSubstr("vllm:num_requests_running" + labels + "} 2.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:num_requests_waiting" + labels + "} 1.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:kv_cache_usage_perc" + labels + "} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE vllm:prompt_tokens counter\n"));
  EXPECT_THAT(text, HasSubstr("vllm:prompt_tokens_total" + labels + "} 7.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:generation_tokens_total" + labels + "} 3.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:prefix_cache_queries_total" + labels + "} 10.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:prefix_cache_hits_total" + labels + "} 4.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:request_success_total" + labels + R"(,finished_reason="stop"} 1.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:request_success_total" + labels + R"(,finished_reason="abort"} 0.0)"));
  // Buckets are cumulative and inclusive, ending at +Inf.
  EXPECT_THAT(text, HasSubstr("vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.001"} 0.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.005"} 1.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="2560.0"} 1.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:inter_token_latency_seconds_bucket" + labels + R"(,le="0.025"} 1.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:e2e_request_latency_seconds_bucket" + labels + R"(,le="0.5"} 1.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:e2e_request_latency_seconds_bucket" + labels + R"(,le="120.0"} 2.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:e2e_request_latency_seconds_bucket" + labels + R"(,le="+Inf"} 2.0)"));
  EXPECT_THAT(text, HasSubstr("vllm:e2e_request_latency_seconds_count" + labels + "} 2.0\n"));
  EXPECT_THAT(text, HasSubstr("vllm:e2e_request_latency_seconds_sum" + labels + "} 100.4\n"));
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
