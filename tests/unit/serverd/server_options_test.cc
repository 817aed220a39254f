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

// vLLM's --max-logprobs (default 20, -1: no limit) and --return-tokens-as-token-ids.
TEST(ServerOptions, LogprobFlags) {
  const auto defaults = parse({"--model", "a/b"});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->max_logprobs, 20);
  EXPECT_FALSE(defaults->return_tokens_as_token_ids);
  const auto o = parse({"--model", "a/b", "--max-logprobs", "-1", "--return-tokens-as-token-ids"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->max_logprobs, -1);
  EXPECT_TRUE(o->return_tokens_as_token_ids);
  EXPECT_EQ(parse({"--model", "a/b", "--max-logprobs=0"})->max_logprobs, 0);
  for (const char* bad : {"-2", "x", "1.5", "99999999999"}) {
    try {
      parse({"--model", "a/b", "--max-logprobs", bad});
      ADD_FAILURE() << bad;
    } catch (const base::UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--max-logprobs takes -1 (no limit) or a whole number from 0")) << bad;
    }
  }
}

}  // namespace
}  // namespace serverd
