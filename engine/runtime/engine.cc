#include "engine/runtime/engine.h"

#include <algorithm>
#include <stdexcept>

#if ENGINE_WITH_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_devices.h"
#endif
#include "engine/runtime/kv_cache_groups.h"

namespace engine::runtime {

std::optional<Device> parse_device(std::string_view name) {
  if (name == "auto") return Device::Auto;
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  return std::nullopt;
}

std::optional<KvCacheDtype> parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto") return KvCacheDtype::Auto;
  if (name == "bfloat16") return KvCacheDtype::BFloat16;
  if (name == "float16") return KvCacheDtype::Float16;
  if (name == "float32") return KvCacheDtype::Float32;
  return std::nullopt;
}

namespace {

// The KV cache's element type for the option, on a GPU (`on_device`) or the CPU.
quant::WeightType kv_element_type(KvCacheDtype dtype, bool on_device, quant::WeightType checkpoint_type) {
  switch (dtype) {
    case KvCacheDtype::BFloat16: return quant::WeightType::BF16;
    case KvCacheDtype::Float16: return quant::WeightType::F16;
    case KvCacheDtype::Float32: return quant::WeightType::F32;
    case KvCacheDtype::Auto: break;
  }
  // On a GPU the cache follows the checkpoint's precision (vLLM's "auto"): f32 checkpoints keep f32 keys. On
  // the CPU f16 halves the cache and what long-context attention reads, as bf16 would, but with 3 more bits:
  // a bf16 cache moved the tiny models' log-probabilities from the float64 reference further than llama.cpp
  // (f16 cache) does, f16 stays several times closer (docs/cpu-kernels.md, "Against llama.cpp").
  if (on_device) return checkpoint_type == quant::WeightType::F32 ? quant::WeightType::F32 : quant::WeightType::BF16;
  return quant::WeightType::F16;
}

std::unique_ptr<backend::Backend> make_backend(const EngineOptions& options) {
  Device device = options.device;
#if ENGINE_WITH_CUDA
  if (device == Device::Auto) device = cuda::list_cuda_devices().devices.empty() ? Device::Cpu : Device::Cuda;
  if (device == Device::Cuda) {
    return backend::make_cuda_backend({.device = options.cuda_device,
                                       .enforce_eager = options.enforce_eager,
                                       .overlap_kernels = options.overlap_kernels});
  }
#else
  if (device == Device::Cuda) {
    throw std::runtime_error(
        "--device cuda: this build of the engine has no CUDA backend (nvcc was not found when "
        "it was built; see docs/building.md); use --device cpu");
  }
#endif
  if (!options.cpus.empty() && options.threads != 0 && options.threads != options.cpus.size()) {
    throw std::invalid_argument(std::to_string(options.threads) + " CPU threads cannot be pinned to " +
                                std::to_string(options.cpus.size()) + " CPUs: give threads 0 or one per CPU");
  }
  return backend::make_cpu_backend(options.threads, options.cpus);
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::filesystem::path& model, const EngineOptions& options) {
  if (!(options.gpu_memory_utilization > 0 && options.gpu_memory_utilization <= 1)) {
    throw std::invalid_argument("gpu_memory_utilization " + std::to_string(options.gpu_memory_utilization) +
                                " is outside (0, 1]");
  }
  std::unique_ptr<Engine> engine(new Engine());
  engine->checkpoint_ = model::Checkpoint::open(model);
  const auto& c = engine->checkpoint_->config();
  const std::size_t wanted_len = options.max_model_len ? options.max_model_len : model::derived_max_model_len(c);
  engine->backend_ = make_backend(options);
  // Weights first: on a GPU the KV cache takes what they leave.
  engine->transformer_ = std::make_unique<model::Transformer>(c, engine->checkpoint_->weights(), *engine->backend_);

  backend::KvCacheShape shape;
  shape.num_layers = c.num_layers;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.block_size = options.block_size;
  const auto device_budget = engine->backend_->kv_cache_budget(options.gpu_memory_utilization);
  shape.kv_type =
      kv_element_type(options.kv_cache_dtype, device_budget.has_value(), engine->checkpoint_->weights().embed.type);
  const std::size_t cache_bytes =
      options.kv_cache_bytes ? options.kv_cache_bytes : device_budget.value_or(options.cpu_kv_cache_bytes);
  // What to raise when the cache is too small, by where its size came from.
  const std::string more_memory = options.kv_cache_bytes ? "raise --kv-cache-memory-bytes"
                                  : device_budget        ? "raise --gpu-memory-utilization"
                                                         : "raise VLLM_CPU_KVCACHE_SPACE (GiB)";
  // Sizes the cache for shape.groups: as many blocks as the bytes hold, but no more than a few full-length
  // sequences could use (tiny models should not take gigabytes). Returns the longest sequence it holds, up
  // to wanted_len.
  const auto size_cache = [&] {
    const std::size_t null_blocks = shape.has_null_block() ? 1 : 0;
    const std::size_t blocks_for_len =
        blocks_for_sequence(shape.groups, shape.block_size, wanted_len, options.max_num_batched_tokens);
    shape.num_blocks = std::min(cache_bytes / shape.bytes_per_block(), blocks_for_len * 64 + null_blocks);
    if (shape.num_blocks <= null_blocks) {
      throw std::runtime_error("the KV cache of " + std::to_string(cache_bytes) + " bytes holds no block of " +
                               std::to_string(shape.bytes_per_block()) + " bytes; give it more memory (" + more_memory +
                               ")");
    }
    const std::size_t positions = positions_in_blocks(shape.groups, shape.block_size, shape.num_blocks - null_blocks,
                                                      options.max_num_batched_tokens, wanted_len);
    if (options.max_model_len && options.max_model_len > positions) {
      throw std::runtime_error("max_model_len " + std::to_string(options.max_model_len) + " is larger than the " +
                               std::to_string(positions) + " positions the KV cache of " + std::to_string(cache_bytes) +
                               " bytes holds; lower --max-model-len or " + more_memory);
    }
    return positions;
  };
  // Layers keeping the same positions share blocks; sliding-window layers keep only their window. A window
  // that the cache's longest sequence does not outgrow keeps every position (attention_plan leaves it out):
  // its layers are full ones, which hold fewer positions, so the split is redone until it settles (each pass
  // makes another window full, or none).
  shape.groups = kv_cache_groups(model::attention_plan(c, wanted_len));
  engine->max_model_len_ = size_cache();
  for (auto groups = kv_cache_groups(model::attention_plan(c, engine->max_model_len_)); groups != shape.groups;
       groups = kv_cache_groups(model::attention_plan(c, engine->max_model_len_))) {
    shape.groups = std::move(groups);
    engine->max_model_len_ = std::min(engine->max_model_len_, size_cache());
  }
  try {
    engine->backend_->init_cache(shape, engine->transformer_->attention_plan(engine->max_model_len_));
  } catch (const std::invalid_argument& e) {
    // A backend that lacks what a layer needs refuses the model: say which model.
    throw std::invalid_argument(std::string(model::architecture_name(c.architecture)) + " on the " +
                                std::string(engine->backend_->name()) + " backend: " + e.what());
  }
  engine->kv_cache_ = std::make_unique<KvCacheManager>(shape.num_blocks, shape.block_size, group_windows(shape.groups));
  return engine;
}

bool Engine::reserve(SequenceCache& sequence, std::size_t positions) {
  return kv_cache_->reserve(sequence.block_table, positions, sequence.cached);
}

void Engine::release(SequenceCache& sequence) {
  sequence.block_table.clear();
  sequence.cached = 0;
}

namespace {

// Rows [first, first + count) of a logits tensor.
backend::Tensor logit_rows(const backend::Tensor& logits, std::size_t first, std::size_t count) {
  return {logits.data + first * logits.cols, count, logits.cols};
}

}  // namespace

void Engine::lay_out(std::span<const StepInput> inputs) {
  layout_.sequences.clear();
  layout_.tokens.clear();
  layout_.logit_rows.clear();
  for (const auto& input : inputs) {
    const std::size_t end = input.cache->cached + input.tokens.size();
    if (end > max_model_len_) {
      throw std::invalid_argument("a sequence would reach " + std::to_string(end) + " positions, past max_model_len " +
                                  std::to_string(max_model_len_));
    }
    const std::size_t first = layout_.tokens.size();
    auto& seq = layout_.sequences.emplace_back(backend::StepSequence{input.cache->cached, input.tokens.size(), {}});
    for (std::size_t g = 0; g < kv_cache_->num_groups(); ++g)
      seq.block_tables.push_back(input.cache->block_table.ids(g));
    layout_.tokens.insert(layout_.tokens.end(), input.tokens.begin(), input.tokens.end());
    if (input.tokens.empty() || input.no_logits) continue;
    if (input.all_logits) {
      for (std::size_t i = 0; i < input.tokens.size(); ++i) layout_.logit_rows.push_back(first + i);
    } else {
      layout_.logit_rows.push_back(layout_.tokens.size() - 1);
    }
  }
  // Scored rows last, so that the sampled rows stay one block a device sampler takes as it is.
  scored_rows_ = 0;
  std::size_t first = 0;
  for (const auto& input : inputs) {
    const std::size_t scored = input.score_targets.size();
    if (scored > 0) {
      // (step() and step_and_sample() refuse scored rows beside all_logits before this.)
      const bool samples_last = !input.no_logits && !input.tokens.empty();
      const std::size_t usable = input.tokens.size() - (samples_last ? 1 : 0);
      if (input.score_first + scored > usable) {
        throw std::invalid_argument("a step input scores new tokens [" + std::to_string(input.score_first) + ", " +
                                    std::to_string(input.score_first + scored) + ") of " +
                                    std::to_string(input.tokens.size()) +
                                    (samples_last ? ", the last of which it samples from" : ""));
      }
      for (std::size_t i = 0; i < scored; ++i) layout_.logit_rows.push_back(first + input.score_first + i);
      scored_rows_ += scored;
    }
    first += input.tokens.size();
  }
}

void Engine::step(std::span<const StepInput> inputs, std::vector<float>& logits) {
  step_rows(inputs, model::Transformer::Head::Logits, logits);
}

void Engine::step_hidden(std::span<const StepInput> inputs, std::vector<float>& hidden) {
  step_rows(inputs, model::Transformer::Head::HiddenStates, hidden);
}

void Engine::step_rows(std::span<const StepInput> inputs, model::Transformer::Head head, std::vector<float>& out) {
  for (const auto& input : inputs) {
    if (!input.score_targets.empty()) throw std::invalid_argument("Engine::step: scoring tokens needs step_and_sample");
  }
  lay_out(inputs);
  if (head == model::Transformer::Head::Logits) {
    out.resize(layout_.logit_rows.size() * config().vocab_size);
    transformer_->forward(layout_, out);
  } else {
    out.resize(layout_.logit_rows.size() * config().hidden_size);
    transformer_->forward_hidden(layout_, out);
  }
  for (const auto& input : inputs) input.cache->cached += input.tokens.size();
}

void Engine::step_and_sample(std::span<const StepInput> inputs, std::span<sampling::SequenceSampler* const> samplers,
                             std::vector<sampling::SampledToken>& out) {
  std::vector<sampling::ScoredToken> none;
  step_and_sample(inputs, samplers, out, none);
}

void Engine::step_and_sample(std::span<const StepInput> inputs, std::span<sampling::SequenceSampler* const> samplers,
                             std::vector<sampling::SampledToken>& out, std::vector<sampling::ScoredToken>& scores) {
  for (const auto& input : inputs) {
    if (input.all_logits) throw std::invalid_argument("step_and_sample: an input asks for all its logits");
  }
  lay_out(inputs);
  const std::size_t rows = layout_.logit_rows.size() - scored_rows_;
  if (samplers.size() != rows) {
    throw std::invalid_argument("step_and_sample: " + std::to_string(rows) + " inputs want a token but " +
                                std::to_string(samplers.size()) + " samplers were given");
  }
  out.resize(rows);
  scores.clear();
  const std::size_t vocab = config().vocab_size;
  if (backend_->samples_on_device()) {
    const backend::Tensor logits = transformer_->run(layout_);
    // Only the scored rows come to the host.
    host_logits_.resize(scored_rows_ * vocab);
    if (scored_rows_ > 0) backend_->read(logit_rows(logits, rows, scored_rows_), host_logits_);
    const backend::Tensor sampled = logit_rows(logits, 0, rows);
    sampling_steps_.clear();
    for (auto* sampler : samplers) sampling_steps_.push_back(sampler->device_step(vocab));
    if (rows > 0) backend_->sample(sampled, sampling_steps_, out);
    for (std::size_t i = 0; i < rows; ++i) samplers[i]->record(out[i].token);
    widen_device_logprobs(sampled, samplers, out);
    score(inputs, host_logits_.data(), scores);
  } else {
    host_logits_.resize(layout_.logit_rows.size() * vocab);
    transformer_->forward(layout_, host_logits_);
    for (std::size_t i = 0; i < rows; ++i)
      out[i] = samplers[i]->sample(std::span(host_logits_.data() + i * vocab, vocab));
    score(inputs, host_logits_.data() + rows * vocab, scores);
  }
  for (const auto& input : inputs) input.cache->cached += input.tokens.size();
}

void Engine::score(std::span<const StepInput> inputs, const float* rows, std::vector<sampling::ScoredToken>& scores) {
  const std::size_t vocab = config().vocab_size;
  scores.reserve(scored_rows_);
  for (const auto& input : inputs) {
    for (const std::int32_t target : input.score_targets) {
      scores.push_back(scanner_.score(std::span(rows, vocab), target, input.score_top));
      rows += vocab;
    }
  }
}

void Engine::widen_device_logprobs(const backend::Tensor& logits, std::span<sampling::SequenceSampler* const> samplers,
                                   std::span<sampling::SampledToken> out) {
  const int device_limit = backend_->max_device_logprobs();
  std::vector<float> row;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int wanted = samplers[i]->params().logprobs;
    if (wanted <= device_limit) continue;
    row.resize(logits.cols);
    backend_->read(logit_rows(logits, i, 1), row);
    auto scored = scanner_.score(row, out[i].token, static_cast<std::size_t>(wanted));
    out[i].logprob = scored.logprob;
    out[i].top = std::move(scored.top);
  }
}

}  // namespace engine::runtime
