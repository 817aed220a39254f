// engine-bench: the CPU engine's speed on a model (the Qwen3-0.6B-shaped demo model in docs/engine.md):
// prefill tokens/s, decode tokens/s at batch 1 after a short and a long prompt and at larger batches, load
// time, peak RSS, and the weight bytes batch-1 decode streams per second beside this machine's memory
// bandwidth measured right before and right after that decode (the bound a memory-bound decode can reach; on a
// shared host it moves from minute to minute, so it is measured where the decode runs, and the larger of the two
// is the bound). --step-bytes also counts the bytes of the model's files one batch-1 decode step reads (a mixture
// of experts: its routed experts', not all; tests/support/step_file_bytes.h). --json prints the same as one JSON
// object (scripts/bench-vs-llamacpp.sh reads it).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/flags.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"
#include "engine/runtime/engine.h"
#include "tests/support/step_file_bytes.h"

namespace {

using Clock = std::chrono::steady_clock;
using engine::runtime::Engine;
using engine::runtime::SequenceCache;
using engine::runtime::StepInput;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The process's peak resident memory since it started or since reset_peak_rss (VmHWM).
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  123456 kB"
  }
  throw std::runtime_error("/proc/self/status has no VmHWM line: cannot read the peak RSS");
}

void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (!clear) throw std::runtime_error("cannot reset the peak RSS (writing 5 to /proc/self/clear_refs failed)");
}

