// engine-run: loads a model directory or .gguf file and generates from one prompt, printing text as it
// comes (debugging and demos). Timings go to stderr.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>

#include "base/flags.h"
#include "base/printable.h"
#include "engine/runtime/engine.h"
#include "engine/sampling/sampler.h"
#include "engine/template/chat_template.h"

namespace {

using Clock = std::chrono::steady_clock;

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string system;
  bool chat = false;
  bool no_thinking = false;
  bool ignore_eos = false;
  bool verbose = false;
  std::uint64_t max_tokens = 128;
  std::uint64_t threads = 0;
  std::uint64_t seed = 0;
  std::string device = "auto";
  double temperature = -1, top_p = -1, min_p = -1;
  std::uint64_t top_k = 0;
};

std::string json_string(const std::string& text) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return buffer.GetString();
}

std::string chat_prompt(const engine::runtime::Engine& engine, const RunOptions& o) {
  const auto chat_template = engine::template_::ModelChatTemplate::from_source(engine.checkpoint().chat_template());
  const auto* tmpl = chat_template.get();
  if (tmpl == nullptr) throw std::runtime_error(chat_template.unusable_reason);
  std::string messages = "[";
  if (!o.system.empty()) messages += R"({"role":"system","content":)" + json_string(o.system) + "},";
  messages += R"({"role":"user","content":)" + json_string(o.prompt) + "}]";
  const auto& config = engine.tokenizer().config();
  engine::template_::ChatInputs inputs;
  inputs.messages_json = messages;
  inputs.add_generation_prompt = true;
  const std::string kwargs = o.no_thinking ? R"({"enable_thinking":false})" : "";
  inputs.extra_kwargs_json = kwargs;
  inputs.bos_token = config.bos_token.value_or("");
  inputs.eos_token = config.eos_token.value_or("");
  return engine::template_::render_chat(*tmpl, inputs);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int run(const RunOptions& o) {
  engine::runtime::EngineOptions eo;
  eo.device = *engine::runtime::parse_device(o.device);
  eo.threads = o.threads;
  const auto load_start = Clock::now();
  auto engine = engine::runtime::Engine::load(o.model, eo);
  const auto& tok = engine->tokenizer();
  if (o.verbose) {
    std::cerr << "engine-run: loaded " << base::printable(o.model) << " ("
              << engine::model::architecture_name(engine->config().architecture) << ", "
              << engine->checkpoint().weight_bytes() / 1e6 << " MB of weights) on " << engine->device_name() << " in "
              << seconds_since(load_start) << " s\n";
  }

  const std::string text = o.chat ? chat_prompt(*engine, o) : o.prompt;
  const auto prompt = tok.encode(text, !o.chat);
  if (prompt.empty()) throw std::runtime_error("the prompt is empty after tokenization; give some text");

  engine::sampling::SamplingParams params;
  const auto& defaults = engine->checkpoint().generation_defaults();
  params.temperature = static_cast<float>(o.temperature >= 0 ? o.temperature : defaults.temperature.value_or(1.0));
  params.top_p = static_cast<float>(o.top_p >= 0 ? o.top_p : defaults.top_p.value_or(1.0));
  params.min_p = static_cast<float>(o.min_p >= 0 ? o.min_p : defaults.min_p.value_or(0.0));
  params.top_k = o.top_k ? static_cast<int>(o.top_k) : static_cast<int>(defaults.top_k.value_or(0));
  if (o.seed) params.seed = o.seed;
  engine::sampling::validate(params, engine->config().vocab_size);
  engine::sampling::SequenceSampler sampler(params, prompt);

  engine::runtime::SequenceCache cache;
  const std::size_t total = std::min<std::size_t>(prompt.size() + o.max_tokens, engine->max_model_len());
  if (prompt.size() >= total) {
    throw std::runtime_error("the prompt has " + std::to_string(prompt.size()) + " tokens; max_model_len is " +
                             std::to_string(engine->max_model_len()));
  }
  if (!engine->reserve(cache, total)) throw std::runtime_error("the KV cache cannot hold this sequence");

  engine::tokenizer::IncrementalDecoder decoder(tok, /*skip_special_tokens=*/true);
  const auto& eos = engine->checkpoint().eos_token_ids();
  std::vector<engine::sampling::SampledToken> sampled;
  engine::sampling::SequenceSampler* samplers[] = {&sampler};
  std::vector<std::int32_t> next(1);
  // The step chooses the token itself (on the GPU where the engine runs there).
  const auto prefill_start = Clock::now();
  engine::runtime::StepInput input{&cache, prompt, false};
  engine->step_and_sample(std::span(&input, 1), samplers, sampled);
  const double prefill_s = seconds_since(prefill_start);
  const auto decode_start = Clock::now();
  std::size_t generated = 0;
  while (true) {
    const auto token = sampled[0].token;
    ++generated;
    const bool stop = !o.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
    if (!stop) std::cout << decoder.push(token) << std::flush;
    if (stop || cache.cached + 1 >= total) break;
    next[0] = token;
    input = {&cache, next, false};
    engine->step_and_sample(std::span(&input, 1), samplers, sampled);
  }
  std::cout << decoder.flush() << std::endl;
  const double decode_s = seconds_since(decode_start);
  std::fprintf(stderr, "engine-run: prompt %zu tokens in %.3f s (%.1f tok/s); generated %zu tokens (%.2f tok/s)\n",
               prompt.size(), prefill_s, static_cast<double>(prompt.size()) / prefill_s, generated,
               generated > 1 ? static_cast<double>(generated - 1) / decode_s : 0.0);
  engine->release(cache);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  RunOptions o;
  base::FlagParser flags("usage: engine-run --model PATH --prompt TEXT [options]");
  flags.add_string("model", "PATH", "a model directory (config.json, safetensors, tokenizer) or a .gguf file",
                   &o.model);
  flags.add_string("prompt", "TEXT", "the prompt", &o.prompt);
  flags.add_switch("chat", "wrap the prompt in the model's chat template as a user message", &o.chat);
  flags.add_string("system", "TEXT", "a system message (with --chat)", &o.system);
  flags.add_switch("no-thinking", "render the chat template with enable_thinking=false", &o.no_thinking);
  flags.add_uint("max-tokens", "N", "tokens to generate at most (default 128)", &o.max_tokens, 1);
  flags.add_double("temperature", "T", "sampling temperature; 0 is greedy (default: generation_config.json)",
                   &o.temperature, 0, 100);
  flags.add_double("top-p", "P", "nucleus sampling mass", &o.top_p, 0, 1);
  flags.add_uint("top-k", "K", "sample among the K most likely tokens", &o.top_k);
  flags.add_double("min-p", "P", "drop tokens below P times the most likely one's probability", &o.min_p, 0, 1);
  flags.add_uint("seed", "N", "seed of the sampler's random stream", &o.seed);
  flags.add_switch("ignore-eos", "keep generating past end-of-sequence tokens", &o.ignore_eos);
  flags.add_uint("threads", "N", "CPU threads (default: one per CPU this process may run on)", &o.threads);
  flags.add_choice("device", {"auto", "cpu", "cuda"}, "where to run (default auto)", &o.device);
  flags.add_switch("verbose", "log loading details", &o.verbose);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    if (o.model.empty()) throw base::UsageError("--model is required");
    if (o.prompt.empty()) throw base::UsageError("--prompt is required");
    return run(o);
  } catch (const base::UsageError& e) {
    std::cerr << "engine-run: " << base::printable(e.what()) << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "engine-run: " << base::printable(e.what()) << '\n';
    return 1;
  }
}
