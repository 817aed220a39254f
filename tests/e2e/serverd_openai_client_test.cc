// serverd end to end: a hub name resolved through the fetchd child serverd starts (from the loopback test
// hub, weights as Xet), loaded into the engine (`--device` from ENGINE_TEST_DEVICE, cpu by default), and
// answered for the official `openai` npm client; SIGTERM then stops serverd (exit 0) and its fetchd child.
// SERVERD_BINARY, FETCHD_BINARY, NODE_EXECUTABLE and OPENAI_CLIENT_SCRIPT in the environment override the
// paths compiled in (binaries carried to another machine, scripts/gpu-proof.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>

#include "engine/model_writer/model_writer.h"
#include "tests/hub/test_hub.h"
#include "tests/support/child_process.h"
#include "tests/support/environment.h"
#include "tests/support/serverd/serving_wait.h"
#include "tests/support/temp_dir.h"

namespace {

using testing::HasSubstr;
using testing_support::ChildProcess;
using testing_support::TempDir;

const std::string& serverd_binary() {
  static const std::string path = testing_support::env_or("SERVERD_BINARY", SERVERD_BINARY);
  return path;
}

// serverd's environment: the test hub, a fresh HF_HOME and the fetchd binary it starts as its child.
std::map<std::string, std::string> serverd_environment(const TempDir& dir, const testing_support::TestHub& hub) {
  return {{"HF_HOME", (dir / "home").string()},
          {"HF_ENDPOINT", hub.endpoint()},
          {"FETCHD_BINARY", testing_support::env_or("FETCHD_BINARY", FETCHD_BINARY)}};
}

// Runs the official client's script against serverd on `port`: node openai_client.mjs BASE MODEL KEY [SUITE].
// Returns its exit status; `output` receives what it printed.
int run_openai_client(std::uint16_t port, const std::string& model, const std::string& api_key,
                      const std::string& suite, std::string& output) {
  return testing_support::run_command("'" + testing_support::env_or("NODE_EXECUTABLE", NODE_EXECUTABLE) + "' '" +
                                          testing_support::env_or("OPENAI_CLIENT_SCRIPT", OPENAI_CLIENT_SCRIPT) +
                                          "' http://127.0.0.1:" + std::to_string(port) + "/v1 " + model + " " +
                                          api_key + (suite.empty() ? "" : " " + suite),
                                      output);
}

// The tiny random Qwen3 model the tests serve, written to `out`.
void write_tiny_qwen3(const std::filesystem::path& out, std::uint64_t seed) {
  engine::tools::ModelWriterOptions model;
  model.arch = engine::model::Architecture::Qwen3;
  model.out_dir = out;
  model.seed = seed;
  engine::tools::write_model(model);
}

TEST(ServerdOpenAiClient, HubModelThroughFetchdChildServesTheOpenAiClient) {
  TempDir dir;
  write_tiny_qwen3(dir / "model", 21);

  testing_support::TestHub hub;
  hub.set_store_lfs_as_xet(true);
  hub.add_repository_from_folder("demo/tiny", dir / "model");

  ChildProcess serverd({serverd_binary(), "--model", "demo/tiny", "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0", "--api-key", "sk-test"},
                       serverd_environment(dir, hub));
  const auto port = serverd_test::wait_until_serving(serverd, "demo/tiny");
  ASSERT_TRUE(port) << "serverd exited before serving: " << serverd.err();
  const std::string err = serverd.err();
  EXPECT_THAT(err, HasSubstr("through fetchd at unix:"));

  std::string output;
  const int status = run_openai_client(*port, "demo/tiny", "sk-test", "", output);
  EXPECT_EQ(status, 0) << output << serverd.err();
  for (const char* check :
       {"models", "completions", "chat", "chat streaming with usage", "n > 1", "logprobs", "stop strings",
        "seed reproducibility", "errors", "64 concurrent streams match their runs alone",
        "a client that disconnects mid-stream is cancelled", "responses", "responses streaming",
        "response_format json_schema", "beta parse", "structured_outputs regex", "tool_choice named and required",
        "responses text.format"}) {
    EXPECT_THAT(output, HasSubstr(std::string("ok ") + check + "\n")) << output;
  }

  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
  EXPECT_THAT(serverd.err(), HasSubstr("fetchd: SIGTERM, stopping"));
}

// A model with sentence-transformers files serves embeddings under --runner auto, to the official client.
TEST(ServerdOpenAiClient, ASentenceTransformersModelServesEmbeddingsToTheOpenAiClient) {
  TempDir dir;
  write_tiny_qwen3(dir / "model", 23);
  std::ofstream(dir / "model" / "modules.json")
      << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
             {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";
  std::filesystem::create_directory(dir / "model" / "1_Pooling");
  std::ofstream(dir / "model" / "1_Pooling" / "config.json")
      << R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true, "include_prompt": true})";
  testing_support::TestHub hub;
  hub.add_repository_from_folder("demo/embed", dir / "model");

