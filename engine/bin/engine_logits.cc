// engine-logits: the logits of every position of one token sequence, as the engine computes them in one
// prefill step, written as raw little-endian f32 (tokens × vocab, position-major) for comparison with
// other implementations (tests/reference/transformers_check.py); with --embedding, an embedding model's
// pooled embedding of the sequence instead (hidden_size f32), as serverd's /v1/embeddings computes it.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/printable.h"
#include "engine/model/pooling.h"
#include "engine/runtime/engine.h"

namespace {

static_assert(std::endian::native == std::endian::little, "the output is written in the host's byte order");

struct Options {
  std::string model;
  std::string device = "cpu";
  std::string tokens;
  std::string out;
  std::uint64_t threads = 0;
  std::uint64_t kv_cache_mib = 256;
  std::uint64_t max_model_len = 0;  // 0: the sequence's length
  std::string kv_cache_dtype = "auto";
  bool embedding = false;
};

std::vector<std::int32_t> parse_tokens(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    std::int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + at, text.data() + end, id);
    if (ec != std::errc() || ptr != text.data() + end || id < 0) {
      throw base::UsageError("--tokens " + text + ": \"" + text.substr(at, end - at) +
                             "\" is not a token id (give ids separated by commas)");
    }
    ids.push_back(id);
    at = end + 1;
  }
  return ids;
}

int run(const Options& o) {
  const auto tokens = parse_tokens(o.tokens);
  engine::runtime::EngineOptions eo;
  eo.device = *engine::runtime::parse_device(o.device);
  eo.threads = o.threads;
  // As a server started with --max-model-len would run (LongRoPE picks its factors from it).
  if (o.max_model_len != 0 && o.max_model_len < tokens.size()) {
    throw base::UsageError("--max-model-len " + std::to_string(o.max_model_len) + " is shorter than the " +
                           std::to_string(tokens.size()) + " tokens");
  }
  eo.max_model_len = o.max_model_len != 0 ? o.max_model_len : tokens.size();
  // A small explicit cache: one short sequence needs little, and on a GPU the default (a share of the
  // device's memory) would compete with whatever else the comparison has running there.
  eo.kv_cache_bytes = o.kv_cache_mib << 20;
  eo.kv_cache_dtype = *engine::runtime::parse_kv_cache_dtype(o.kv_cache_dtype);  // add_choice checked the name
  auto engine = engine::runtime::Engine::load(o.model, eo);
  const std::size_t vocab = engine->config().vocab_size;
  for (const auto id : tokens) {
    if (static_cast<std::size_t>(id) >= vocab) {
      throw base::UsageError("--tokens: id " + std::to_string(id) + " is not below the vocabulary size " +
                             std::to_string(vocab));
    }
  }

  engine::runtime::SequenceCache cache;
  if (!engine->reserve(cache, tokens.size())) throw std::runtime_error("the KV cache cannot hold the sequence");
  engine::runtime::StepInput input{&cache, tokens, /*all_logits=*/true};
  std::vector<float> values;
  std::size_t width = vocab;
  if (o.embedding) {
    const auto& pooling = engine->checkpoint().pooling();
    if (!pooling) {
      throw base::UsageError("--embedding: " + o.model +
                             " is not an embedding model (no sentence-transformers modules.json, no GGUF "
                             "{arch}.pooling_type)");
    }
    width = engine->config().hidden_size;
    std::vector<float> hidden;
    engine->step_hidden(std::span(&input, 1), hidden);
    if (hidden.size() != tokens.size() * width) throw std::runtime_error("the step returned the wrong number of rows");
    engine::model::PooledState pooled(pooling->type, width);
    pooled.add(0, hidden);
    values = pooled.finish(tokens.size(), 0, pooling->normalize);
  } else {
    engine->step(std::span(&input, 1), values);
    if (values.size() != tokens.size() * vocab)
      throw std::runtime_error("the step returned the wrong number of logits");
  }
  engine->release(cache);

  std::ofstream out(o.out, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) throw std::runtime_error(o.out + ": cannot be written");
  std::printf("%zu %zu f32 on %s\n", o.embedding ? std::size_t{1} : tokens.size(), width,
              std::string(engine->device_name()).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  base::FlagParser flags("usage: engine-logits --model PATH --device cpu|cuda --tokens 1,2,3 --out FILE");
  flags.add_string("model", "PATH", "a model directory (config.json, safetensors, tokenizer) or a .gguf file",
                   &o.model);
  flags.add_choice("device", {"auto", "cpu", "cuda"}, "where to run (default cpu)", &o.device);
  flags.add_string("tokens", "IDS", "token ids separated by commas, run as one prefill", &o.tokens);
  flags.add_string("out", "FILE", "receives tokens x vocab float32 values, little-endian, position-major", &o.out);
  flags.add_uint("threads", "N", "CPU threads (default: one per CPU this process may run on)", &o.threads);
  flags.add_uint("kv-cache-mib", "N", "KV cache size in MiB (default 256)", &o.kv_cache_mib, 1);
  flags.add_uint("max-model-len", "N",
                 "the positions the engine is loaded for, as a server's --max-model-len (default: the tokens')",
                 &o.max_model_len, 1);
  flags.add_switch("embedding",
                   "write the embedding model's pooled embedding of the tokens (hidden_size f32) instead of logits",
                   &o.embedding);
  flags.add_choice("kv-cache-dtype", {"auto", "bfloat16", "float16", "float32"},
                   "how the KV cache stores keys and values (default auto, the engine's choice)", &o.kv_cache_dtype);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    if (o.model.empty()) throw base::UsageError("--model is required");
    if (o.tokens.empty()) throw base::UsageError("--tokens is required");
    if (o.out.empty()) throw base::UsageError("--out is required");
    return run(o);
  } catch (const base::UsageError& e) {
    std::cerr << "engine-logits: " << base::printable(e.what()) << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "engine-logits: " << base::printable(e.what()) << '\n';
    return 1;
  }
}
