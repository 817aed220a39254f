// Tool calls and reasoning in chat completions over loopback, as `vllm serve --enable-auto-tool-choice
// --tool-call-parser hermes --reasoning-parser qwen3` answers them: whole and streamed messages, several
// calls and their indices, finish_reason, usage's reasoning tokens, n > 1, tool_choice and its refusals,
// and completions left alone. The fake generator's script plays the model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <map>
#include <string>
#include <vector>

#include "tests/support/serverd/api_server_fixture.h"

namespace serverd::api {
namespace {

using serverd_test::bytes;
using serverd_test::expect_error;
using serverd_test::HttpConnection;
using serverd_test::json;
using serverd_test::kEos;
using serverd_test::kImEnd;
using serverd_test::kImStart;
using serverd_test::str;
using ::testing::StartsWith;

constexpr std::string_view kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])";

// Reasoning, then two calls right after it (so no content at all).
constexpr std::string_view kTwoCalls =
    "<think>plan</think><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

std::string chat_body(std::string_view extra) {
  return std::string(R"({"messages": [{"role": "user", "content": "Weather?"}], "tools": )") + std::string(kTools) +
         (extra.empty() ? "" : ", ") + std::string(extra) + "}";
}

struct StreamedChoice {
  std::string reasoning;
  std::string content;
  std::vector<rapidjson::Document> tool_call_pieces;  // each delta.tool_calls[] entry, in order
  std::string finish_reason;
};

struct Streamed {
  std::map<int, StreamedChoice> choices;
  rapidjson::Document usage;  // the include_usage chunk's, if any
  bool done = false;
};

class ToolCallsTest : public serverd_test::ApiServerTest {
 protected:
  // Chat prompts get `reply` and then EOS.
  void start_with(std::string reply, bool parsers = true) {
    generator_.set_script([reply](const GenerationRequest& request) {
      std::vector<std::int32_t> out = request.prompt_tokens.front() == kImStart ? bytes(reply) : request.prompt_tokens;
      out.push_back(kEos);
      return out;
    });
    start([parsers](ApiServerOptions& o) {
      if (!parsers) return;
      o.api.parsers.enable_auto_tool_choice = true;
      o.api.parsers.tool_call_parser = "hermes";
      o.api.parsers.reasoning_parser = "qwen3";
    });
  }

  rapidjson::Document whole(const std::string& body) {
    const auto reply = post("/v1/chat/completions", body);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json(reply.body);
  }

  Streamed stream(const std::string& body) {
    HttpConnection c(server_->port());
    c.send_request("POST", "/v1/chat/completions", body);
    EXPECT_EQ(c.read_response_header().status, 200);
    Streamed s;
    while (auto event = c.next_event()) {
      if (*event == "[DONE]") {
        s.done = true;
        continue;
      }
      auto chunk = json(*event);
      if (chunk.HasMember("usage") && chunk["usage"].IsObject())
        s.usage.CopyFrom(chunk["usage"], s.usage.GetAllocator());
      for (auto& choice : chunk["choices"].GetArray()) {
        StreamedChoice& out = s.choices[choice["index"].GetInt()];
        const auto& delta = choice["delta"];
        if (delta.HasMember("reasoning")) out.reasoning += str(delta["reasoning"]);
        if (delta.HasMember("content")) out.content += str(delta["content"]);
        if (delta.HasMember("tool_calls")) {
          for (const auto& piece : delta["tool_calls"].GetArray()) {
            rapidjson::Document copy;
            copy.CopyFrom(piece, copy.GetAllocator());
            out.tool_call_pieces.push_back(std::move(copy));
          }
        }
        if (!choice["finish_reason"].IsNull()) out.finish_reason = str(choice["finish_reason"]);
      }
    }
    return s;
  }
};

TEST_F(ToolCallsTest, WholeResponseHasReasoningAndEveryCall) {
  start_with(std::string(kTwoCalls));
  const auto d = whole(chat_body(""));
  const auto& choice = d["choices"][0];
  const auto& message = choice["message"];
  EXPECT_TRUE(message["content"].IsNull());
  EXPECT_EQ(str(message["reasoning"]), "plan");
  ASSERT_EQ(message["tool_calls"].Size(), 2u);
  const auto& first = message["tool_calls"][0];
  EXPECT_THAT(str(first["id"]), StartsWith("chatcmpl-tool-"));
  EXPECT_EQ(str(first["type"]), "function");
  EXPECT_EQ(str(first["function"]["name"]), "get_weather");
  EXPECT_EQ(str(first["function"]["arguments"]), R"({"city": "Paris"})");
  EXPECT_EQ(str(message["tool_calls"][1]["function"]["name"]), "get_time");
  EXPECT_EQ(str(message["tool_calls"][1]["function"]["arguments"]), "{}");
  EXPECT_NE(str(first["id"]), str(message["tool_calls"][1]["id"]));
  EXPECT_EQ(str(choice["finish_reason"]), "tool_calls");
  // One token per byte here: "plan" (4) and the tag bytes held back until each tag closed (6 of "<think>", 7
  // of "</think>"). With Qwen3's tokenizer each tag is one token and only the reasoning's own tokens count.
  EXPECT_EQ(d["usage"]["completion_tokens_details"]["reasoning_tokens"].GetUint64(), 4u + 6u + 7u);
}

