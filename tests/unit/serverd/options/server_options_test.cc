#include "serverd/options/server_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/flags.h"
#include "engine/cpu/cpu_set.h"
#include "engine/runtime/engine.h"
#include "fetchd/request/fetch_error.h"

namespace serverd {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::optional<ServerOptions> parse(std::vector<std::string> args, ServerEnvironment env = {}) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_server_options(argv, env);
}

std::string refusal(std::vector<std::string> args, ServerEnvironment env = {}) {
  try {
    parse(std::move(args), std::move(env));
  } catch (const base::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ServerOptions, DefaultsAsVllm) {
  const auto o = parse({"--model", "Qwen/Qwen3-0.6B"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->host, "0.0.0.0");
  EXPECT_EQ(o->port, 8000u);
  EXPECT_THAT(o->served_model_name, ElementsAre("Qwen/Qwen3-0.6B"));  // the name typed, never a commit directory
  EXPECT_EQ(o->device, "auto");
  EXPECT_EQ(o->block_size, 16u);
  EXPECT_EQ(o->reference.repo_id, "Qwen/Qwen3-0.6B");
  EXPECT_TRUE(o->api_key.empty());
  EXPECT_TRUE(o->enable_prefix_caching);
  EXPECT_EQ(o->generation_config, "auto");
  EXPECT_EQ(o->response_role, "assistant");
  EXPECT_FALSE(o->seed);
  EXPECT_TRUE(o->notes.empty());
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
  EXPECT_THAT(o->served_model_name, ElementsAre("tiny"));
  EXPECT_EQ(o->port, 0u);
  EXPECT_EQ(o->max_model_len, 4096u);
  EXPECT_EQ(o->max_num_seqs, 8u);
  EXPECT_EQ(o->max_num_batched_tokens, 512u);
  EXPECT_EQ(o->block_size, 32u);
  EXPECT_EQ(o->gpu_memory_utilization, 0.5);
  EXPECT_TRUE(o->enforce_eager);
  EXPECT_THAT(o->api_key, ElementsAre("k"));
  EXPECT_EQ(o->device, "cpu");
  EXPECT_EQ(o->fetchd_address, "unix:/run/fetchd.sock");
  EXPECT_TRUE(o->verbose);
}

TEST(ServerOptions, TakesTheModelAsVllmServeDoes) {
  EXPECT_EQ(parse({"serve", "org/a", "--port", "1"})->model, "org/a");
  EXPECT_EQ(parse({"org/a"})->model, "org/a");
  EXPECT_EQ(parse({"--model=org/a"})->model, "org/a");
  EXPECT_EQ(parse({"serve", "--port", "1", "--model", "org/a"})->model, "org/a");
  EXPECT_EQ(parse({"org/a", "--model", "org/a"})->model, "org/a");
  EXPECT_THAT(refusal({"org/a", "--model", "org/b"}), HasSubstr("the model is given twice: 'org/a'"));
  EXPECT_THAT(refusal({"org/a", "org/b"}), HasSubstr("unexpected argument 'org/b'"));
  EXPECT_THAT(refusal({"serve"}), HasSubstr("a model is required"));
  EXPECT_THAT(refusal({}), HasSubstr("a model is required"));
}

TEST(ServerOptions, ContextLengthsAreHumanReadable) {
  EXPECT_EQ(parse({"m/x", "--max-model-len", "32k"})->max_model_len, 32000u);
  EXPECT_EQ(parse({"m/x", "--max-model-len", "32K"})->max_model_len, 32768u);
  EXPECT_EQ(parse({"m/x", "--max-model-len=1M"})->max_model_len, 1048576u);
  EXPECT_EQ(parse({"m/x", "--max_model_len", "2k"})->max_model_len, 2000u);  // underscores, as vLLM takes them
  EXPECT_EQ(parse({"m/x", "--max-model-len", "auto"})->max_model_len, 0u);
  EXPECT_EQ(parse({"m/x", "--max-model-len", "-1"})->max_model_len, 0u);
  EXPECT_EQ(parse({"m/x", "--max-num-batched-tokens", "16K"})->max_num_batched_tokens, 16384u);
  EXPECT_EQ(parse({"m/x", "--kv-cache-memory-bytes", "2G"})->kv_cache_memory_bytes, std::uint64_t{2} << 30);
  EXPECT_THAT(refusal({"m/x", "--max-model-len", "1.5K"}), HasSubstr("a fraction cannot take the binary suffix K"));
  EXPECT_THAT(refusal({"m/x", "--max-model-len", "lots"}), HasSubstr("--max-model-len takes a whole number"));
}

TEST(ServerOptions, ServedModelNamesAndApiKeysAreLists) {
  const auto o = parse({"m/x", "--served-model-name", "first", "second", "--api-key", "a", "b", "--port", "1"});
  EXPECT_THAT(o->served_model_name, ElementsAre("first", "second"));
  EXPECT_THAT(o->api_key, ElementsAre("a", "b"));
  EXPECT_EQ(o->port, 1u);
}

TEST(ServerOptions, ApiKeyFallsBackToTheEnvironment) {
  EXPECT_THAT(parse({"--model", "a/b"}, {.api_key = "env-key"})->api_key, ElementsAre("env-key"));
  EXPECT_THAT(parse({"--model", "a/b", "--api-key", "flag"}, {.api_key = "env-key"})->api_key, ElementsAre("flag"));
  EXPECT_TRUE(parse({"--model", "a/b"}, {.api_key = ""})->api_key.empty());
}

TEST(ServerOptions, ReadsVllmEnvironmentVariables) {
  EXPECT_TRUE(parse({"a/b"}, {.allow_long_max_model_len = "1"})->allow_long_max_model_len);
  EXPECT_TRUE(parse({"a/b"}, {.allow_long_max_model_len = "True"})->allow_long_max_model_len);
  EXPECT_FALSE(parse({"a/b"}, {.allow_long_max_model_len = "0"})->allow_long_max_model_len);
  EXPECT_FALSE(parse({"a/b"})->allow_long_max_model_len);
  EXPECT_THAT(refusal({"a/b"}, {.allow_long_max_model_len = "yes"}),
              HasSubstr("VLLM_ALLOW_LONG_MAX_MODEL_LEN takes 1"));
  EXPECT_EQ(parse({"a/b"}, {.cpu_kvcache_space = "8"})->cpu_kv_cache_bytes, std::uint64_t{8} << 30);
  EXPECT_EQ(parse({"a/b"}, {.cpu_kvcache_space = "0"})->cpu_kv_cache_bytes, 0u);  // the default
  EXPECT_THAT(refusal({"a/b"}, {.cpu_kvcache_space = "4.5"}), HasSubstr("VLLM_CPU_KVCACHE_SPACE takes a whole number"));
}

// The engine's CPU threads come from vLLM's variables (serverd/options/cpu_threads.h has their cases).
TEST(ServerOptions, ReadsVllmCpuThreadVariables) {
  auto o = parse({"a/b"}, {.allowed_cpus = {0, 1, 2, 3}});
  EXPECT_EQ(o->cpu_threads, 4u);
  EXPECT_TRUE(o->cpu_pinned.empty());
  o = parse({"a/b"}, {.cpu_num_of_reserved_cpu = "1", .allowed_cpus = {0, 1, 2, 3}});
  EXPECT_EQ(o->cpu_threads, 3u);
  o = parse({"a/b"}, {.cpu_omp_threads_bind = "2,0", .allowed_cpus = {0, 1, 2, 3}});
  EXPECT_EQ(o->cpu_threads, 2u);
  EXPECT_THAT(o->cpu_pinned, ElementsAre(2, 0));
  o = parse({"a/b"}, {.cpu_omp_threads_bind = "nobind", .omp_num_threads = "3", .allowed_cpus = {0, 1}});
  EXPECT_EQ(o->cpu_threads, 3u);
  o = parse({"a/b"}, {.omp_num_threads = "1", .allowed_cpus = {0, 1}});
  EXPECT_EQ(o->cpu_threads, 2u);
  EXPECT_THAT(o->notes, Contains(HasSubstr("OMP_NUM_THREADS='1' is not used")));
  EXPECT_THAT(refusal({"a/b"}, {.cpu_omp_threads_bind = "0-31|32-63"}), HasSubstr("2 tensor-parallel ranks"));
  // Unset, the CPUs are this process's own.
  EXPECT_EQ(parse({"a/b"})->cpu_threads, engine::cpu::allowed_cpus().size());
}

TEST(ServerOptions, AFullVllmLaunchLineParses) {
  const auto o = parse({"serve",
                        "Qwen/Qwen3-0.6B",
                        "--host=127.0.0.1",
                        "--port",
                        "8001",
                        "--served-model-name",
                        "qwen",
                        "qwen3",
                        "--max-model-len",
                        "8k",
                        "--gpu-memory-utilization",
                        "0.85",
                        "-tp",
                        "1",
                        "--pipeline-parallel-size",
                        "1",
                        "--dtype",
                        "auto",
                        "--trust-remote-code",
                        "--enable-prefix-caching",
                        "--enable-chunked-prefill",
                        "--max-num-seqs",
                        "64",
                        "--max-num-batched-tokens",
                        "4096",
                        "--disable-log-requests",
                        "--disable-log-stats",
                        "--uvicorn-log-level",
                        "warning",
                        "--swap-space",
                        "4",
                        "--seed",
                        "0",
                        "--generation-config",
                        "vllm",
                        "--default-chat-template-kwargs",
                        "{\"enable_thinking\": false}",
                        "--load-format",
                        "auto",
                        "--kv-cache-dtype",
                        "auto"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->model, "Qwen/Qwen3-0.6B");
  EXPECT_THAT(o->served_model_name, ElementsAre("qwen", "qwen3"));
  EXPECT_EQ(o->max_model_len, 8000u);
  EXPECT_EQ(o->seed, 0u);
  EXPECT_EQ(o->default_chat_template_kwargs, "{\"enable_thinking\": false}");
  // One line for each flag taken as it is, in the order given.
  EXPECT_THAT(o->notes, ElementsAre(HasSubstr("--tensor-parallel-size 1: serverd runs the model on one device"),
                                    HasSubstr("--pipeline-parallel-size 1:"), HasSubstr("--trust-remote-code:"),
                                    HasSubstr("--enable-chunked-prefill:"), HasSubstr("--disable-log-requests:"),
                                    HasSubstr("--disable-log-stats:"), HasSubstr("--uvicorn-log-level warning:"),
                                    HasSubstr("--swap-space 4:")));
  EXPECT_EQ(o->kv_cache_dtype, "auto");  // honoured, so no note
}

// --kv-cache-dtype takes vLLM's 16-bit values and float32, and refuses each fp8 value by name.
TEST(ServerOptions, KvCacheDtypeTakesSixteenAndThirtyTwoBitValuesAndRefusesFp8ByName) {
  EXPECT_EQ(parse({"a/b"})->kv_cache_dtype, "auto");
  for (const std::string dtype : {"auto", "bfloat16", "float16", "float32"}) {
    const auto o = parse({"a/b", "--kv-cache-dtype", dtype});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->kv_cache_dtype, dtype);
    EXPECT_TRUE(o->notes.empty());
    // Every value the flag takes is one the engine takes (the loader passes it on).
    EXPECT_TRUE(engine::runtime::parse_kv_cache_dtype(dtype)) << dtype;
  }
  for (const std::string dtype : {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}) {
    EXPECT_EQ(refusal({"a/b", "--kv-cache-dtype", dtype}),
              "--kv-cache-dtype " + dtype +
                  ": serverd has no fp8 KV cache; use --kv-cache-dtype bfloat16 (half the "
                  "memory of float32) or auto");
  }
  EXPECT_THAT(refusal({"a/b", "--kv-cache-dtype", "int4"}),
              HasSubstr("--kv-cache-dtype takes one of auto, bfloat16, float16, float32, fp8"));
}

TEST(ServerOptions, ARepeatedAcceptedFlagLogsOneLine) {
  const auto o = parse({"a/b", "-tp", "1", "--tensor-parallel-size=1"});
  EXPECT_EQ(o->notes.size(), 1u);
}

// The listener flags are vLLM's; they reach the HTTP server's options (serverd_vllm_launch_tests serves
// through them).
TEST(ServerOptions, ListenerFlagsAreStoredAsVllmSpellsThem) {
  const auto o = parse({"a/b",
                        "--ssl-keyfile",
                        "/k.pem",
                        "--ssl-certfile",
                        "/c.pem",
                        "--ssl-ca-certs",
                        "/ca.pem",
                        "--ssl-cert-reqs",
                        "2",
                        "--uds",
                        "/run/s.sock",
                        "--root-path",
                        "/llm",
                        "--allowed-origins",
                        "[\"https://x\"]",
                        "--allowed-methods",
                        "[\"POST\"]",
                        "--allowed-headers",
                        "[\"Authorization\"]",
                        "--allow-credentials"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->ssl_keyfile, "/k.pem");
  EXPECT_EQ(o->ssl_certfile, "/c.pem");
  EXPECT_EQ(o->ssl_ca_certs, "/ca.pem");
  EXPECT_EQ(o->ssl_cert_reqs, 2u);
  EXPECT_EQ(o->uds, "/run/s.sock");
  EXPECT_EQ(o->root_path, "/llm");
  EXPECT_THAT(o->allowed_origins, ElementsAre("https://x"));
  EXPECT_THAT(o->allowed_methods, ElementsAre("POST"));
  EXPECT_THAT(o->allowed_headers, ElementsAre("Authorization"));
  EXPECT_TRUE(o->allow_credentials);
  EXPECT_TRUE(o->notes.empty());
  EXPECT_THAT(refusal({"a/b", "--ssl-cert-reqs", "3"}), HasSubstr("--ssl-cert-reqs"));
  EXPECT_THAT(refusal({"a/b", "--allowed-methods", "POST"}), HasSubstr("--allowed-methods takes a JSON list"));
}

TEST(ServerOptions, HelpReturnsNothing) {
  EXPECT_FALSE(parse({"--help"}));
  EXPECT_FALSE(parse({"serve", "--help"}));
}

TEST(ServerOptions, RefusesBadValuesByName) {
  EXPECT_THROW(parse({"--model", "a/b", "--device", "tpu"}), base::UsageError);
  EXPECT_THAT(refusal({"--model", "a/b", "--port", "65536"}), HasSubstr("--port takes a value from 0 to 65535"));
  EXPECT_THROW(parse({"--model", "a/b", "--block-size", "12"}), base::UsageError);  // vLLM's choices only
  EXPECT_THAT(refusal({"a/b", "--default-chat-template-kwargs", "[1]"}),
              HasSubstr("--default-chat-template-kwargs takes a JSON object"));
  EXPECT_THAT(refusal({"a/b", "--override-generation-config", "{\"temprature\": 0.1}"}),
              HasSubstr("'temprature' is not a sampling default serverd takes"));
  EXPECT_THAT(refusal({"a/b", "--override-generation-config", "{\"top_k\": 0.5}"}),
              HasSubstr("'top_k' must be a whole number"));
  EXPECT_THAT(refusal({"a/b", "--unknown-flag"}), HasSubstr("unknown flag --unknown-flag"));
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
  EXPECT_EQ(o->max_logprobs, std::nullopt);  // -1: no limit
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
  EXPECT_EQ(refusal({"--model", "a/b", "--enable-auto-tool-choice"}),
            "--enable-auto-tool-choice requires --tool-call-parser");
  EXPECT_THAT(refusal({"--model", "a/b", "--tool-call-parser", "nope"}), HasSubstr("hermes"));
  EXPECT_THAT(refusal({"--model", "a/b", "--tool-call-parser", "nope"}), HasSubstr("nope"));
  EXPECT_THAT(refusal({"--model", "a/b", "--reasoning-parser", "nope"}), HasSubstr("deepseek_r1"));
}

}  // namespace
}  // namespace serverd
