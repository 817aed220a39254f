#include "engine/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>

namespace engine::model {

using backend::Tensor;

namespace {

// YaRN's ramp over frequency indices: 0 below the dimension that turns beta_fast times over the original
// context, 1 above the one that turns beta_slow times, linear between.
std::vector<double> yarn_ramp(const RopeScaling& s, double rope_theta, std::size_t head_dim) {
  const double dim = static_cast<double>(head_dim);
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2 * std::numbers::pi)) / (2 * std::log(rope_theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // no division by zero; the ramp becomes a step
  std::vector<double> ramp(head_dim / 2);
  for (std::size_t i = 0; i < ramp.size(); ++i) {
    ramp[i] = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
  }
  return ramp;
}

}  // namespace

backend::RopeSpec rope_spec(const ModelConfig& config, std::size_t max_model_len) {
  backend::RopeSpec spec;
  spec.interleaved = config.rope_pairing == RopePairing::Interleaved;
  spec.attention_factor = rope_attention_factor(config);
  const std::size_t rotary = rotary_dims(config);
  const std::size_t half = rotary / 2;
  const double dim = static_cast<double>(rotary);
  const auto& s = config.rope_scaling;
  double base = config.rope_theta;
  if (s && s->type == RopeType::Dynamic) {
    // NTK-aware scaling with the base stretched once for factor x max_position_embeddings positions, as
    // vLLM does: transformers re-derives it as a sequence grows past max_position_embeddings, which keys
    // already in a shared cache could not follow.
    base *= std::pow(s->factor * s->factor - (s->factor - 1), dim / (dim - 2));
  }
  spec.inv_freq.resize(half);
  for (std::size_t i = 0; i < half; ++i) spec.inv_freq[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
  if (!config.rope_freq_factors.empty()) {
    for (std::size_t i = 0; i < half; ++i) spec.inv_freq[i] /= config.rope_freq_factors[i];
    return spec;
  }
  if (!s) return spec;
  switch (s->type) {
    case RopeType::Linear:
      for (auto& f : spec.inv_freq) f /= s->factor;
      break;
    case RopeType::Dynamic: break;
    case RopeType::Yarn: {
      // Low dimensions (fast rotations) keep their frequency, high ones are interpolated (divided by
      // factor), the ramp blends the band between.
      const auto ramp = yarn_ramp(*s, config.rope_theta, rotary);
      for (std::size_t i = 0; i < half; ++i) {
        const double kept = 1 - ramp[i];
        spec.inv_freq[i] = spec.inv_freq[i] / s->factor * (1 - kept) + spec.inv_freq[i] * kept;
      }
      break;
    }
    case RopeType::Llama3: {
      // Long wavelengths are slowed by `factor`, short ones kept, and the band between blended.
      const double old_len = static_cast<double>(s->original_max_position_embeddings);
      const double low_freq_wavelen = old_len / s->low_freq_factor;
      const double high_freq_wavelen = old_len / s->high_freq_factor;
      for (auto& f : spec.inv_freq) {
        const double wavelen = 2 * std::numbers::pi / f;
        if (wavelen > low_freq_wavelen) {
          f /= s->factor;
        } else if (wavelen >= high_freq_wavelen) {
          const double smooth = (old_len / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
          f = (1 - smooth) * f / s->factor + smooth * f;
        }
      }
      break;
    }
    case RopeType::LongRope: {
      // One divisor per frequency, the long set where the model may outgrow its original context.
      const auto& factors = max_model_len > s->original_max_position_embeddings ? s->long_factor : s->short_factor;
      for (std::size_t i = 0; i < half; ++i) spec.inv_freq[i] /= factors.at(i);
      break;
    }
  }
  return spec;
}

double rope_attention_factor(const ModelConfig& config) {
  const auto& s = config.rope_scaling;
  if (!s || (s->type != RopeType::Yarn && s->type != RopeType::LongRope)) return 1.0;
  if (s->attention_factor) return *s->attention_factor;
  if (s->type == RopeType::LongRope) return longrope_attention_factor(s->factor, s->original_max_position_embeddings);
  const auto magnitude = [&](double mscale) { return s->factor <= 1 ? 1.0 : 0.1 * mscale * std::log(s->factor) + 1; };
  if (s->mscale != 0 && s->mscale_all_dim != 0) return magnitude(s->mscale) / magnitude(s->mscale_all_dim);
  return magnitude(1.0);
}

backend::AttentionPlan attention_plan(const ModelConfig& config, std::size_t max_model_len) {
  backend::AttentionPlan plan;
  plan.ropes.push_back(rope_spec(config, max_model_len));
  std::optional<std::size_t> local_rope;
  if (config.sliding_rope_theta) {
    ModelConfig local = config;
    local.rope_theta = *config.sliding_rope_theta;
    local.rope_scaling.reset();
    local.rope_freq_factors.clear();
    local_rope = plan.ropes.size();
    plan.ropes.push_back(rope_spec(local, max_model_len));
  }
  for (std::size_t i = 0; i < config.num_layers; ++i) {
    backend::LayerAttention& layer = plan.layers.emplace_back();
    layer.logit_softcap = static_cast<float>(config.attn_logit_softcapping.value_or(0.0));
    if (!config.rope_layers.empty() && !config.rope_layers[i]) layer.rope.reset();
    if (!is_sliding_layer(config, i)) continue;
    if (local_rope && layer.rope) layer.rope = local_rope;
    if (*config.sliding_window < max_model_len) layer.sliding_window = *config.sliding_window;
  }
  return plan;
}

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, backend::Backend& backend)
    : config_(config), backend_(backend) {
  auto add = [&](const backend::WeightSource& source) { return backend_.add_weight(source); };
  auto add_optional = [&](const std::optional<backend::WeightSource>& source) -> std::optional<backend::Weight> {
    if (!source) return std::nullopt;
    return add(*source);
  };
  const bool tied = weights.lm_head.bytes.data() == weights.embed.bytes.data();
  backend::WeightSource embed = weights.embed;
  embed.lookup_only = !tied;
  embed_ = add(embed);
  final_norm_ = add(weights.final_norm);
  lm_head_ = tied ? embed_ : add(weights.lm_head);
  // An MLP's three matrices (and biases), kept where the ExpertWeights pointing at them stay valid.
  const auto kept = [&](const backend::WeightSource& source) { return &expert_weights_.emplace_back(add(source)); };
  const auto kept_optional = [&](const std::optional<backend::WeightSource>& source) {
    return source ? kept(*source) : nullptr;
  };
  const auto add_mlp = [&](const MlpWeights& m) {
    return backend::ExpertWeights{kept(m.gate),
                                  kept(m.up),
                                  kept(m.down),
                                  kept_optional(m.gate_bias),
                                  kept_optional(m.up_bias),
                                  kept_optional(m.down_bias)};
  };
  for (const auto& l : weights.layers) {
    const bool dense = !l.moe;
    Layer& layer = layers_.emplace_back(Layer{add(l.attn_norm),
                                              add(l.q),
                                              add(l.k),
                                              add(l.v),
                                              add(l.o),
                                              add(l.ffn_norm),
                                              dense ? add(l.gate) : backend::Weight{},
                                              dense ? add(l.up) : backend::Weight{},
                                              dense ? add(l.down) : backend::Weight{},
                                              add_optional(l.q_bias),
                                              add_optional(l.k_bias),
                                              add_optional(l.v_bias),
                                              add_optional(l.q_norm),
                                              add_optional(l.k_norm),
                                              add_optional(l.post_attn_norm),
                                              add_optional(l.post_ffn_norm),
                                              std::nullopt,
                                              add_optional(l.o_bias),
                                              {}});
    if (l.sinks) {
      const auto values = l.sinks->bytes;  // f32: the checkpoint widens vectors
      layer.sinks.resize(l.sinks->cols);
      std::memcpy(layer.sinks.data(), values.data(), layer.sinks.size() * sizeof(float));
    }
    if (dense) continue;
    Moe& moe = layer.moe.emplace(Moe{add(l.moe->router),
                                     add_optional(l.moe->router_bias),
                                     {},
                                     std::nullopt,
                                     add_optional(l.moe->shared_expert_gate)});
    for (const auto& expert : l.moe->experts) moe.experts.push_back(add_mlp(expert));
    if (l.moe->shared_expert) moe.shared_expert = add_mlp(*l.moe->shared_expert);
  }
}

backend::AttentionPlan Transformer::attention_plan(std::size_t max_model_len) const {
  backend::AttentionPlan plan = model::attention_plan(config_, max_model_len);
  for (std::size_t i = 0; i < layers_.size(); ++i) plan.layers[i].sinks = layers_[i].sinks;
  return plan;
}

namespace {

// Runs the step and reads its `width`-wide rows into `out`, after checking `out` holds them.
void read_rows(Transformer& transformer, backend::Backend& backend, const backend::StepLayout& layout,
               Transformer::Head head, std::size_t width, std::span<float> out, std::string_view caller) {
  const std::size_t rows = layout.logit_rows.size();
  if (out.size() != rows * width) {
    throw std::invalid_argument(std::string(caller) + ": " + std::to_string(rows) + " rows need " +
                                std::to_string(rows * width) + " floats, got " + std::to_string(out.size()));
  }
  const Tensor result = transformer.run(layout, head);
  if (result.rows > 0) backend.read(result, out);
}

}  // namespace

void Transformer::forward(const backend::StepLayout& layout, std::span<float> logits) {
  read_rows(*this, backend_, layout, Head::Logits, config_.vocab_size, logits, "Transformer::forward");
}

void Transformer::forward_hidden(const backend::StepLayout& layout, std::span<float> hidden) {
  read_rows(*this, backend_, layout, Head::HiddenStates, config_.hidden_size, hidden, "Transformer::forward_hidden");
}

void Transformer::add_output(Tensor in, const backend::Weight& w, const std::optional<backend::Weight>& bias,
                             const std::optional<backend::Weight>& post_norm, Tensor product, Tensor x) {
  if (!post_norm && !bias) {
    backend_.matmul_add(in, w, product, x);
    return;
  }
  backend_.matmul(in, w, bias ? &*bias : nullptr, product);
  if (post_norm) backend_.rms_norm(product, *post_norm, static_cast<float>(config_.rms_norm_eps), product);
  backend_.add(x, product);
}

Tensor Transformer::run(const backend::StepLayout& layout, Head head) {
  const auto& c = config_;
  const auto& logit_rows = layout.logit_rows;
  const std::size_t tokens = layout.tokens.size();
  for (const auto row : logit_rows) {
    if (row >= tokens) throw std::invalid_argument("Transformer::forward: logit row past the step's tokens");
  }
  if (tokens == 0) return {};

  backend_.begin_step(layout);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::size_t q_width = c.num_heads * c.head_dim;
  const std::size_t kv_width = c.num_kv_heads * c.head_dim;
  // YaRN's and LongRoPE's factor on cos and sin is the backend's (RopeSpec::attention_factor): it scales
  // only the rotated dimensions of the layers that rotate.
  const float scale =
      1.0f / std::sqrt(static_cast<float>(c.query_pre_attn_scalar.value_or(static_cast<double>(c.head_dim))));

  // One set of buffers serves every layer.
  const Tensor x = backend_.alloc(tokens, c.hidden_size);
  const Tensor h = backend_.alloc(tokens, c.hidden_size);
  const Tensor q = backend_.alloc(tokens, q_width);
  const Tensor k = backend_.alloc(tokens, kv_width);
  const Tensor v = backend_.alloc(tokens, kv_width);
  const Tensor attn = backend_.alloc(tokens, q_width);
  // The dense feed-forward block's (a mixture's layers use the backend's own buffers).
  const bool dense = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return !l.moe; });
  const Tensor gate = dense ? backend_.alloc(tokens, c.intermediate_size) : Tensor{};
  const Tensor up = dense ? backend_.alloc(tokens, c.intermediate_size) : Tensor{};

