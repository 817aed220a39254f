#pragma once

// serverd's command line and environment, spelled as vLLM spells `vllm serve`'s: `serverd serve MODEL
// [flags]`, `serverd MODEL [flags]` or `serverd --model MODEL [flags]`. Which flags exist, and what each
// does, is serverd/options/flag_table.cc.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/kv_cache_manager.h"
#include "fetchd/request/model_reference.h"

namespace serverd {

// What serverd reads from its environment, under vLLM's names.
struct ServerEnvironment {
  std::optional<std::string> api_key = {};                   // VLLM_API_KEY
  std::optional<std::string> allow_long_max_model_len = {};  // VLLM_ALLOW_LONG_MAX_MODEL_LEN
  std::optional<std::string> cpu_kvcache_space = {};         // VLLM_CPU_KVCACHE_SPACE, in GiB
  std::optional<std::string> cpu_omp_threads_bind = {};     // VLLM_CPU_OMP_THREADS_BIND (serverd/options/cpu_threads.h)
  std::optional<std::string> cpu_num_of_reserved_cpu = {};  // VLLM_CPU_NUM_OF_RESERVED_CPU
  std::optional<std::string> omp_num_threads = {};          // OMP_NUM_THREADS (with VLLM_CPU_OMP_THREADS_BIND=nobind)
  // The CPUs the threads may run on, ascending; empty: this process's (engine::cpu::allowed_cpus()).
  std::vector<int> allowed_cpus = {};

  static ServerEnvironment from_process();
};

struct ServerOptions {
  std::string model;
  std::string revision;
  std::string download_dir;
  std::vector<std::string> served_model_name;  // the first is what responses report; defaults to --model as typed
  std::string host = "0.0.0.0";
  std::uint64_t port = 8000;
  std::uint64_t max_model_len = 0;  // 0: from the model's config
  std::uint64_t max_num_seqs = 256;
  std::uint64_t max_num_batched_tokens = 2048;
  std::uint64_t block_size = engine::runtime::kDefaultBlockSize;  // KV cache positions per block
  std::string runner = "auto";                                    // auto | generate | pooling (vLLM's --runner)
  std::string convert = "auto";                                   // auto | none | embed (vLLM's --convert)
  std::string kv_cache_dtype = "auto";  // how the KV cache stores keys and values (engine::runtime::KvCacheDtype)
  double gpu_memory_utilization = 0.9;
  std::uint64_t kv_cache_memory_bytes = 0;  // 0: from --gpu-memory-utilization (GPU) or VLLM_CPU_KVCACHE_SPACE
  bool enforce_eager = false;
  bool enable_prefix_caching = true;
  std::vector<std::string> api_key;  // any one of them opens /v1/*; else VLLM_API_KEY
  std::string device = "auto";
  std::string fetchd_address;  // empty: start fetchd as a child on a private Unix socket
  bool verbose = false;
  bool enable_log_requests = false;

  // Prompts and templates.
  std::string chat_template;                          // a file, or the template itself; empty: the model's
  std::string chat_template_content_format = "auto";  // auto | string | openai
  std::string default_chat_template_kwargs;           // a JSON object; empty: none
  bool trust_request_chat_template = false;
  std::string response_role = "assistant";
  std::string tokenizer;                   // a directory or hub name; empty: the model's
  std::string generation_config = "auto";  // auto | vllm | a directory holding generation_config.json
  std::string override_generation_config;  // a JSON object; empty: none
  std::optional<std::uint64_t> seed;       // unset: unseeded requests draw fresh randomness
  bool enable_force_include_usage = false;
  bool enable_prompt_tokens_details = false;

  // Checked against the checkpoint when it loads (serverd/loader/checkpoint_flags.h).
  std::string dtype = "auto";
  std::string load_format = "auto";
  std::string quantization;  // empty: none asked for

  // Parsed and checked here; the listener and tool-call work wires them (until then, a value that would
  // change behaviour is refused at start).
  std::string ssl_keyfile;
  std::string ssl_certfile;
  std::string ssl_ca_certs;
  std::uint64_t ssl_cert_reqs = 0;  // Python's ssl.CERT_NONE
  std::string uds;
  std::string root_path;
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;

  // From the environment.
  bool allow_long_max_model_len = false;  // VLLM_ALLOW_LONG_MAX_MODEL_LEN
  std::uint64_t cpu_kv_cache_bytes = 0;   // VLLM_CPU_KVCACHE_SPACE; 0: the engine's default
  // The engine's CPU threads and, for a VLLM_CPU_OMP_THREADS_BIND list, the CPU each is pinned to
  // (serverd/options/cpu_threads.h).
  std::size_t cpu_threads = 0;
  std::vector<int> cpu_pinned;

  // Log-probabilities: the most a request may ask for per token (nullopt: -1, the whole vocabulary), and
  // whether tokens in them are written "token_id:ID".
  std::optional<std::uint64_t> max_logprobs = 20;
  bool return_tokens_as_token_ids = false;

  // Tool calling and reasoning, as vLLM's --enable-auto-tool-choice, --tool-call-parser,
  // --reasoning-parser and --exclude-tools-when-tool-choice-none (parser names checked at parse time).
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // empty: none
  std::string reasoning_parser;  // empty: none
  bool exclude_tools_when_tool_choice_none = false;

  fetchd::request::ModelReference reference;  // --model, classified
  // One line for each flag taken as it is because serverd already behaves so; main logs them.
  std::vector<std::string> notes;
};

// Reads the flags into options by the flag table (nothing from the environment, no start checks).
// Returns nullopt after printing help for --help. Throws base::UsageError for unknown, malformed or refused
// flags, naming the flag.
std::optional<ServerOptions> read_server_flags(std::span<char* const> args);

// read_server_flags, then the environment (VLLM_API_KEY when no --api-key, ...) and the start checks: a
// flag that is parsed but not wired yet is refused when its value would change behaviour. Throws
// base::UsageError.
std::optional<ServerOptions> parse_server_options(std::span<char* const> args, const ServerEnvironment& env);

}  // namespace serverd
