#include "serverd/options/server_options.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "base/flags.h"
#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd {
namespace {

// Tool calling and reasoning flags, kept together so they read as one feature.
void add_parser_flags(base::FlagParser& flags, ServerOptions& o) {
  flags.add_switch("enable-auto-tool-choice", "Let the model call tools when a request's tool_choice is \"auto\"",
                   &o.enable_auto_tool_choice);
  flags.add_string("tool-call-parser", "NAME", "How tool calls are read from the output: hermes, llama3_json, ...",
                   &o.tool_call_parser);
  flags.add_string("reasoning-parser", "NAME", "How reasoning is split off the output: qwen3, deepseek_r1",
                   &o.reasoning_parser);
  flags.add_switch("exclude-tools-when-tool-choice-none",
                   "Do not show the chat template the tools when tool_choice is \"none\"",
                   &o.exclude_tools_when_tool_choice_none);
}

// vLLM's start-up checks of the flags above.
void check_parser_flags(const ServerOptions& o) {
  if (o.enable_auto_tool_choice && o.tool_call_parser.empty()) {
    throw base::UsageError("--enable-auto-tool-choice requires --tool-call-parser");
  }
  try {
    if (!o.tool_call_parser.empty()) parsers::make_tool_call_parser(o.tool_call_parser);
    if (!o.reasoning_parser.empty()) parsers::make_reasoning_parser(o.reasoning_parser);
  } catch (const std::invalid_argument& e) {
    throw base::UsageError(e.what());
  }
}

}  // namespace

std::optional<ServerOptions> parse_server_options(std::span<char* const> args,
                                                  const std::optional<std::string>& api_key_env) {
  ServerOptions o;
  base::FlagParser flags(
      "usage: serverd --model MODEL [options]\n\n"
      "Serves MODEL (a directory, a .gguf file, org/repo or org/repo:QUANT) over an "
      "OpenAI-compatible HTTP API.");
  flags.add_string("model", "MODEL", "Directory, .gguf file, org/repo or org/repo:QUANT", &o.model);
  flags.add_string("revision", "REV", "Branch, tag or commit of a hub model (default: main)", &o.revision);
  flags.add_string("download-dir", "DIR", "Hugging Face cache directory; beats HF_HUB_CACHE and HF_HOME",
                   &o.download_dir);
  flags.add_string("served-model-name", "NAME", "Name clients use in \"model\" (default: --model as typed)",
                   &o.served_model_name);
  flags.add_string("host", "HOST", "Address to listen on (default: 0.0.0.0)", &o.host);
  flags.add_uint("port", "PORT", "Port to listen on (default: 8000)", &o.port, 0, 65535);
  flags.add_uint("max-model-len", "N", "Context length (default: from the model's config)", &o.max_model_len);
  flags.add_uint("max-num-seqs", "N", "Sequences decoded together (default: 256)", &o.max_num_seqs, 1, 65536);
  flags.add_uint("max-num-batched-tokens", "N", "Tokens per engine step (default: 2048)", &o.max_num_batched_tokens, 1,
                 1u << 24);
  std::string block_size = std::to_string(o.block_size);
  flags.add_choice("block-size", {"1", "8", "16", "32", "64", "128"},
                   "KV cache positions per block (default: " + block_size + ")", &block_size);
  flags.add_double("gpu-memory-utilization", "F",
                   "Share of the GPU's memory for weights, activations and KV cache (default: 0.9)",
                   &o.gpu_memory_utilization, 0.01, 1.0);
  flags.add_switch("enforce-eager", "GPU: launch every kernel of a step (no CUDA graphs)", &o.enforce_eager);
  flags.add_string("api-key", "KEY", "Require this bearer key on /v1/* (default: $VLLM_API_KEY)", &o.api_key);
  flags.add_choice("device", {"auto", "cpu", "cuda"}, "Where the engine runs (default: auto)", &o.device);
  flags.add_string("fetchd", "ADDR", "fetchd's gRPC address (unix:PATH or HOST:PORT); default: start one",
                   &o.fetchd_address);
  flags.add_switch("verbose", "More detail in the logs", &o.verbose);
  add_parser_flags(flags, o);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return std::nullopt;
  }
  if (o.model.empty()) throw base::UsageError("--model is required (see --help)");
  o.block_size = std::stoull(block_size);
  check_parser_flags(o);
  if (o.api_key.empty() && api_key_env) o.api_key = *api_key_env;
  o.reference = fetchd::request::parse_model_reference(o.model);
  if (o.served_model_name.empty()) o.served_model_name = o.model;
  return o;
}

}  // namespace serverd
