#include "serverd/loader/engine_loader.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>

#include "base/flags.h"
#include "base/printable.h"
#include "engine/model/model_config.h"
#include "engine/runtime/engine.h"
#include "engine/template/chat_template.h"
#include "serverd/api/grammar_constraints.h"
#include "serverd/fetch/fetchd_client.h"
#include "serverd/loader/chat_template_flag.h"
#include "serverd/loader/checkpoint_flags.h"
#include "serverd/loader/engine_options.h"
#include "serverd/loader/generation_settings.h"
#include "serverd/scheduler/scheduler.h"

namespace serverd {

namespace {

// The tokenizer requests are encoded with: the model's, or --tokenizer's, with the chat template that comes
// with it (unless --chat-template names one).
struct PromptSources {
  std::optional<engine::tokenizer::Tokenizer> tokenizer;  // --tokenizer's; unset: the checkpoint's
  engine::template_::ModelChatTemplate chat_template;
};

class EngineModel final : public LoadedModel {
 public:
  EngineModel(std::unique_ptr<fetch::FetchdChild> fetchd, std::unique_ptr<engine::runtime::Engine> engine,
              PromptSources prompts, const ServerOptions& options, std::optional<engine::model::PoolingConfig> pooling)
      : fetchd_(std::move(fetchd)), engine_(std::move(engine)), prompts_(std::move(prompts)) {
    const auto& tokenizer = prompts_.tokenizer ? *prompts_.tokenizer : engine_->tokenizer();
    info_.served_name = options.served_model_name.front();
    info_.aliases.assign(options.served_model_name.begin() + 1, options.served_model_name.end());
    info_.root = options.model;
    info_.tokenizer = &tokenizer;
    info_.chat_template = prompts_.chat_template.get();
    info_.chat_template_error = prompts_.chat_template.unusable_reason;
    info_.max_model_len = engine_->max_model_len();
    info_.vocab_size = engine_->config().vocab_size;
    info_.pooling = pooling;
    info_.matryoshka = engine_->checkpoint().matryoshka();

    const auto g = resolve_generation_defaults(options, engine_->checkpoint().generation_defaults());
    // Every id that ends a sequence: the checkpoint's, and those of --tokenizer and --generation-config DIR.
    std::set<std::int32_t> eos(engine_->checkpoint().eos_token_ids().begin(),
                               engine_->checkpoint().eos_token_ids().end());
    if (const auto id = tokenizer.eos_id()) eos.insert(*id);
    for (const auto id : g.eos_token_ids) eos.insert(static_cast<std::int32_t>(id));
    info_.eos_token_ids.assign(eos.begin(), eos.end());
    info_.constraints = structured_outputs(tokenizer, info_.vocab_size, info_.eos_token_ids);
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
    so.prefix_caching = options.enable_prefix_caching;
    so.pooling = pooling.has_value();
    so.eos_token_ids = info_.eos_token_ids;
    info_.kv_cache.block_size = engine_->block_size();
    info_.kv_cache.num_blocks = engine_->kv_cache().num_blocks();
    info_.kv_cache.prefix_caching = so.prefix_caching;
    info_.kv_cache.gpu_memory_utilization = options.gpu_memory_utilization;
    generator_ = std::make_unique<scheduler::Scheduler>(*engine_, so);
  }

  const api::ModelInfo& info() const override { return info_; }
  api::Generator& generator() override { return *generator_; }

 private:
  // The grammar engine over this model's vocabulary; null (structured outputs refused with a 400) when the
  // tokenizer cannot describe its tokens as bytes, which the log says once.
  api::ConstraintCompiler* structured_outputs(const engine::tokenizer::Tokenizer& tokenizer, std::size_t logits_width,
                                              const std::vector<std::int32_t>& stop_ids) {
    try {
      constraints_ = std::make_unique<api::GrammarConstraints>(tokenizer, logits_width, stop_ids);
    } catch (const engine::grammar::GrammarError& e) {
      std::cerr << "serverd: structured outputs are not served for this model: " << base::printable(e.what()) << '\n';
    }
    return constraints_.get();
  }

