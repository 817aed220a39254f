#include "serverd/loader/engine_loader.h"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "base/printable.h"
#include "engine/runtime/engine.h"
#include "engine/template/chat_template.h"
#include "serverd/fetch/fetchd_client.h"
#include "serverd/scheduler/scheduler.h"

namespace serverd {

namespace {

class EngineModel final : public LoadedModel {
 public:
  EngineModel(std::unique_ptr<fetch::FetchdChild> fetchd, std::unique_ptr<engine::runtime::Engine> engine,
              const ServerOptions& options)
      : fetchd_(std::move(fetchd)),
        engine_(std::move(engine)),
        chat_template_(engine::template_::ModelChatTemplate::from_source(engine_->checkpoint().chat_template())) {
    info_.served_name = options.served_model_name;
    info_.root = options.model;
    info_.tokenizer = &engine_->tokenizer();
    info_.chat_template = chat_template_.get();
    info_.chat_template_error = chat_template_.unusable_reason;
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
    info_.kv_cache.block_size = engine_->block_size();
    info_.kv_cache.num_blocks = engine_->kv_cache().num_blocks();
    info_.kv_cache.prefix_caching = so.prefix_caching;
    info_.kv_cache.gpu_memory_utilization = options.gpu_memory_utilization;
    generator_ = std::make_unique<scheduler::Scheduler>(*engine_, so);
  }

  const api::ModelInfo& info() const override { return info_; }
  api::Generator& generator() override { return *generator_; }

 private:
  std::unique_ptr<fetch::FetchdChild> fetchd_;  // the child fetchd, when serverd started one
  std::unique_ptr<engine::runtime::Engine> engine_;
  engine::template_::ModelChatTemplate chat_template_;  // parsed here, where prompts are built
  api::ModelInfo info_;
  std::unique_ptr<scheduler::Scheduler> generator_;  // stopped before the engine goes
};

// Logs fetchd's progress: each file's start and end, and at most every two seconds in between.
class ProgressLog {
 public:
  void operator()(const ::fetch::v1::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool done = p.bytes_total() > 0 && p.bytes_done() == p.bytes_total();
    if (p.file() == file_ && !done && now - last_ < std::chrono::seconds(2)) return;
    if (p.file() == file_ && done && done_) return;
    file_ = p.file();
    done_ = done;
    last_ = now;
    if (p.file().empty()) return;
    std::fprintf(stderr, "serverd: fetching %s: %.1f of %.1f MB\n", base::printable(p.file()).c_str(),
                 static_cast<double>(p.bytes_done()) / 1e6, static_cast<double>(p.bytes_total()) / 1e6);
  }

 private:
  std::string file_;
  bool done_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

std::unique_ptr<LoadedModel> load_model(const ServerOptions& options, const std::function<void(std::string)>& phase) {
  std::unique_ptr<fetch::FetchdChild> child;
  std::filesystem::path path = options.reference.local_path;
  if (!options.reference.is_local()) {
    std::string address = options.fetchd_address;
    if (address.empty()) {
      child = fetch::FetchdChild::start(fetch::find_fetchd_binary());
      address = child->address();
    }
    phase("downloading");
    std::cerr << "serverd: resolving " << base::printable(options.model) << " through fetchd at " << address << '\n';
    ProgressLog log;
    const auto result = fetch::resolve(address, {options.model, options.revision, options.download_dir},
                                       [&](const ::fetch::v1::Progress& p) { log(p); });
    path = result.local_path();
    std::cerr << "serverd: "
              << base::printable(options.model + (result.commit().empty() ? "" : " at " + result.commit())) << " is "
              << base::printable(path.string()) << (result.from_cache() ? " (from the cache)" : "") << '\n';
  }
  phase("loading");
  engine::runtime::EngineOptions eo;
  eo.device = engine::runtime::parse_device(options.device).value_or(engine::runtime::Device::Auto);
  eo.max_model_len = options.max_model_len;
  eo.block_size = options.block_size;
  eo.gpu_memory_utilization = options.gpu_memory_utilization;
  eo.enforce_eager = options.enforce_eager;
  auto engine = engine::runtime::Engine::load(path, eo);
  std::cerr << "serverd: loaded " << base::printable(path.string()) << " ("
            << engine::model::architecture_name(engine->config().architecture) << ", max_model_len "
            << engine->max_model_len() << ") on " << engine->device_name() << '\n';
  return std::make_unique<EngineModel>(std::move(child), std::move(engine), options);
}

}  // namespace serverd
