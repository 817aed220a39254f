#include "engine/runtime/engine.h"

#include <algorithm>
#include <stdexcept>

namespace engine::runtime {

std::optional<Device> parse_device(std::string_view name) {
  if (name == "auto") return Device::Auto;
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  return std::nullopt;
}

std::unique_ptr<Engine> Engine::load(const std::filesystem::path& model, const EngineOptions& options) {
  if (options.device == Device::Cuda) {
    throw std::runtime_error("--device cuda: this build has no CUDA backend for the engine yet; use --device cpu");
  }
  std::unique_ptr<Engine> engine(new Engine());
  engine->checkpoint_ = model::Checkpoint::open(model);
  const auto& c = engine->checkpoint_->config();
  engine->backend_ = backend::make_cpu_backend(options.threads);

  backend::KvCacheShape shape;
  shape.num_layers = c.num_layers;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.block_size = options.block_size;
  const std::size_t cache_bytes = options.kv_cache_bytes ? options.kv_cache_bytes : std::size_t{4} << 30;
  const std::size_t wanted_len = options.max_model_len ? options.max_model_len : c.max_position_embeddings;
  // No more blocks than a few full-length sequences could use: tiny models should not take gigabytes.
  const std::size_t blocks_for_len = (wanted_len + shape.block_size - 1) / shape.block_size;
  shape.num_blocks = std::min(cache_bytes / shape.bytes_per_block(), blocks_for_len * 64);
  const std::size_t cache_positions = shape.num_blocks * shape.block_size;
  if (shape.num_blocks == 0) {
    throw std::runtime_error("the KV cache of " + std::to_string(cache_bytes) + " bytes holds no block of " +
                             std::to_string(shape.bytes_per_block()) + " bytes; give it more memory");
  }
  if (options.max_model_len && options.max_model_len > cache_positions) {
    throw std::runtime_error("max_model_len " + std::to_string(options.max_model_len) + " is larger than the " +
                             std::to_string(cache_positions) +
                             " positions the KV cache holds; lower --max-model-len or give the cache more memory");
  }
  engine->max_model_len_ = std::min(wanted_len, cache_positions);
  engine->backend_->init_cache(shape, model::rope_spec(c));
  engine->blocks_ = BlockPool(shape.num_blocks);
  engine->transformer_ = std::make_unique<model::Transformer>(c, engine->checkpoint_->weights(), *engine->backend_);

  if (const auto& source = engine->checkpoint_->chat_template()) {
    try {
      engine->chat_template_ = template_::ChatTemplate::parse(*source);
    } catch (const std::exception& e) {
      engine->chat_template_error_ = std::string("the model's chat template cannot be used: ") + e.what();
    }
  } else {
    engine->chat_template_error_ = "the model has no chat template (tokenizer_config.json or GGUF metadata)";
  }
  return engine;
}

bool Engine::reserve(SequenceCache& sequence, std::size_t positions) {
  const std::size_t bs = block_size();
  const std::size_t needed = (positions + bs - 1) / bs;
  if (needed <= sequence.block_table.size()) return true;
  return blocks_.allocate(needed - sequence.block_table.size(), sequence.block_table);
}

void Engine::release(SequenceCache& sequence) {
  blocks_.release(sequence.block_table);
  sequence.block_table.clear();
  sequence.cached = 0;
}

void Engine::step(std::span<const StepInput> inputs, std::vector<float>& logits) {
  layout_.sequences.clear();
  layout_.tokens.clear();
  logit_rows_.clear();
  for (const auto& input : inputs) {
    const std::size_t end = input.cache->cached + input.tokens.size();
    if (end > max_model_len_) {
      throw std::invalid_argument("a sequence would reach " + std::to_string(end) + " positions, past max_model_len " +
                                  std::to_string(max_model_len_));
    }
    const std::size_t first = layout_.tokens.size();
    layout_.sequences.push_back({input.cache->cached, input.tokens.size(), input.cache->block_table});
    layout_.tokens.insert(layout_.tokens.end(), input.tokens.begin(), input.tokens.end());
    if (input.tokens.empty() || input.no_logits) continue;
    if (input.all_logits) {
      for (std::size_t i = 0; i < input.tokens.size(); ++i) logit_rows_.push_back(first + i);
    } else {
      logit_rows_.push_back(layout_.tokens.size() - 1);
    }
  }
  logits.resize(logit_rows_.size() * config().vocab_size);
  transformer_->forward(layout_, logit_rows_, logits);
  for (const auto& input : inputs) input.cache->cached += input.tokens.size();
}

}  // namespace engine::runtime