  std::unique_ptr<fetch::FetchdChild> fetchd_;  // the child fetchd, when serverd started one
  std::unique_ptr<engine::runtime::Engine> engine_;
  PromptSources prompts_;                                 // parsed here, where prompts are built
  std::unique_ptr<api::GrammarConstraints> constraints_;  // what info_.constraints points to
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

// Where `name` (a local path or a hub name) is on disk: directly, or through fetchd (started as a child
// the first time one is needed, unless --fetchd names a sidecar).
std::filesystem::path resolve(const std::string& name, const std::string& revision, const ServerOptions& options,
                              std::unique_ptr<fetch::FetchdChild>& child, const std::function<void(std::string)>& phase,
                              std::stop_token stop) {
  const auto reference = fetchd::request::parse_model_reference(name);
  if (reference.is_local()) return reference.local_path;
  std::string address = options.fetchd_address;
  if (address.empty()) {
    if (!child) child = fetch::FetchdChild::start(fetch::find_fetchd_binary());
    address = child->address();
  }
  phase("downloading");
  std::cerr << "serverd: resolving " << base::printable(name) << " through fetchd at " << address << '\n';
  ProgressLog log;
  // A stop while fetching ends the download through the child (a sidecar's download goes on for others).
  const std::stop_callback cancel(stop, [&child] {
    if (child) child->terminate();
  });
  const auto result =
      fetch::resolve(address, {name, revision, options.download_dir}, [&](const ::fetch::v1::Progress& p) { log(p); });
  std::cerr << "serverd: " << base::printable(name + (result.commit().empty() ? "" : " at " + result.commit()))
            << " is " << base::printable(result.local_path()) << (result.from_cache() ? " (from the cache)" : "")
            << '\n';
  return result.local_path();
}

std::string precision_of(const engine::model::Checkpoint& checkpoint) {
  // An FP8 checkpoint's precision is that of its unquantized tensors (vLLM's --dtype names it).
  const auto q = checkpoint.weights().layers.front().q.type;
  switch (q == engine::quant::WeightType::F8_E4M3 ? checkpoint.weights().embed.type : q) {
    case engine::quant::WeightType::F32: return "float32";
    case engine::quant::WeightType::F16: return "float16";
    case engine::quant::WeightType::BF16: return "bfloat16";
    default:
      return "ggml-quantized (" +
             std::string(engine::quant::weight_type_name(checkpoint.weights().layers.front().q.type)) + ")";
  }
}

// --tokenizer and --chat-template over the checkpoint's own.
PromptSources prompt_sources(const ServerOptions& options, const engine::runtime::Engine& engine,
                             std::unique_ptr<fetch::FetchdChild>& child, const std::function<void(std::string)>& phase,
                             std::stop_token stop) {
  PromptSources sources;
  std::optional<std::string> template_source = engine.checkpoint().chat_template();
  if (!options.tokenizer.empty()) {
    const auto dir = resolve(options.tokenizer, "", options, child, phase, stop);
    sources.tokenizer = engine::tokenizer::Tokenizer::from_directory(dir);
    if (sources.tokenizer->vocab_size() > engine.config().vocab_size) {
      throw base::UsageError("--tokenizer " + options.tokenizer + " has " +
                             std::to_string(sources.tokenizer->vocab_size()) +
                             " tokens but the model's embedding has " + std::to_string(engine.config().vocab_size) +
                             " rows; use the model's own tokenizer");
    }
    template_source = engine::model::directory_chat_template(dir, *sources.tokenizer);
    std::cerr << "serverd: tokenizer from " << base::printable(dir.string()) << '\n';
  }
  if (!options.chat_template.empty()) {
    sources.chat_template =
        engine::template_::ModelChatTemplate::from_source(read_chat_template_flag(options.chat_template));
    if (!sources.chat_template.get()) {
      throw base::UsageError("--chat-template: " + sources.chat_template.unusable_reason);
    }
    return sources;
  }
  sources.chat_template = engine::template_::ModelChatTemplate::from_source(template_source);
  return sources;
}

}  // namespace

std::unique_ptr<LoadedModel> load_model(const ServerOptions& options, const std::function<void(std::string)>& phase,
                                        std::stop_token stop) {
  std::unique_ptr<fetch::FetchdChild> child;
  const std::filesystem::path path = resolve(options.model, options.revision, options, child, phase, stop);
  phase("loading");
  auto engine = engine::runtime::Engine::load(path, engine_options(options));
  std::error_code ec;
  const auto& fp8 = engine->config().fp8;
  const CheckpointFacts facts{std::filesystem::is_regular_file(path, ec), precision_of(engine->checkpoint()),
                              engine::model::derived_max_model_len(engine->config()),
                              fp8                              ? fp8->quant_method
                              : engine->config().mxfp4_experts ? std::string("mxfp4")
                                                               : std::string()};
  auto notes = check_checkpoint_flags(options, facts);
  const auto pooling = resolve_runner(options, engine->checkpoint().pooling(), notes);
  for (const auto& note : notes) std::cerr << "serverd: " << note << '\n';
  std::cerr << "serverd: loaded " << base::printable(path.string()) << " ("
            << engine::model::architecture_name(engine->config().architecture) << ", max_model_len "
            << engine->max_model_len() << ") on " << engine->device_name() << '\n';
  auto prompts = prompt_sources(options, *engine, child, phase, stop);
  return std::make_unique<EngineModel>(std::move(child), std::move(engine), std::move(prompts), options, pooling);
}

}  // namespace serverd