// The memory bandwidth measured now, in GB/s. Its 1 GiB buffer is kept out of the peak RSS the benchmark
// reports: the peak so far is folded into `peak_mb` first, and the high-water mark is reset after.
double probe_bandwidth(engine::cpu::ThreadPool& pool, double& peak_mb) {
  peak_mb = std::max(peak_mb, peak_rss_mb());
  const double bandwidth = engine::cpu::measure_memory_bandwidth(pool);
  reset_peak_rss();
  return bandwidth;
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

struct DecodeRate {
  double prefill = 0;  // prompt tokens per second over all sequences, the prompts prefilled in one step
  double decode = 0;   // decode tokens per second over all sequences
};

// Decodes `steps` tokens for each of `batch` sequences (greedy argmax of the logits; the numbers do not
// depend on which token), after a prefill of `prompt_len` tokens each.
DecodeRate decode_rate(Engine& engine, std::size_t batch, std::size_t prompt_len, std::size_t steps) {
  const std::size_t vocab = engine.config().vocab_size;
  std::vector<SequenceCache> caches(batch);
  std::vector<std::vector<std::int32_t>> next(batch);
  const auto prompt = prompt_tokens(engine, prompt_len);
  std::vector<StepInput> inputs;
  for (std::size_t b = 0; b < batch; ++b) {
    if (!engine.reserve(caches[b], prompt_len + steps + 1)) {
      throw std::runtime_error("the KV cache cannot hold " + std::to_string(batch) + " sequences of " +
                               std::to_string(prompt_len + steps + 1) + " tokens");
    }
    inputs.push_back({&caches[b], prompt, false});
  }
  std::vector<float> logits;
  DecodeRate rate;
  const auto prefill_start = Clock::now();
  engine.step(inputs, logits);
  rate.prefill = static_cast<double>(batch * prompt_len) / seconds_since(prefill_start);
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
  rate.decode = static_cast<double>(batch * steps) / seconds_since(start);
  for (auto& cache : caches) engine.release(cache);
  return rate;
}

// The bytes of the model's files one batch-1 decode step reads, after a prefill of `prompt_len` tokens (each
// step's experts differ, so several steps are measured and the median kept).
testing_support::StepFileBytes step_bytes(Engine& engine, std::size_t prompt_len, std::size_t steps) {
  SequenceCache cache;
  const auto prompt = prompt_tokens(engine, prompt_len);
  if (!engine.reserve(cache, prompt_len + steps)) throw std::runtime_error("the KV cache cannot hold the steps");
  std::vector<float> logits;
  StepInput input{&cache, prompt, false};
  engine.step(std::span(&input, 1), logits);
  std::vector<testing_support::StepFileBytes> measured;
  for (std::size_t s = 0; s < steps; ++s) {
    const std::vector<std::int32_t> next = {
        static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
    input = {&cache, next, false};
    measured.push_back(testing_support::measure_step_file_bytes([&] { engine.step(std::span(&input, 1), logits); }));
  }
  engine.release(cache);
  std::sort(measured.begin(), measured.end(), [](const auto& a, const auto& b) { return a.read < b.read; });
  return measured[measured.size() / 2];
}

// "8,32" as batch sizes, each at least 1.
std::vector<std::size_t> parse_batches(std::string_view text) {
  std::vector<std::size_t> batches;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    std::size_t batch = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + at, text.data() + end, batch);
    if (ec != std::errc() || ptr != text.data() + end || batch == 0) {
      throw base::UsageError("--batches " + std::string(text) + ": \"" + std::string(text.substr(at, end - at)) +
                             "\" is not a batch size (give sizes of at least 1 separated by commas)");
    }
    batches.push_back(batch);
    at = end + 1;
  }
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, batches_text = "8,32", kv_cache_dtype = "auto";
  std::uint64_t threads = 0, prefill_len = 512, steps = 32, short_prompt = 16, long_prompt = 2048;
  bool json = false, count_step_bytes = false;
  base::FlagParser flags(
      "usage: engine-bench --model PATH [--threads N] [--prefill N] [--steps N] [--short-prompt N] "
      "[--long-prompt N] [--batches LIST] [--kv-cache-dtype auto|bfloat16|float16|float32] [--json]");
  flags.add_string("model", "PATH", "model directory or .gguf file (e.g. the demo model)", &model);
  flags.add_uint("threads", "N", "CPU threads (default: one per CPU this process may run on)", &threads);
  flags.add_uint("prefill", "N", "prompt tokens for the prefill measurement (default 512)", &prefill_len, 1);
  flags.add_uint("steps", "N", "decode steps per measurement (default 32)", &steps, 1);
  flags.add_uint("short-prompt", "N", "prompt tokens before each decode measurement (default 16)", &short_prompt, 1);
  flags.add_uint("long-prompt", "N", "batch-1 decode also after an N-token prompt (default 2048; 0: not measured)",
                 &long_prompt);
  flags.add_string("batches", "LIST", "batch sizes decoded after the short prompt, besides 1 (default 8,32)",
                   &batches_text);
  flags.add_string("kv-cache-dtype", "auto|bfloat16|float16|float32",
                   "how the KV cache stores keys and values (default auto: bfloat16 on the CPU)", &kv_cache_dtype);
  flags.add_switch("step-bytes", "also count the bytes of the model's files a batch-1 decode step reads",
                   &count_step_bytes);
  flags.add_switch("json", "print one JSON object instead of the table", &json);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    if (model.empty()) throw base::UsageError("--model is required");
    const auto batches = parse_batches(batches_text);
    engine::runtime::EngineOptions options;
    options.threads = threads;
    const auto dtype = engine::runtime::parse_kv_cache_dtype(kv_cache_dtype);
    if (!dtype) {
      throw base::UsageError("--kv-cache-dtype takes auto, bfloat16, float16 or float32, not " + kv_cache_dtype);
    }
    options.kv_cache_dtype = *dtype;
    options.max_model_len = std::max({prefill_len, short_prompt, long_prompt}) + steps + 64;
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

    engine::cpu::ThreadPool pool(threads);
    double peak_mb = 0;
    const double bandwidth_before = probe_bandwidth(pool, peak_mb);
    const double decode1 = decode_rate(*engine, 1, short_prompt, steps).decode;
    const double bandwidth_after = probe_bandwidth(pool, peak_mb);
    const double bandwidth = std::max(bandwidth_before, bandwidth_after);
    const DecodeRate after_long = long_prompt > 0 ? decode_rate(*engine, 1, long_prompt, steps) : DecodeRate{};
    std::vector<double> batch_rates;
    for (const auto batch : batches) batch_rates.push_back(decode_rate(*engine, batch, short_prompt, steps).decode);
    const double rss_mb = std::max(peak_mb, peak_rss_mb());
    const auto read = count_step_bytes ? step_bytes(*engine, short_prompt, 3) : testing_support::StepFileBytes{};
    const double streamed = decode1 * weight_gb;
    const std::string simd(engine::cpu::simd_level());
    const std::string kv_type(engine::quant::weight_type_name(engine->cache_shape().kv_type));

    if (json) {
      std::printf(
          "{\"simd\": \"%s\", \"threads\": %zu, \"kv_cache\": \"%s\", \"weight_gb\": %.4f, \"load_s\": %.3f, "
          "\"prefill_tokens\": %llu, \"prefill_tps\": %.2f, \"short_prompt\": %llu, \"decode1_tps\": %.3f, "
          "\"long_prompt\": %llu, \"long_prefill_tps\": %.2f, \"decode1_long_tps\": %.3f, \"batch_decode_tps\": {",
          simd.c_str(), pool.size(), kv_type.c_str(), weight_gb, load_s, static_cast<unsigned long long>(prefill_len),
          prefill_rate, static_cast<unsigned long long>(short_prompt), decode1,
          static_cast<unsigned long long>(long_prompt), after_long.prefill, after_long.decode);
      for (std::size_t i = 0; i < batches.size(); ++i) {
        std::printf("%s\"%zu\": %.3f", i == 0 ? "" : ", ", batches[i], batch_rates[i]);
      }
      std::printf(
          "}, \"peak_rss_mb\": %.1f, \"bandwidth_gbs\": %.3f, \"bandwidth_before_gbs\": %.3f, "
          "\"bandwidth_after_gbs\": %.3f",
          rss_mb, bandwidth, bandwidth_before, bandwidth_after);
      if (count_step_bytes) {
        std::printf(", \"mapped_gb\": %.4f, \"step_read_gb\": %.4f", static_cast<double>(read.mapped) / 1e9,
                    static_cast<double>(read.read) / 1e9);
      }
      std::printf("}\n");
      return 0;
    }
    std::printf("model            %s\n", model.c_str());
    std::printf("simd, threads    %s, %zu\n", simd.c_str(), pool.size());
    std::printf("weights/token    %.3f GB\n", weight_gb);
    std::printf("kv cache         %s\n", kv_type.c_str());
    std::printf("load             %.2f s\n", load_s);
    std::printf("prefill          %.1f tokens/s (%llu-token prompt)\n", prefill_rate,
                static_cast<unsigned long long>(prefill_len));
    std::printf("decode batch 1   %.2f tokens/s (after %llu prompt tokens)\n", decode1,
                static_cast<unsigned long long>(short_prompt));
    if (long_prompt > 0) {
      std::printf("decode batch 1   %.2f tokens/s (after %llu prompt tokens, prefilled at %.1f tokens/s)\n",
                  after_long.decode, static_cast<unsigned long long>(long_prompt), after_long.prefill);
    }
    for (std::size_t i = 0; i < batches.size(); ++i) {
      std::printf("decode batch %-3zu %.2f tokens/s\n", batches[i], batch_rates[i]);
    }
    std::printf("peak RSS         %.0f MB (weights %.0f MB)\n", rss_mb, weight_gb * 1e3);
    if (count_step_bytes) {
      std::printf("decode step reads %.0f MB of the %.0f MB of model files mapped; the weights a token uses: %.0f MB\n",
                  static_cast<double>(read.read) / 1e6, static_cast<double>(read.mapped) / 1e6, weight_gb * 1e3);
    }
    std::printf(
        "decode streams   %.2f GB/s of weights; memory bandwidth %.2f and %.2f GB/s measured before and after it; "
        "%.0f%% of the larger\n",
        streamed, bandwidth_before, bandwidth_after, 100.0 * streamed / bandwidth);
    return 0;
  } catch (const base::UsageError& e) {
    std::cerr << "engine-bench: " << e.what() << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "engine-bench: " << e.what() << '\n';
    return 1;
  }
}
