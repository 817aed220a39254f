#pragma once

// The engine as serverd and the command-line runner use it: a checkpoint loaded onto a backend, a KV cache
// of blocks shared by sequences, and one call that runs a step over a batch of sequences.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/transformer.h"
#include "engine/runtime/kv_cache_manager.h"
#include "engine/sampling/sampler.h"

namespace engine::runtime {

enum class Device { Auto, Cpu, Cuda };
// "auto", "cpu", "cuda" (vLLM's --device spellings); nullopt otherwise.
std::optional<Device> parse_device(std::string_view name);

// How the KV cache stores keys and values. Auto: f16 on the CPU; on a GPU the checkpoint's precision (bf16
// for 16-bit and quantized checkpoints, f32 for f32 ones).
enum class KvCacheDtype { Auto, BFloat16, Float16, Float32 };
// "auto", "bfloat16", "float16" (vLLM's --kv-cache-dtype spellings) and "float32"; nullopt otherwise.
std::optional<KvCacheDtype> parse_kv_cache_dtype(std::string_view name);

struct EngineOptions {
  Device device = Device::Auto;
  std::size_t threads = 0;  // CPU threads; 0: one per CPU the process may run on (its affinity mask)
  // CPU threads pinned one to each of these CPUs (serverd: a VLLM_CPU_OMP_THREADS_BIND list); empty: not
  // pinned. With cpus, threads is 0 or cpus.size().
  std::vector<int> cpus = {};
  std::size_t max_model_len = 0;   // 0: the config's, lowered to what the KV cache holds
  std::size_t kv_cache_bytes = 0;  // 0: cpu_kv_cache_bytes on the CPU; on a GPU, from gpu_memory_utilization
  // The CPU's KV cache when kv_cache_bytes is 0 (serverd: VLLM_CPU_KVCACHE_SPACE; 4 GiB is vLLM's default).
  std::size_t cpu_kv_cache_bytes = std::size_t{4} << 30;
  std::size_t block_size = kDefaultBlockSize;  // KV cache positions per block (--block-size)
  // The most tokens a step computes (--max-num-batched-tokens; 0: a whole sequence at once): how many blocks a
  // sliding-window group holds at most, and so the longest sequence the cache holds.
  std::size_t max_num_batched_tokens = 0;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // --kv-cache-dtype
  double gpu_memory_utilization = 0.9;               // share of the GPU's memory the engine may take (vLLM's meaning)
  bool enforce_eager = false;                        // GPU: run every step kernel by kernel (no CUDA graphs)
  bool overlap_kernels = true;  // GPU (Hopper on): each kernel may start as the one before finishes
  int cuda_device = 0;
};

// One sequence's place in the KV cache: its blocks (given back when it is dropped) and how many of its
// positions are already computed.
struct SequenceCache {
  BlockTable block_table;
  std::size_t cached = 0;
};

// One sequence's part of a step: new tokens appended after its cached positions.
struct StepInput {
  SequenceCache* cache = nullptr;
  std::span<const std::int32_t> tokens;
  bool all_logits = false;  // logits of every new token (else of the last one only; none when tokens is empty)
  bool no_logits = false;   // none at all (a prompt chunk that is not the prompt's last)
  // Prompt log-probabilities (step_and_sample only): new tokens [score_first, score_first + score_targets.size())
  // each have their logits scored against the token that follows them, score_targets[i], with the score_top
  // most likely tokens. The row a token is sampled from is never among them.
  std::size_t score_first = 0;
  std::span<const std::int32_t> score_targets = {};
  std::size_t score_top = 0;
};

class Engine {
 public:
  // Loads a model directory or .gguf file. Throws ConfigError / FormatError / TokenizerError naming the file,
  // or std::runtime_error for a device that is not available.
  static std::unique_ptr<Engine> load(const std::filesystem::path& model, const EngineOptions& options = {});