// vLLM's include_reasoning: false drops the reasoning from the reply, whole and streamed; the content and the
// calls stay what they are without the think block.
TEST_F(ToolCallsTest, IncludeReasoningFalseLeavesTheReasoningOut) {
  start_with(std::string(kTwoCalls));
  const auto d = whole(chat_body(R"("include_reasoning": false)"));
  const auto& message = d["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning"].IsNull());
  EXPECT_EQ(message["tool_calls"].Size(), 2u);
  const auto s = stream(chat_body(R"("include_reasoning": false, "stream": true)"));
  ASSERT_EQ(s.choices.size(), 1u);
  EXPECT_EQ(s.choices.at(0).reasoning, "");
  EXPECT_EQ(s.choices.at(0).tool_call_pieces.size(), 4u);
}

TEST_F(ToolCallsTest, StreamSendsReasoningThenEachCallsHeaderAndArguments) {
  start_with(std::string(kTwoCalls));
  const auto s = stream(chat_body(R"("stream": true, "stream_options": {"include_usage": true})"));
  ASSERT_TRUE(s.done);
  ASSERT_EQ(s.choices.size(), 1u);
  const StreamedChoice& choice = s.choices.at(0);
  EXPECT_EQ(choice.reasoning, "plan");
  EXPECT_EQ(choice.content, "");  // only the role chunk's ""
  ASSERT_EQ(choice.tool_call_pieces.size(), 4u);
  const auto& header = choice.tool_call_pieces[0];
  EXPECT_EQ(header["index"].GetInt(), 0);
  EXPECT_THAT(str(header["id"]), StartsWith("chatcmpl-tool-"));
  EXPECT_EQ(str(header["type"]), "function");
  EXPECT_EQ(str(header["function"]["name"]), "get_weather");
  EXPECT_FALSE(header["function"].HasMember("arguments"));
  const auto& arguments = choice.tool_call_pieces[1];
  EXPECT_EQ(arguments["index"].GetInt(), 0);
  EXPECT_FALSE(arguments.HasMember("id"));
  EXPECT_EQ(str(arguments["function"]["arguments"]), R"({"city": "Paris"})");
  EXPECT_EQ(choice.tool_call_pieces[2]["index"].GetInt(), 1);
  EXPECT_EQ(str(choice.tool_call_pieces[2]["function"]["name"]), "get_time");
  EXPECT_EQ(str(choice.tool_call_pieces[3]["function"]["arguments"]), "{}");
  EXPECT_EQ(choice.finish_reason, "tool_calls");
  ASSERT_TRUE(s.usage.IsObject());
  EXPECT_EQ(s.usage["completion_tokens_details"]["reasoning_tokens"].GetUint64(), 4u + 6u + 7u);
}

TEST_F(ToolCallsTest, ParallelToolCallsFalseKeepsTheFirstCall) {
  start_with(std::string(kTwoCalls));
  const auto d = whole(chat_body(R"("parallel_tool_calls": false)"));
  const auto& calls = d["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.Size(), 1u);
  EXPECT_EQ(str(calls[0]["function"]["name"]), "get_weather");
  const auto s = stream(chat_body(R"("parallel_tool_calls": false, "stream": true)"));
  EXPECT_EQ(s.choices.at(0).tool_call_pieces.size(), 2u);
}

// vLLM: a whole response that made calls says "tool_calls" even when max_tokens cut it; a stream says so only
// when the sequence stopped.
TEST_F(ToolCallsTest, FinishReasonOnLengthFollowsVllmInBothShapes) {
  const std::string call = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  start_with("</think>" + call + "\nmore text");
  const std::string limit = R"("max_tokens": )" + std::to_string(std::string("</think>").size() + call.size());
  const auto d = whole(chat_body(limit));
  EXPECT_EQ(d["choices"][0]["message"]["tool_calls"].Size(), 1u);
  EXPECT_EQ(str(d["choices"][0]["finish_reason"]), "tool_calls");
  const auto s = stream(chat_body(limit + R"(, "stream": true)"));
  EXPECT_EQ(s.choices.at(0).tool_call_pieces.size(), 2u);
  EXPECT_EQ(s.choices.at(0).finish_reason, "length");
}

TEST_F(ToolCallsTest, ContentBeforeACallAndOneParserPerChoice) {
  start_with("hmm</think>Let me check.<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>");
  const auto d = whole(chat_body(R"("n": 2)"));
  ASSERT_EQ(d["choices"].Size(), 2u);
  std::vector<std::string> ids;
  for (const auto& choice : d["choices"].GetArray()) {
    EXPECT_EQ(str(choice["message"]["reasoning"]), "hmm");
    EXPECT_EQ(str(choice["message"]["content"]), "Let me check.");
    ASSERT_EQ(choice["message"]["tool_calls"].Size(), 1u);
    ids.push_back(str(choice["message"]["tool_calls"][0]["id"]));
  }
  EXPECT_NE(ids[0], ids[1]);
  // Both choices' reasoning counts: "hmm" and 7 bytes of "</think>" each.
  EXPECT_EQ(d["usage"]["completion_tokens_details"]["reasoning_tokens"].GetUint64(), 2u * (3u + 7u));
  const auto s = stream(chat_body(R"("n": 2, "stream": true)"));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s.choices.at(i).reasoning, "hmm");
    EXPECT_EQ(s.choices.at(i).content, "Let me check.");
    ASSERT_EQ(s.choices.at(i).tool_call_pieces.size(), 2u);
    EXPECT_EQ(s.choices.at(i).finish_reason, "tool_calls");
  }
}

