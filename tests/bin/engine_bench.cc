// engine-bench: the CPU engine's speed on a model (the Qwen3-0.6B-shaped demo model in docs/engine.md):
// prefill tokens/s, decode tokens/s at batch 1 and 8 (and at batch 1 after a long prompt, --long-context),
// peak RSS, and the weight bytes batch-1 decode streams per second beside this machine's measured memory
// bandwidth (the bound a memory-bound decode can reach).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "base/flags.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/runtime/engine.h"

namespace {

using Clock = std::chrono::steady_clock;
using engine::runtime::Engine;
using engine::runtime::SequenceCache;
using engine::runtime::StepInput;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

// A prompt of exactly `count` tokens cut from ordinary English text.
std::vector<std::int32_t> prompt_tokens(const Engine& engine, std::size_t count) {
  const std::string sentence =
      "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly report. ";
  std::string text;
  std::vector<std::int32_t> ids;
  while (ids.size() < count) {
    text += sentence;
    ids = engine.tokenizer().encode(text, false);
  }
  ids.resize(count);
  return ids;
}

// Decodes `steps` tokens for each of `batch` sequences (greedy argmax of the logits; the numbers do not
// depend on which token), after a short prefill. Returns decode tokens per second over all sequences.
double decode_rate(Engine& engine, std::size_t batch, std::size_t prompt_len, std::size_t steps) {
  const std::size_t vocab = engine.config().vocab_size;
  std::vector<SequenceCache> caches(batch);
  std::vector<std::vector<std::int32_t>> next(batch);
  const auto prompt = prompt_tokens(engine, prompt_len);
  std::vector<StepInput> inputs;
  for (std::size_t b = 0; b < batch; ++b) {
    if (!engine.reserve(caches[b], prompt_len + steps + 1)) throw std::runtime_error("KV cache too small");
    inputs.push_back({&caches[b], prompt, false});
  }
  std::vector<float> logits;
  engine.step(inputs, logits);
  auto argmax_into_next = [&] {
    for (std::size_t b = 0; b < batch; ++b) {
      const float* row = logits.data() + b * vocab;
      std::size_t best = 0;
      for (std::size_t i = 1; i < vocab; ++i) best = row[i] > row[best] ? i : best;
      next[b] = {static_cast<std::int32_t>(best)};
      inputs[b] = {&caches[b], next[b], false};
    }
  };
  argmax_into_next();
  const auto start = Clock::now();
  for (std::size_t s = 0; s < steps; ++s) {
    engine.step(inputs, logits);
    argmax_into_next();
  }
  const double elapsed = seconds_since(start);
  for (auto& cache : caches) engine.release(cache);
  return static_cast<double>(batch * steps) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  std::uint64_t threads = 0, prefill_len = 512, steps = 32, long_context = 0;
  base::FlagParser flags("usage: engine-bench --model PATH [--threads N] [--prefill N] [--steps N] [--long-context N]");
  flags.add_string("model", "PATH", "model directory or .gguf file (e.g. the demo model)", &model);
  flags.add_uint("threads", "N", "CPU threads (default: one per online CPU)", &threads);
  flags.add_uint("prefill", "N", "prompt tokens for the prefill measurement (default 512)", &prefill_len, 1);
  flags.add_uint("steps", "N", "decode steps per measurement (default 32)", &steps, 1);
  flags.add_uint("long-context", "N", "also decode at batch 1 after an N-token prompt (default: not measured)",
                 &long_context);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    if (model.empty()) throw base::UsageError("--model is required");
    engine::runtime::EngineOptions options;
    options.threads = threads;
    options.max_model_len = std::max(prefill_len, long_context) + 2 * steps + 64;
    const auto load_start = Clock::now();
    auto engine = Engine::load(model, options);
    const double load_s = seconds_since(load_start);
    const double weight_gb = static_cast<double>(engine->checkpoint().weight_bytes()) / 1e9;

    // Prefill: one sequence of prefill_len tokens.
    SequenceCache cache;
    const auto prompt = prompt_tokens(*engine, prefill_len);
    engine->reserve(cache, prefill_len);
    std::vector<float> logits;
    StepInput input{&cache, prompt, false};
    const auto prefill_start = Clock::now();
    engine->step(std::span(&input, 1), logits);
    const double prefill_rate = static_cast<double>(prefill_len) / seconds_since(prefill_start);
    engine->release(cache);

    const double decode1 = decode_rate(*engine, 1, 16, steps);
    const double decode8 = decode_rate(*engine, 8, 16, steps);
    const double decode_long = long_context > 0 ? decode_rate(*engine, 1, long_context, steps) : 0;
    const double rss_mb = peak_rss_mb();  // before the bandwidth probe's own buffer
    engine::cpu::ThreadPool pool(threads);
    const double bandwidth = engine::cpu::measure_memory_bandwidth(pool);
    const double streamed = decode1 * weight_gb;

    std::printf("model            %s\n", model.c_str());
    std::printf("simd, threads    %s, %zu\n", std::string(engine::cpu::simd_level()).c_str(), pool.size());
    std::printf("weights/token    %.3f GB\n", weight_gb);
    std::printf("load             %.2f s\n", load_s);
    std::printf("prefill          %.1f tokens/s (%llu-token prompt)\n", prefill_rate,
                static_cast<unsigned long long>(prefill_len));
    std::printf("decode batch 1   %.2f tokens/s\n", decode1);
    std::printf("decode batch 8   %.2f tokens/s\n", decode8);
    if (long_context > 0) {
      std::printf("decode batch 1   %.2f tokens/s after a %llu-token prompt\n", decode_long,
                  static_cast<unsigned long long>(long_context));
    }
    std::printf("peak RSS         %.0f MB (weights %.0f MB)\n", rss_mb, weight_gb * 1e3);
    std::printf("decode streams   %.2f GB/s of weights; memory bandwidth %.2f GB/s measured; %.0f%% of the bound\n",
                streamed, bandwidth, 100.0 * streamed / bandwidth);
    return 0;
  } catch (const base::UsageError& e) {
    std::cerr << "engine-bench: " << e.what() << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "engine-bench: " << e.what() << '\n';
    return 1;
  }
}
