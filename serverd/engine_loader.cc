#include "serverd/engine_loader.h"

#include <iostream>

#include "engine/runtime/engine.h"
#include "fetchd/client/flags.h"
#include "serverd/scheduler/engine_generator.h"

namespace serverd {

namespace {

class EngineModel final : public LoadedModel {
 public:
  EngineModel(std::unique_ptr<engine::runtime::Engine> engine, const ServerOptions& options)
      : engine_(std::move(engine)) {
    info_.served_name = options.served_model_name;
    info_.root = options.model;
    info_.tokenizer = &engine_->tokenizer();
    info_.chat_template = engine_->chat_template();
    info_.chat_template_error = engine_->chat_template_error();
    info_.max_model_len = engine_->max_model_len();
    info_.vocab_size = engine_->config().vocab_size;
    info_.eos_token_ids = engine_->checkpoint().eos_token_ids();
    const auto& g = engine_->checkpoint().generation_defaults();
    auto to_float = [](const std::optional<double>& v) -> std::optional<float> {
      return v ? std::optional<float>(static_cast<float>(*v)) : std::nullopt;
    };
    info_.defaults.temperature = to_float(g.temperature);
    info_.defaults.top_p = to_float(g.top_p);
    info_.defaults.min_p = to_float(g.min_p);
    info_.defaults.repetition_penalty = to_float(g.repetition_penalty);
    if (g.top_k) info_.defaults.top_k = static_cast<int>(*g.top_k);
    if (g.max_new_tokens) info_.defaults.max_tokens = static_cast<std::size_t>(*g.max_new_tokens);
    scheduler::SchedulerOptions so;
    so.max_num_seqs = options.max_num_seqs;
    so.max_num_batched_tokens = options.max_num_batched_tokens;
    generator_ = std::make_unique<scheduler::EngineGenerator>(*engine_, so);
  }

  const api::ModelInfo& info() const override { return info_; }
  api::Generator& generator() override { return *generator_; }

 private:
  std::unique_ptr<engine::runtime::Engine> engine_;
  api::ModelInfo info_;
  std::unique_ptr<scheduler::EngineGenerator> generator_;  // stopped before the engine goes
};

}  // namespace

std::unique_ptr<LoadedModel> load_model(const ServerOptions& options, const std::function<void(std::string)>& phase) {
  if (!options.reference.is_local()) {
    throw fetchd::client::UsageError("--model " + options.model +
                                     ": hub names are resolved through fetchd, which serverd does not call yet; "
                                     "run `fetchd pull --model " +
                                     options.model + "` and give serverd the path it prints");
  }
  phase("loading");
  engine::runtime::EngineOptions eo;
  eo.device = engine::runtime::parse_device(options.device).value_or(engine::runtime::Device::Auto);
  eo.max_model_len = options.max_model_len;
  auto engine = engine::runtime::Engine::load(options.reference.local_path, eo);
  std::cerr << "serverd: loaded " << options.reference.local_path.string() << " ("
            << engine::model::architecture_name(engine->config().architecture) << ", max_model_len "
            << engine->max_model_len() << ") on " << engine->device_name() << '\n';
  return std::make_unique<EngineModel>(std::move(engine), options);
}

}  // namespace serverd