  backend_.embed(embed_, x);
  if (c.embedding_scale) backend_.scale(x, static_cast<float>(*c.embedding_scale));
  // x is the residual stream: each sub-block reads it through its norm and adds its output projection back.
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const backend::Projection qkv[] = {{&l.q, l.q_bias ? &*l.q_bias : nullptr, q},
                                       {&l.k, l.k_bias ? &*l.k_bias : nullptr, k},
                                       {&l.v, l.v_bias ? &*l.v_bias : nullptr, v}};
    backend_.norm_matmul_group(x, l.attn_norm, eps, h, qkv);
    backend_.qk_norm_rope_store(i, q, k, v, l.q_norm ? &*l.q_norm : nullptr, l.k_norm ? &*l.k_norm : nullptr, eps,
                                c.head_dim);
    backend_.attention(i, q, scale, attn);
    add_output(attn, l.o, l.o_bias, l.post_attn_norm, h, x);

    if (l.moe) {
      backend_.rms_norm(x, l.ffn_norm, eps, h);
      backend_.moe_add(h,
                       {.router = &l.moe->router,
                        .experts = l.moe->experts,
                        .top_k = c.moe->experts_per_token,
                        .normalize_top_k = c.moe->norm_topk_prob,
                        .shared_expert = l.moe->shared_expert ? &*l.moe->shared_expert : nullptr,
                        .shared_expert_gate = l.moe->shared_expert_gate ? &*l.moe->shared_expert_gate : nullptr,
                        .router_bias = l.moe->router_bias ? &*l.moe->router_bias : nullptr,
                        .clamped_swiglu = c.moe->swiglu_limit ? std::optional<backend::ClampedSwiglu>(
                                                                    {.limit = static_cast<float>(*c.moe->swiglu_limit)})
                                                              : std::nullopt},
                       x);
      continue;
    }
    const backend::Projection gate_up[] = {{&l.gate, nullptr, gate}, {&l.up, nullptr, up}};
    backend_.norm_matmul_group(x, l.ffn_norm, eps, h, gate_up);
    if (c.activation == Activation::Silu && !l.post_ffn_norm) {
      backend_.swiglu_matmul_add(gate, up, l.down, h, x);  // one kernel on a GPU
    } else {
      if (c.activation == Activation::Silu) {
        backend_.silu_mul(gate, up, gate);
      } else {
        backend_.gelu_tanh_mul(gate, up, gate);
      }
      add_output(gate, l.down, std::nullopt, l.post_ffn_norm, h, x);
    }
  }
  if (logit_rows.empty()) return {};
  const Tensor last = backend_.alloc(logit_rows.size(), c.hidden_size);
  backend_.gather_logit_rows(x, last);
  backend_.rms_norm(last, final_norm_, eps, last);
  if (head == Head::HiddenStates) return last;
  const Tensor out = backend_.alloc(logit_rows.size(), c.vocab_size);
  backend_.matmul(last, lm_head_, nullptr, out);
  if (c.final_logit_softcapping) backend_.softcap(out, static_cast<float>(*c.final_logit_softcapping));
  return out;
}

}  // namespace engine::model