  const model::Checkpoint& checkpoint() const { return *checkpoint_; }
  const model::ModelConfig& config() const { return checkpoint_->config(); }
  const tokenizer::Tokenizer& tokenizer() const { return checkpoint_->tokenizer(); }
  std::size_t max_model_len() const { return max_model_len_; }
  std::string_view device_name() const { return backend_->name(); }
  std::size_t block_size() const { return kv_cache_->block_size(); }
  const backend::KvCacheShape& cache_shape() const { return backend_->cache_shape(); }
  // The KV cache's blocks, prefix cache and eviction. It must outlive every SequenceCache it filled.
  KvCacheManager& kv_cache() { return *kv_cache_; }
  const KvCacheManager& kv_cache() const { return *kv_cache_; }

  // Grows the sequence's block table to hold `positions` for a step from its `cached` positions on
  // (KvCacheManager::reserve: sliding-window groups give back what the step's windows pass); false, nothing
  // more taken, when too few blocks are free.
  bool reserve(SequenceCache& sequence, std::size_t positions);
  // Gives the sequence's blocks back and empties it.
  void release(SequenceCache& sequence);

  // Runs one step over the inputs (prefills and decodes mixed; each input's blocks reserved beforehand) and
  // returns their logits, input by input, vocab_size floats per row. Advances each input's `cached`.
  void step(std::span<const StepInput> inputs, std::vector<float>& logits);
  // The same step, returning the final hidden states (hidden_size floats a row) instead of logits: what a
  // pooling model's embeddings are made of (model::PooledState).
  void step_hidden(std::span<const StepInput> inputs, std::vector<float>& hidden);

  // Runs one step and chooses the next token of every input that asks for logits (its last token's; none
  // may ask for all_logits), with samplers[i] the i-th such input's. Sampling runs on the device when the
  // backend can (the logits never leave it), else on the host; either way each sampler records its token.
  // `scores` receives the inputs' scored tokens (StepInput::score_targets), input by input, in order: only
  // those rows' logits are read to the host, and each is scanned once on this thread.
  void step_and_sample(std::span<const StepInput> inputs, std::span<sampling::SequenceSampler* const> samplers,
                       std::vector<sampling::SampledToken>& out, std::vector<sampling::ScoredToken>& scores);
  // The same, for inputs that score nothing.
  void step_and_sample(std::span<const StepInput> inputs, std::span<sampling::SequenceSampler* const> samplers,
                       std::vector<sampling::SampledToken>& out);

 private:
  Engine() = default;
  // Lays the inputs out as one step (layout_): each input's logit rows (all_logits, or its last token), then
  // every input's scored rows. Throws for a sequence past max_model_len or scored rows outside its tokens.
  void lay_out(std::span<const StepInput> inputs);
  // step() and step_hidden(): the step's rows of logits or of hidden states, into `out`.
  void step_rows(std::span<const StepInput> inputs, model::Transformer::Head head, std::vector<float>& out);
  // Scores the inputs' scored tokens from their rows, which start at `rows` on the host.
  void score(std::span<const StepInput> inputs, const float* rows, std::vector<sampling::ScoredToken>& scores);
  // A device sampler reports at most Backend::max_device_logprobs() top log-probabilities: rows asking for
  // more are read back and scanned here.
  void widen_device_logprobs(const backend::Tensor& logits, std::span<sampling::SequenceSampler* const> samplers,
                             std::span<sampling::SampledToken> out);

  std::unique_ptr<model::Checkpoint> checkpoint_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::Transformer> transformer_;
  std::size_t max_model_len_ = 0;
  std::unique_ptr<KvCacheManager> kv_cache_;
  backend::StepLayout layout_;   // reused from step to step
  std::size_t scored_rows_ = 0;  // of layout_.logit_rows, the last ones are scored rows
  std::vector<float> host_logits_;
  std::vector<sampling::SamplingStep> sampling_steps_;
  sampling::LogprobScanner scanner_;
};

}  // namespace engine::runtime
