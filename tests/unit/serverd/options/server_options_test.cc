#include "serverd/options/server_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/flags.h"
#include "fetchd/request/fetch_error.h"

namespace serverd {
namespace {

using ::testing::HasSubstr;

std::optional<ServerOptions> parse(std::vector<std::string> args, std::optional<std::string> key = std::nullopt) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_server_options(argv, key);
}

TEST(ServerOptions, DefaultsAsVllm) {
  const auto o = parse({"--model", "Qwen/Qwen3-0.6B"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->host, "0.0.0.0");
  EXPECT_EQ(o->port, 8000u);
  EXPECT_EQ(o->served_model_name, "Qwen/Qwen3-0.6B");  // the name typed, never a commit directory
  EXPECT_EQ(o->device, "auto");
  EXPECT_EQ(o->block_size, 16u);
  EXPECT_EQ(o->reference.repo_id, "Qwen/Qwen3-0.6B");
  EXPECT_TRUE(o->api_key.empty());
}

TEST(ServerOptions, ReadsEveryFlag) {
  const auto o = parse({"--model",
                        "org/repo:Q4_K_M",
                        "--revision",
                        "v2",
                        "--download-dir",
                        "/models",
                        "--served-model-name",
                        "tiny",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--max-model-len",
                        "4096",
                        "--max-num-seqs",
                        "8",
                        "--max-num-batched-tokens",
                        "512",
                        "--block-size",
                        "32",
                        "--gpu-memory-utilization",
                        "0.5",
                        "--enforce-eager",
                        "--api-key",
                        "k",
                        "--device",
                        "cpu",
                        "--fetchd",
                        "unix:/run/fetchd.sock",
                        "--verbose"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->reference.quant, "Q4_K_M");
  EXPECT_EQ(o->revision, "v2");
  EXPECT_EQ(o->download_dir, "/models");
  EXPECT_EQ(o->served_model_name, "tiny");
  EXPECT_EQ(o->port, 0u);
  EXPECT_EQ(o->max_model_len, 4096u);
  EXPECT_EQ(o->max_num_seqs, 8u);
  EXPECT_EQ(o->max_num_batched_tokens, 512u);
  EXPECT_EQ(o->block_size, 32u);
  EXPECT_EQ(o->gpu_memory_utilization, 0.5);
  EXPECT_TRUE(o->enforce_eager);
  EXPECT_EQ(o->api_key, "k");
  EXPECT_EQ(o->device, "cpu");
  EXPECT_EQ(o->fetchd_address, "unix:/run/fetchd.sock");
  EXPECT_TRUE(o->verbose);
}

TEST(ServerOptions, ApiKeyFallsBackToTheEnvironment) {
  EXPECT_EQ(parse({"--model", "a/b"}, "env-key")->api_key, "env-key");
  EXPECT_EQ(parse({"--model", "a/b", "--api-key", "flag"}, "env-key")->api_key, "flag");
}

TEST(ServerOptions, HelpReturnsNothing) {
  EXPECT_FALSE(parse({"--help"}));
}

TEST(ServerOptions, RefusesMissingModelAndBadValues) {
  EXPECT_THROW(parse({}), base::UsageError);
  EXPECT_THROW(parse({"--model", "a/b", "--device", "tpu"}), base::UsageError);
  EXPECT_THROW(parse({"--model", "a/b", "--port", "65536"}), base::UsageError);
  EXPECT_THROW(parse({"--model", "a/b", "--block-size", "12"}), base::UsageError);  // vLLM's choices only
  EXPECT_THROW(parse({"--model", "not a repo"}), fetchd::FetchError);
}

// The error a bad argument list gets.
std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const base::UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ServerOptions, ToolAndReasoningFlagsAsVllm) {
  const auto o = parse({"--model", "a/b", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                        "--reasoning-parser", "qwen3", "--exclude-tools-when-tool-choice-none"});
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->enable_auto_tool_choice);
  EXPECT_EQ(o->tool_call_parser, "hermes");
  EXPECT_EQ(o->reasoning_parser, "qwen3");
  EXPECT_TRUE(o->exclude_tools_when_tool_choice_none);
  const auto defaults = parse({"--model", "a/b"});
  EXPECT_FALSE(defaults->enable_auto_tool_choice);
  EXPECT_TRUE(defaults->tool_call_parser.empty());
  EXPECT_TRUE(defaults->reasoning_parser.empty());
  // A parser alone is allowed (vLLM starts with it too).
  EXPECT_TRUE(parse({"--model", "a/b", "--tool-call-parser", "mistral"}));
}

TEST(ServerOptions, ToolFlagsRefusedAsVllmRefusesThem) {
  EXPECT_EQ(usage_error({"--model", "a/b", "--enable-auto-tool-choice"}),
            "--enable-auto-tool-choice requires --tool-call-parser");
  EXPECT_THAT(usage_error({"--model", "a/b", "--tool-call-parser", "nope"}), HasSubstr("hermes"));
  EXPECT_THAT(usage_error({"--model", "a/b", "--tool-call-parser", "nope"}), HasSubstr("nope"));
  EXPECT_THAT(usage_error({"--model", "a/b", "--reasoning-parser", "nope"}), HasSubstr("deepseek_r1"));
}

}  // namespace
}  // namespace serverd