TEST_F(ToolCallsTest, ToolChoiceNoneLeavesCallsAsContent) {
  start_with("ok</think><tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>");
  const auto d = whole(chat_body(R"("tool_choice": "none")"));
  const auto& message = d["choices"][0]["message"];
  EXPECT_EQ(str(message["reasoning"]), "ok");  // the reasoning parser still splits
  EXPECT_EQ(str(message["content"]), R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)");
  EXPECT_EQ(message["tool_calls"].Size(), 0u);
  EXPECT_EQ(str(d["choices"][0]["finish_reason"]), "stop");
}

TEST_F(ToolCallsTest, EnableThinkingFalseMakesEverythingContent) {
  start_with("no reasoning here</think>");
  const auto d =
      whole(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false}})");
  const auto& message = d["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning"].IsNull());
  EXPECT_EQ(str(message["content"]), "no reasoning here</think>");
  EXPECT_EQ(d["usage"]["completion_tokens_details"]["reasoning_tokens"].GetUint64(), 0u);
}

// hermes' markers are special tokens in Qwen's vocabulary, so vLLM decodes with skip_special_tokens false when
// it parses tool calls.
TEST_F(ToolCallsTest, ParsingToolCallsKeepsSpecialTokens) {
  generator_.set_script([](const GenerationRequest&) { return std::vector<std::int32_t>{'H', 'i', kImEnd, kEos}; });
  start([](ApiServerOptions& o) {
    o.api.parsers.enable_auto_tool_choice = true;
    o.api.parsers.tool_call_parser = "hermes";
  });
  EXPECT_EQ(str(whole(chat_body(""))["choices"][0]["message"]["content"]), "Hi<|im_end|>");
  EXPECT_EQ(str(whole(chat_body(R"("tool_choice": "none")"))["choices"][0]["message"]["content"]), "Hi");
}

// gpt-oss (--reasoning-parser openai_gptoss): the analysis channel is the reasoning and the final channel
// the content, whole and streamed, with no harmony marker in either. Its markers are special tokens, so
// decoding keeps special tokens in every request, tools or not (<|im_end|> stands for one here).
TEST_F(ToolCallsTest, HarmonyChannelsSplitReasoningFromTheAnswer) {
  generator_.set_script([](const GenerationRequest&) {
    std::vector<std::int32_t> out =
        bytes("<|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final<|message|>Hi");
    out.insert(out.end(), {kImEnd, kEos});
    return out;
  });
  start([](ApiServerOptions& o) { o.api.parsers.reasoning_parser = "openai_gptoss"; });
  const std::string body = R"({"messages": [{"role": "user", "content": "Hello"}])";
  const auto d = whole(body + "}");
  const auto& message = d["choices"][0]["message"];
  EXPECT_EQ(str(message["reasoning"]), "User greets.");
  EXPECT_EQ(str(message["content"]), "Hi<|im_end|>");
  Streamed s = stream(body + R"(, "stream": true})");
  EXPECT_EQ(s.choices[0].reasoning, "User greets.");
  EXPECT_EQ(s.choices[0].content, "Hi<|im_end|>");
}