  ChildProcess serverd({serverd_binary(), "--model", "demo/embed", "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0"},
                       serverd_environment(dir, hub));
  const auto port = serverd_test::wait_until_serving(serverd, "demo/embed");
  ASSERT_TRUE(port) << "serverd exited before serving: " << serverd.err();
  EXPECT_THAT(serverd.err(), HasSubstr("--runner auto resolved to --runner pooling"));

  std::string output;
  const int status = run_openai_client(*port, "demo/embed", "none", "embeddings", output);
  EXPECT_EQ(status, 0) << output << serverd.err();
  EXPECT_THAT(output, HasSubstr("ok embeddings\n")) << output;
  EXPECT_THAT(output, HasSubstr("ok a pooling model generates nothing\n")) << output;
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

// Tool calling and reasoning flags: a replayed tool history (content null, arguments as JSON text, a tool
// message) and chat replies through the parsers, in the shapes the official client reads.
TEST(ServerdOpenAiClient, ToolCallAndReasoningParsersServeTheOpenAiClient) {
  TempDir dir;
  write_tiny_qwen3(dir / "model", 22);
  testing_support::TestHub hub;
  hub.add_repository_from_folder("demo/tiny", dir / "model");

  ChildProcess serverd({serverd_binary(), "--model", "demo/tiny", "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0", "--enable-auto-tool-choice", "--tool-call-parser",
                        "hermes", "--reasoning-parser", "qwen3"},
                       serverd_environment(dir, hub));
  const auto port = serverd_test::wait_until_serving(serverd, "demo/tiny");
  ASSERT_TRUE(port) << "serverd exited before serving: " << serverd.err();
  const std::string err = serverd.err();

  std::string output;
  const int status = run_openai_client(*port, "demo/tiny", "none", "tools", output);
  EXPECT_EQ(status, 0) << output << serverd.err();
  EXPECT_THAT(output, HasSubstr("ok tool calls and reasoning\n")) << output;
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

// A scripted model (its greedy reply to every prompt is a reasoning block and two hermes calls) makes the
// real binary parse real calls: the official client reads them whole, streamed and through /v1/responses.
TEST(ServerdOpenAiClient, RealToolCallsFromAScriptedModelReachTheOpenAiClient) {
  TempDir dir;
  engine::tools::ModelWriterOptions model;
  model.arch = engine::model::Architecture::Qwen3;
  model.out_dir = dir / "model";
  model.script = {"<think>\n",
                  "The user wants the weather in two cities.\n",
                  "</think>\n\n",
                  "<tool_call>\n",
                  "{\"name\": \"get_weather\", ",
                  "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n",
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"};
  engine::tools::write_model(model);
  testing_support::TestHub hub;
  hub.add_repository_from_folder("demo/scripted", dir / "model");

  ChildProcess serverd({serverd_binary(), "serve", "demo/scripted", "--device", testing_support::engine_test_device(),
                        "--host", "127.0.0.1", "--port", "0", "--enable-auto-tool-choice", "--tool-call-parser",
                        "hermes", "--reasoning-parser", "qwen3"},
                       serverd_environment(dir, hub));
  const auto port = serverd_test::wait_until_serving(serverd, "demo/scripted");
  ASSERT_TRUE(port) << "serverd exited before serving: " << serverd.err();

  std::string output;
  const int status = run_openai_client(*port, "demo/scripted", "none", "scripted", output);
  EXPECT_EQ(status, 0) << output << serverd.err();
  for (const char* check :
       {"a real tool call, whole", "a real tool call, streamed", "parallel_tool_calls false keeps the first call",
        "tool_choice none leaves the text as content", "a real tool call through responses"}) {
    EXPECT_THAT(output, HasSubstr(std::string("ok ") + check + "\n")) << output;
  }
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

// --revision names a branch other than main and --download-dir a cache outside HF_HOME: serverd serves the
// branch's commit from that directory.
TEST(ServerdOpenAiClient, RevisionAndDownloadDirCarryThrough) {
  TempDir dir;
  engine::tools::ModelWriterOptions model;
  model.arch = engine::model::Architecture::Llama;
  model.out_dir = dir / "model";
  engine::tools::write_model(model);

  testing_support::TestHub hub;
  hub.add_repository_from_folder("demo/tiny", dir / "model");
  std::vector<testing_support::HubFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "model")) {
    const auto bytes = testing_support::read_file(entry.path());
    const std::string name = entry.path().filename().string();
    files.push_back(
        {name, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name.ends_with(".safetensors")});
  }
  files.push_back({"README.md", "the dev branch\n"});
  const std::string dev_commit = hub.commit("demo/tiny", "dev", files);

  const auto cache = dir / "elsewhere" / "cache";
  ChildProcess serverd({serverd_binary(), "--model", "demo/tiny", "--revision", "dev", "--download-dir", cache.string(),
                        "--device", testing_support::engine_test_device(), "--host", "127.0.0.1", "--port", "0"},
                       serverd_environment(dir, hub));
  ASSERT_TRUE(testing_support::eventually(
      [&] { return serverd.err().find("serving 'demo/tiny'") != std::string::npos || !serverd.running(); },
      std::chrono::seconds(120)))
      << serverd.err();
  ASSERT_THAT(serverd.err(), HasSubstr("serving 'demo/tiny'")) << "serverd exited before serving";
  EXPECT_THAT(serverd.err(), HasSubstr("demo/tiny at " + dev_commit + " is " + cache.string() +
                                       "/models--demo--tiny/snapshots/" + dev_commit));
  EXPECT_TRUE(std::filesystem::exists(cache / "models--demo--tiny" / "snapshots" / dev_commit / "config.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "home" / "hub" / "models--demo--tiny"));
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(), 0) << serverd.err();
}

// SIGTERM while the model still downloads (a pod deleted during its pull) stops the fetchd child, whose
// download ends with its partial file kept, and serverd exits 0 at once instead of finishing the download.
TEST(ServerdOpenAiClient, SigtermWhileDownloadingStopsFetchdAndExits) {
  TempDir dir;
  engine::tools::ModelWriterOptions model;
  model.arch = engine::model::Architecture::Qwen3;
  model.out_dir = dir / "model";
  engine::tools::write_model(model);
  testing_support::TestHub hub;
  hub.add_repository_from_folder("demo/tiny", dir / "model");
  hub.faults().set_stall_at(65536);
  auto environment = serverd_environment(dir, hub);
  environment["HF_HUB_DOWNLOAD_TIMEOUT"] = "600";  // the stall must outlast the test, not time out

  ChildProcess serverd({serverd_binary(), "serve", "demo/tiny", "--host", "127.0.0.1", "--port", "0"}, environment);
  const auto blobs = dir / "home" / "hub" / "models--demo--tiny" / "blobs";
  const auto partial = [&]() -> std::optional<std::filesystem::path> {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(blobs, ec)) {
      if (entry.path().extension() == ".incomplete" && entry.file_size(ec) == 65536) return entry.path();
    }
    return std::nullopt;
  };
  ASSERT_TRUE(testing_support::eventually([&] { return partial().has_value() || !serverd.running(); },
                                          std::chrono::seconds(60)))
      << serverd.err();
  ASSERT_TRUE(partial()) << serverd.err();
  const auto kept = *partial();
  serverd.signal(SIGTERM);
  EXPECT_EQ(serverd.wait(std::chrono::seconds(30)), 0) << serverd.err();
  EXPECT_THAT(serverd.err(), HasSubstr("serverd: SIGTERM while loading the model; stopped"));
  EXPECT_THAT(serverd.err(), HasSubstr("fetchd: SIGTERM, stopping"));
  EXPECT_EQ(std::filesystem::file_size(kept), 65536u);  // resumable by the next start
  EXPECT_TRUE(hub.wait_for_no_connections(std::chrono::seconds(30)));
}

// fetchd's refusal reaches serverd's user as fetchd's own sentence and exit code (3: not found).
TEST(ServerdOpenAiClient, FetchdErrorsKeepTheirSentenceAndExitCode) {
  TempDir dir;
  testing_support::TestHub hub;
  ChildProcess serverd({serverd_binary(), "--model", "org/missing", "--host", "127.0.0.1", "--port", "0"},
                       serverd_environment(dir, hub));
  EXPECT_EQ(serverd.wait(), 3) << serverd.err();
  EXPECT_THAT(serverd.err(), HasSubstr("repository 'org/missing' was not found"));
}

}  // namespace
