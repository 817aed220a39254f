#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/runtime/kv_cache_manager.h"
#include "fetchd/request/model_reference.h"

namespace serverd {

// serverd's command line, spelled as vLLM spells its OpenAI server's flags.
struct ServerOptions {
  std::string model;
  std::string revision;
  std::string download_dir;
  std::string served_model_name;  // defaults to --model as typed
  std::string host = "0.0.0.0";
  std::uint64_t port = 8000;
  std::uint64_t max_model_len = 0;  // 0: from the model's config
  std::uint64_t max_num_seqs = 256;
  std::uint64_t max_num_batched_tokens = 2048;
  std::uint64_t block_size = engine::runtime::kDefaultBlockSize;  // KV cache positions per block
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  std::string api_key;  // --api-key, else VLLM_API_KEY
  std::string device = "auto";
  std::string fetchd_address;  // empty: start fetchd as a child on a private Unix socket
  bool verbose = false;

  // Tool calling and reasoning, as vLLM's --enable-auto-tool-choice, --tool-call-parser,
  // --reasoning-parser and --exclude-tools-when-tool-choice-none (parser names checked at parse time).
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // empty: none
  std::string reasoning_parser;  // empty: none
  bool exclude_tools_when_tool_choice_none = false;

  fetchd::request::ModelReference reference;  // --model, classified
};

// Parses argv (without the program name). Returns nullopt after printing help for --help. Throws
// base::UsageError for bad flags. `api_key_env` is the VLLM_API_KEY value, if any.
std::optional<ServerOptions> parse_server_options(std::span<char* const> args,
                                                  const std::optional<std::string>& api_key_env);

}  // namespace serverd