// gpt-oss's tool call (--tool-call-parser openai after --reasoning-parser openai_gptoss): a harmony message
// to functions.get_weather, ended by <|call|>, an end-of-sequence token (EOS here). The analysis is the
// reasoning, the message a call with json.dumps' arguments, finish_reason "tool_calls", whole and streamed.
TEST_F(ToolCallsTest, HarmonyMessagesToFunctionsAreToolCalls) {
  generator_.set_script([](const GenerationRequest&) {
    std::vector<std::int32_t> out = bytes(
        "<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}");
    out.push_back(kEos);
    return out;
  });
  start([](ApiServerOptions& o) {
    o.api.parsers.enable_auto_tool_choice = true;
    o.api.parsers.tool_call_parser = "openai";
    o.api.parsers.reasoning_parser = "openai_gptoss";
  });
  const auto d = whole(chat_body(""));
  const auto& message = d["choices"][0]["message"];
  EXPECT_EQ(str(message["reasoning"]), "Use the tool.");
  EXPECT_TRUE(message["content"].IsNull());
  ASSERT_EQ(message["tool_calls"].Size(), 1u);
  EXPECT_EQ(str(message["tool_calls"][0]["function"]["name"]), "get_weather");
  EXPECT_EQ(str(message["tool_calls"][0]["function"]["arguments"]), R"({"city": "Paris"})");
  EXPECT_EQ(str(d["choices"][0]["finish_reason"]), "tool_calls");
  Streamed s = stream(chat_body(R"("stream": true)"));
  const StreamedChoice& choice = s.choices[0];
  EXPECT_EQ(choice.reasoning, "Use the tool.");
  EXPECT_EQ(choice.content, "");
  ASSERT_EQ(choice.tool_call_pieces.size(), 2u);
  EXPECT_EQ(str(choice.tool_call_pieces[0]["function"]["name"]), "get_weather");
  EXPECT_EQ(str(choice.tool_call_pieces[1]["function"]["arguments"]), R"({"city": "Paris"})");
  EXPECT_EQ(choice.finish_reason, "tool_calls");
}

TEST_F(ToolCallsTest, WithoutParsersMessagesKeepVllmsShapeAndCompletionsAreUntouched) {
  start_with("<think>x</think>", /*parsers=*/false);
  const auto d = whole(R"({"messages": [{"role": "user", "content": "x"}]})");
  const auto& message = d["choices"][0]["message"];
  EXPECT_EQ(str(message["content"]), "<think>x</think>");
  EXPECT_TRUE(message["reasoning"].IsNull());
  EXPECT_EQ(message["tool_calls"].Size(), 0u);
  EXPECT_FALSE(d["usage"].HasMember("completion_tokens_details"));
}

TEST_F(ToolCallsTest, CompletionsGetNoParsers) {
  start_with("", /*parsers=*/true);
  const auto reply = post("/v1/completions", R"({"prompt": "a</think><tool_call>", "max_tokens": 30})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto d = json(reply.body);
  EXPECT_EQ(str(d["choices"][0]["text"]), "a</think><tool_call>");
  EXPECT_FALSE(d["usage"].HasMember("completion_tokens_details"));
}

TEST_F(ToolCallsTest, ToolChoicesThatCannotBeHonouredAreRefusedByName) {
  start_with("x", /*parsers=*/false);
  expect_error(post("/v1/chat/completions", chat_body("")), 400, "BadRequestError", "tool_choice",
               "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  // "required" and a named function need no parser but structured outputs, which this model (no grammar
  // engine) cannot serve; the tiny-model tests (serverd_structured_outputs_test.cc) serve them.
  expect_error(post("/v1/chat/completions", chat_body(R"("tool_choice": "required")")), 400, "BadRequestError",
               "tool_choice", "'tool_choice' asks for structured outputs");
  expect_error(post("/v1/chat/completions",
                    chat_body(R"("tool_choice": {"type": "function", "function": {"name": "get_time"}})")),
               400, "BadRequestError", "tool_choice", "'tool_choice' asks for structured outputs");
  expect_error(
      post("/v1/chat/completions", chat_body(R"("tool_choice": {"type": "function", "function": {"name": "nope"}})")),
      400, "BadRequestError", "tool_choice", "Tool 'nope' has not been passed in `tools`.");
  expect_error(post("/v1/chat/completions", chat_body(R"("tool_choice": "sometimes")")), 400, "BadRequestError",
               "tool_choice",
               "Invalid value for `tool_choice`: sometimes! Only named tools, \"none\", \"auto\" or \"required\" are "
               "supported.");
  expect_error(
      post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"})"), 400,
      "BadRequestError", "tool_choice", "When using `tool_choice`, `tools` must be set.");
  // "none" needs no parser.
  EXPECT_EQ(post("/v1/chat/completions", chat_body(R"("tool_choice": "none")")).status, 200);
  EXPECT_EQ(generator_.submitted_count(), 1u);
}

}  // namespace
}  // namespace serverd::api
