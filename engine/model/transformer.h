#pragma once

// The decoder-only transformer shared by Qwen3, Qwen2, Llama, Mistral, Gemma 2 and 3, SmolLM3, Phi-3 and the mixtures
// of experts (Qwen3-MoE, Qwen2-MoE, Mixtral), written once against the backend interface: the differences are data
// (biases, q/k norms, post norms, the activation, the embedding scale, each layer's RoPE and window, a feed-forward
// block of experts), not code paths.

#include <cstddef>
#include <deque>
#include <span>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace engine::model {

// The rotary embedding a config describes for a model serving up to `max_model_len` positions: base
// frequencies over the rotated dimensions, their scaling (linear, dynamic, yarn, llama3, GGUF's rope_freqs
// divisors, or LongRoPE's short or long factors, as max_model_len decides), the factor on cos and sin, the
// pairing of dimensions.
backend::RopeSpec rope_spec(const ModelConfig& config, std::size_t max_model_len);
// The factor RoPE's scaling puts on cos and sin (YaRN's, LongRoPE's; 1 for the others).
double rope_attention_factor(const ModelConfig& config);
// How each layer attends: the model's rotary embeddings (rope_spec's, and Gemma 3's unscaled local one for
// its sliding-window layers) and each layer's window, left out where it is at least `max_model_len` (a
// window no sequence outgrows changes nothing).
backend::AttentionPlan attention_plan(const ModelConfig& config, std::size_t max_model_len);

class Transformer {
 public:
  // Hands every weight to the backend (which keeps it in place or uploads it).
  Transformer(const ModelConfig& config, const ModelWeights& weights, backend::Backend& backend);

  // Runs one step over the layout's tokens (several sequences, prefills and decodes mixed) and writes
  // the logits of the tokens at `layout.logit_rows` (indices into layout.tokens), one vocab-sized row each.
  void forward(const backend::StepLayout& layout, std::span<float> logits);
  // The same step, but writing the final hidden states (after the last norm, before the output matrix) of
  // the tokens at `layout.logit_rows`, one hidden_size row each: what an embedding is pooled from.
  void forward_hidden(const backend::StepLayout& layout, std::span<float> hidden);
  // What a step ends with: the logits, or the hidden states they are computed from.
  enum class Head { Logits, HiddenStates };
  // The step, its output left in the backend's memory (a tensor of no rows when none are asked for).
  backend::Tensor run(const backend::StepLayout& layout, Head head = Head::Logits);

  const ModelConfig& config() const { return config_; }
  // model::attention_plan with what the weights add to it: gpt-oss's attention sinks.
  backend::AttentionPlan attention_plan(std::size_t max_model_len) const;

 private:
  // A mixture-of-experts block's weights; its experts' point into expert_weights_.
  struct Moe {
    backend::Weight router;
    std::optional<backend::Weight> router_bias;
    std::vector<backend::ExpertWeights> experts;
    std::optional<backend::ExpertWeights> shared_expert;
    std::optional<backend::Weight> shared_expert_gate;
  };
  struct Layer {
    backend::Weight attn_norm, q, k, v, o, ffn_norm, gate, up, down;  // gate, up, down: a dense layer's
    std::optional<backend::Weight> q_bias, k_bias, v_bias, q_norm, k_norm, post_attn_norm, post_ffn_norm;
    std::optional<Moe> moe;
    std::optional<backend::Weight> o_bias;
    std::vector<float> sinks;  // one per q head, or none
  };

  // x += in · wᵀ (+ bias), through the layer's post norm first where it has one (Gemma).
  void add_output(backend::Tensor in, const backend::Weight& w, const std::optional<backend::Weight>& bias,
                  const std::optional<backend::Weight>& post_norm, backend::Tensor product, backend::Tensor x);

  const ModelConfig config_;
  backend::Backend& backend_;
  backend::Weight embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  std::deque<backend::Weight> expert_weights_;
};

}  // namespace engine::model
