// serverd started the way vLLM is started: `serverd serve MODEL` with a full `vllm serve` launch line on a
// tiny local model (written by model-writer; the engine on `--device` from ENGINE_TEST_DEVICE, cpu by
// default). Flags serverd already behaves by each log their one line, the honoured ones show in the API
// (served names, keys, the template file, default kwargs, the role, forced usage, no prefix caching,
// request logs), and flags it cannot honour stop it at start with exit code 2 and a sentence.
// SERVERD_BINARY in the environment overrides the path compiled in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <fstream>
#include <regex>

#include "engine/model_writer/model_writer.h"
#include "tests/support/child_process.h"
#include "tests/support/environment.h"
#include "tests/support/serverd/http_test_client.h"
#include "tests/support/serverd/serving_wait.h"
#include "tests/support/serverd/test_certificates.h"
#include "tests/support/temp_dir.h"

namespace {

using testing::HasSubstr;
using testing::Not;
using testing_support::ChildProcess;
using testing_support::TempDir;

const std::string& serverd_binary() {
  static const std::string path = testing_support::env_or("SERVERD_BINARY", SERVERD_BINARY);
  return path;
}

// The variables serverd reads, set for the test alone (an empty value unsets one).
std::map<std::string, std::string> environment(std::map<std::string, std::string> set = {}) {
  std::map<std::string, std::string> env = {
      {"VLLM_API_KEY", ""}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN", ""}, {"VLLM_CPU_KVCACHE_SPACE", "1"}};
  for (auto& [name, value] : set) env[name] = value;
  return env;
}

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

class ServerdVllmLaunch : public testing::Test {
 protected:
  void SetUp() override {
    engine::tools::ModelWriterOptions model;
    model.arch = engine::model::Architecture::Qwen3;
    model.out_dir = dir_ / "model";
    model.seed = 5;
    engine::tools::write_model(model);
    // A template that shows what reaches it: the roles, the content, and a default kwarg.
    std::ofstream(dir_ / "template.jinja")
        << "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n[{{ greeting }}]{% endif %}";
  }

  std::string model_dir() const { return (dir_ / "model").string(); }

  // Runs serverd with `flags` after the model until it exits; its exit code.
  int refused(std::vector<std::string> flags, std::string& err, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {
        serverd_binary(), "serve",     model_dir(), "--device", testing_support::engine_test_device(),
        "--host",         "127.0.0.1", "--port",    "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ChildProcess serverd(argv, environment(std::move(env)));
    const int status = serverd.wait();
    err = serverd.err();
    return status;
  }

  TempDir dir_;
};

TEST_F(ServerdVllmLaunch, AFullVllmLaunchLineServes) {
  ChildProcess serverd({serverd_binary(),
                        "serve",
                        model_dir(),
                        "--device",
                        testing_support::engine_test_device(),
                        "--host",
                        "127.0.0.1",
                        "--port=0",
                        "--served-model-name",
                        "tiny",
                        "tiny-alias",
                        "--api-key",
                        "sk-a",
                        "sk-b",
                        "--max_model_len",
                        "1k",
                        "--max-num-seqs",
                        "8",
                        "--max-num-batched-tokens",
                        "1K",
                        "--block-size",
                        "16",
                        "-tp",
                        "1",
                        "--pipeline-parallel-size",
                        "1",
                        "--dtype",
                        "auto",
                        "--load-format",
                        "safetensors",
                        "--kv-cache-dtype",
                        "auto",
                        "--trust-remote-code",
                        "--no-enable-prefix-caching",
                        "--enable-chunked-prefill",
                        "--disable-log-stats",
                        "--enable-log-requests",
                        "--uvicorn-log-level",
                        "warning",
                        "--swap-space",
                        "4",
                        "--seed",
                        "3",
                        "--chat-template",
                        (dir_ / "template.jinja").string(),
                        "--chat-template-content-format",
                        "string",
                        "--default-chat-template-kwargs",
                        R"({"greeting": "hello"})",
                        "--response-role",
                        "bot",
                        "--generation-config",
                        "vllm",
                        "--override-generation-config",
                        R"({"temperature": 0})",
                        "--enable-force-include-usage",
                        "--enable-prompt-tokens-details",
                        "--trust-request-chat-template"},
                       environment());
  const auto serving_port = serverd_test::wait_until_serving(serverd, "tiny");
  ASSERT_TRUE(serving_port) << "serverd exited before serving: " << serverd.err();
  const std::uint16_t port = *serving_port;
  const std::string err = serverd.err();
  // One line for each flag taken as it is, and for the checked ones the checkpoint agrees with.
  for (const char* line : {"serverd: --tensor-parallel-size 1: serverd runs the model on one device\n",
                           "serverd: --trust-remote-code: serverd never runs code from a model repository",
                           "serverd: --disable-log-stats: serverd logs no periodic engine statistics",
                           "serverd: --uvicorn-log-level warning: ",
                           "serverd: --swap-space 4: serverd preempts a sequence by recomputing it",
                           "serverd: --load-format safetensors: the model is a safetensors directory"}) {
    EXPECT_THAT(err, HasSubstr(line));
  }
  EXPECT_THAT(err, HasSubstr("max_model_len 1000)"));

  const std::vector<std::string> auth = {"Authorization: Bearer sk-b"};
  EXPECT_EQ(serverd_test::http_request(port, "GET", "/v1/models").status, 401);
  const auto models = json(serverd_test::http_request(port, "GET", "/v1/models", {}, auth).body);
  ASSERT_EQ(models["data"].Size(), 2u);
  EXPECT_STREQ(models["data"][1]["id"].GetString(), "tiny-alias");

  // The template file, the default kwarg, developer as system.
  const std::string messages =
      R"("messages": [{"role": "developer", "content": "Be brief"}, {"role": "user", "content": "Hi"}])";
  const auto tokens = json(serverd_test::http_request(port, "POST", "/tokenize", "{" + messages + "}").body);
  ASSERT_TRUE(tokens.HasMember("tokens"));
  rapidjson::StringBuffer ids;
  rapidjson::Writer<rapidjson::StringBuffer> writer(ids);
  tokens["tokens"].Accept(writer);
  const auto text = json(
      serverd_test::http_request(port, "POST", "/detokenize", std::string(R"({"tokens": )") + ids.GetString() + "}")
          .body);
  EXPECT_STREQ(
      text["prompt"].GetString(),
      "<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n[hello]");

  // A chat through an alias: the first name reported, the response role, usage forced into the stream.
  serverd_test::HttpConnection c(port);
  c.send_request("POST", "/v1/chat/completions",
                 R"({"model": "tiny-alias", "max_tokens": 3, "ignore_eos": true, "stream": true, )" + messages + "}",
                 auth);
  EXPECT_EQ(c.read_response_header().status, 200);
  std::vector<std::string> events;
  while (auto event = c.next_event()) events.push_back(*event);
  ASSERT_GE(events.size(), 3u);
  EXPECT_THAT(events.front(), HasSubstr(R"("model":"tiny")"));
  EXPECT_THAT(events.front(), HasSubstr(R"("role":"bot")"));
  EXPECT_EQ(events.back(), "[DONE]");
  const auto usage = json(events[events.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"].GetInt(), 3);

  // No prefix caching: the same prompt twice is computed twice.
  for (int i = 0; i < 2; ++i) {
    const auto reply = serverd_test::http_request(
        port, "POST", "/v1/completions",
        R"({"model": "tiny", "prompt": "the same prompt, long enough to fill one block or two", "max_tokens": 1})",
        auth);
    ASSERT_EQ(reply.status, 200) << reply.body;
    EXPECT_TRUE(json(reply.body)["usage"]["prompt_tokens_details"].IsNull());
  }
  const auto metrics = serverd_test::http_request(port, "GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"tiny\"} 0\n"));
  EXPECT_THAT(metrics, HasSubstr("vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"tiny\"} 0\n"));
  EXPECT_THAT(metrics, HasSubstr("enable_prefix_caching=\"False\""));
  EXPECT_THAT(serverd.err(), HasSubstr("serverd: request chatcmpl-"));  // --enable-log-requests

  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

TEST_F(ServerdVllmLaunch, FlagsItCannotHonourStopItAtStart) {
  std::string err;
  EXPECT_EQ(refused({"--tensor-parallel-size", "2"}, err), 2);
  EXPECT_THAT(err, HasSubstr("serverd: --tensor-parallel-size 2: serverd runs a model on one device"));
  EXPECT_EQ(refused({"--lora-modules", "sql=/adapters/sql"}, err), 2);
  EXPECT_THAT(err, HasSubstr("serverd: --lora-modules: serverd serves no LoRA adapters"));
  EXPECT_NE(refused({"--ssl-keyfile", "/tls/key.pem"}, err), 0);  // a key without a certificate
  EXPECT_THAT(err, HasSubstr("--ssl-certfile is empty"));
  EXPECT_EQ(refused({"--dtype", "bfloat16"}, err), 2);  // the tiny model is float32
  EXPECT_THAT(err, HasSubstr("--dtype bfloat16: the checkpoint's weights are float32"));
}

// Waits for serverd's "serving" line; false when it exits first.
bool wait_serving(ChildProcess& serverd) {
  return testing_support::eventually(
             [&] { return serverd.err().find("serving '") != std::string::npos || !serverd.running(); },
             std::chrono::seconds(120)) &&
         serverd.running();
}

// The listener flags: a Unix socket under a root path, CORS preflights, and TLS with vLLM's --ssl-* flags.
TEST_F(ServerdVllmLaunch, ListenerFlagsServeOverAUnixSocketAndTls) {
  const std::string socket = (dir_ / "serverd.sock").string();
  {
    ChildProcess serverd({serverd_binary(), "serve", model_dir(), "--device", testing_support::engine_test_device(),
                          "--uds", socket, "--root-path", "/llm", "--allowed-origins", R"(["https://ui.example"])"},
                         environment());
    ASSERT_TRUE(wait_serving(serverd)) << serverd.err();
    EXPECT_THAT(serverd.err(), HasSubstr("on unix:" + socket));
    serverd_test::ClientOptions uds;
    uds.uds = socket;
    EXPECT_EQ(serverd_test::http_request(uds, "GET", "/llm/v1/models").status, 200);
    EXPECT_EQ(serverd_test::http_request(uds, "GET", "/v1/models").status, 200);  // unprefixed paths keep working
    const auto allowed =
        serverd_test::http_request(uds, "OPTIONS", "/llm/v1/chat/completions", {},
                                   {"Origin: https://ui.example", "Access-Control-Request-Method: POST"});
    EXPECT_EQ(allowed.status, 200);
    EXPECT_EQ(allowed.header("access-control-allow-origin"), "https://ui.example");
    const auto refused_origin = serverd_test::http_request(
        uds, "OPTIONS", "/v1/models", {}, {"Origin: https://other.example", "Access-Control-Request-Method: GET"});
    EXPECT_EQ(refused_origin.status, 400);
    serverd.signal(SIGTERM);
    EXPECT_EQ(serverd.wait(), 0) << serverd.err();
  }
  EXPECT_FALSE(std::filesystem::exists(socket));  // removed at shutdown

  const auto certificates = serverd_test::write_test_certificates(dir_.path());
  ChildProcess serverd(
      {serverd_binary(), "serve", model_dir(), "--device", testing_support::engine_test_device(), "--host", "127.0.0.1",
       "--port", "0", "--ssl-certfile", certificates.server_certificate, "--ssl-keyfile", certificates.server_key},
      environment());
  const auto tls_port = serverd_test::wait_until_serving(serverd, "[^']*");  // named after its path
  ASSERT_TRUE(tls_port) << serverd.err();
  EXPECT_THAT(serverd.err(), HasSubstr(" (TLS)"));
  serverd_test::ClientOptions tls;
  tls.port = *tls_port;
  tls.tls = true;
  tls.ca_file = certificates.ca_certificate;
  EXPECT_EQ(serverd_test::http_request(tls, "GET", "/v1/models").status, 200);
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

TEST_F(ServerdVllmLaunch, ALongerContextThanTrainedNeedsTheEnvironment) {
  std::string err;
  EXPECT_EQ(refused({"--max-model-len", "4k"}, err), 2);
  EXPECT_THAT(err, HasSubstr("--max-model-len 4000 is longer than the model's trained length of 2048 positions"));
  EXPECT_THAT(err, HasSubstr("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"));
  // Allowed, it starts (and is stopped here once it serves).
  ChildProcess serverd({serverd_binary(), "serve", model_dir(), "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0", "--max-model-len", "4k"},
                       environment({{"VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"}}));
  ASSERT_TRUE(testing_support::eventually(
      [&] { return serverd.err().find("serving '") != std::string::npos || !serverd.running(); },
      std::chrono::seconds(120)));
  EXPECT_THAT(serverd.err(), HasSubstr("allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"));
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

// A RoPE scaling stretches the trained length, as vLLM derives it: linear by 4 over 2048 positions is 8192.
TEST_F(ServerdVllmLaunch, TheRopeScalingFactorStretchesTheTrainedLength) {
  engine::tools::ModelWriterOptions model;
  model.arch = engine::model::Architecture::Qwen3;
  model.out_dir = dir_ / "model";
  model.seed = 5;
  model.rope_scaling = engine::model::RopeType::Linear;
  engine::tools::write_model(model);
  std::string err;
  EXPECT_EQ(refused({"--max-model-len", "9000"}, err), 2);
  EXPECT_THAT(err, HasSubstr("--max-model-len 9000 is longer than the model's trained length of 8192 positions"));
  ChildProcess serverd({serverd_binary(), "serve", model_dir(), "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0", "--max-model-len", "8192"},
                       environment());
  ASSERT_TRUE(testing_support::eventually(
      [&] { return serverd.err().find("serving '") != std::string::npos || !serverd.running(); },
      std::chrono::seconds(120)));
  EXPECT_THAT(serverd.err(), HasSubstr("max_model_len 8192"));
  EXPECT_THAT(serverd.err(), Not(HasSubstr("VLLM_ALLOW_LONG_MAX_MODEL_LEN")));
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

}  // namespace
