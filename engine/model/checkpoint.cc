#include "engine/model/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "engine/format/gguf.h"
#include "engine/format/gguf_split.h"
#include "engine/format/safetensors.h"
#include "engine/format/safetensors_index.h"
#include "engine/model/gpt_oss_experts.h"
#include "engine/quant/quant.h"

namespace engine::model {

namespace fs = std::filesystem;
using backend::WeightSource;
using quant::WeightType;

struct Checkpoint::Files {
  std::vector<format::SafetensorsFile> safetensors;
  std::optional<format::GgufParts> gguf;         // one file, or every part of a split
  std::deque<std::vector<float>> widened;        // f32 copies of vectors stored in another type
  std::deque<std::vector<std::byte>> converted;  // matrices rebuilt at load (gpt-oss's Hugging Face experts)
};

namespace {

// A tensor as a file stores it, shape outermost first.
struct RawTensor {
  std::optional<WeightType> type;
  std::string type_name;
  std::span<const std::byte> bytes;
  std::vector<std::uint64_t> shape;
  std::string file;
};

using FindTensor = std::function<std::optional<RawTensor>(const std::string&)>;

// The parts of a decoder layer, named per file kind.
enum class Part {
  AttnNorm,
  Q,
  K,
  V,
  O,
  QBias,
  KBias,
  VBias,
  QNorm,
  KNorm,
  PostAttnNorm,
  FfnNorm,
  Gate,
  Up,
  Down,
  PostFfnNorm,
  QKV,     // Phi-3: q, k and v stacked in one matrix, in that order
  GateUp,  // Phi-3: gate and up stacked in one matrix
  // A mixture of experts: the router, each expert's matrices (GGUF: every expert's stacked in one tensor),
  // Qwen2-MoE's shared expert and its gate.
  Router,
  ExpertGate,
  ExpertUp,
  ExpertDown,
  SharedGate,
  SharedUp,
  SharedDown,
  SharedExpertGate,
  // gpt-oss: the output projection's bias, the attention sinks, the router's bias, the experts' biases (GGUF:
  // each stacked over the experts), and Hugging Face's fused gate_up of every expert with its bias.
  OBias,
  Sinks,
  RouterBias,
  ExpertGateBias,
  ExpertUpBias,
  ExpertDownBias,
  ExpertGateUp,
  ExpertGateUpBias,
};

struct TensorNames {
  std::string embed, final_norm, lm_head;
  // `expert` picks the expert of ExpertGate/Up/Down where each has tensors of its own.
  std::function<std::string(std::size_t layer, Part part, std::size_t expert)> layer;
  bool stacked_experts = false;  // GGUF: a mixture's experts are one 3-D tensor per matrix
  bool fused_experts = false;    // gpt-oss's Hugging Face form: every expert's gate_up and down in one tensor each
};

// `model` is where the decoder's tensors live ("model.", or a vision-language checkpoint's text model),
// `lm_head` the output matrix's name. Gemma names the norm before the feed-forward block
// pre_feedforward_layernorm; its post_attention_layernorm is the attention output's norm. Mixtral's experts
// are block_sparse_moe's w1 (gate), w3 (up) and w2 (down); Qwen's are mlp's gate_proj, up_proj and down_proj;
// gpt-oss's are mlp.experts' fused tensors, its router mlp.router.
TensorNames hf_names(const std::string& model, const std::string& lm_head, bool post_norms, Architecture arch) {
  const bool mixtral = arch == Architecture::Mixtral;
  const bool gpt_oss = arch == Architecture::GptOss;
  TensorNames names{
      model + "embed_tokens.weight", model + "norm.weight", lm_head, [=](std::size_t i, Part part, std::size_t e) {
        const std::string p = model + "layers." + std::to_string(i) + ".";
        const std::string expert = p + (mixtral ? "block_sparse_moe" : "mlp") + ".experts." + std::to_string(e) + ".";
        switch (part) {
          case Part::AttnNorm: return p + "input_layernorm.weight";
          case Part::Q: return p + "self_attn.q_proj.weight";
          case Part::K: return p + "self_attn.k_proj.weight";
          case Part::V: return p + "self_attn.v_proj.weight";
          case Part::O: return p + "self_attn.o_proj.weight";
          case Part::QBias: return p + "self_attn.q_proj.bias";
          case Part::KBias: return p + "self_attn.k_proj.bias";
          case Part::VBias: return p + "self_attn.v_proj.bias";
          case Part::QNorm: return p + "self_attn.q_norm.weight";
          case Part::KNorm: return p + "self_attn.k_norm.weight";
          case Part::PostAttnNorm: return p + "post_attention_layernorm.weight";
          case Part::FfnNorm:
            return p + (post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
          case Part::Gate: return p + "mlp.gate_proj.weight";
          case Part::Up: return p + "mlp.up_proj.weight";
          case Part::Down: return p + "mlp.down_proj.weight";
          case Part::PostFfnNorm: return p + "post_feedforward_layernorm.weight";
          case Part::QKV: return p + "self_attn.qkv_proj.weight";
          case Part::GateUp: return p + "mlp.gate_up_proj.weight";
          case Part::Router:
            return p + (mixtral ? "block_sparse_moe.gate.weight" : gpt_oss ? "mlp.router.weight" : "mlp.gate.weight");
          case Part::ExpertGate: return expert + (mixtral ? "w1.weight" : "gate_proj.weight");
          case Part::ExpertUp: return expert + (mixtral ? "w3.weight" : "up_proj.weight");
          case Part::ExpertDown:
            return gpt_oss ? p + "mlp.experts.down_proj" : expert + (mixtral ? "w2.weight" : "down_proj.weight");
          case Part::SharedGate: return p + "mlp.shared_expert.gate_proj.weight";
          case Part::SharedUp: return p + "mlp.shared_expert.up_proj.weight";
          case Part::SharedDown: return p + "mlp.shared_expert.down_proj.weight";
          case Part::SharedExpertGate: return p + "mlp.shared_expert_gate.weight";
          case Part::OBias: return p + "self_attn.o_proj.bias";
          case Part::Sinks: return p + "self_attn.sinks";
          case Part::RouterBias: return p + "mlp.router.bias";
          case Part::ExpertGateUp: return p + "mlp.experts.gate_up_proj";
          case Part::ExpertGateUpBias: return p + "mlp.experts.gate_up_proj_bias";
          case Part::ExpertDownBias: return p + "mlp.experts.down_proj_bias";
          case Part::ExpertGateBias:
          case Part::ExpertUpBias: break;  // fused in gate_up_proj_bias
        }
        return std::string();
      }};
  names.fused_experts = gpt_oss;
  return names;
}

// llama.cpp's gpt-oss files name the norm before the experts post_attention_norm.
TensorNames gguf_names(Architecture arch) {
  const bool gpt_oss = arch == Architecture::GptOss;
  return {"token_embd.weight", "output_norm.weight", "output.weight",
          [=](std::size_t i, Part part, std::size_t) {
            const std::string p = "blk." + std::to_string(i) + ".";
            switch (part) {
              case Part::AttnNorm: return p + "attn_norm.weight";
              case Part::Q: return p + "attn_q.weight";
              case Part::K: return p + "attn_k.weight";
              case Part::V: return p + "attn_v.weight";
              case Part::O: return p + "attn_output.weight";
              case Part::QBias: return p + "attn_q.bias";
              case Part::KBias: return p + "attn_k.bias";
              case Part::VBias: return p + "attn_v.bias";
              case Part::QNorm: return p + "attn_q_norm.weight";
              case Part::KNorm: return p + "attn_k_norm.weight";
              case Part::PostAttnNorm: return p + "post_attention_norm.weight";
              case Part::FfnNorm: return p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight");
              case Part::Gate: return p + "ffn_gate.weight";
              case Part::Up: return p + "ffn_up.weight";
              case Part::Down: return p + "ffn_down.weight";
              case Part::PostFfnNorm: return p + "post_ffw_norm.weight";
              case Part::QKV: return p + "attn_qkv.weight";
              case Part::GateUp: return p + "ffn_up.weight";  // llama.cpp's phi3 files: 2 x feed_forward_length rows
              case Part::Router: return p + "ffn_gate_inp.weight";
              case Part::ExpertGate: return p + "ffn_gate_exps.weight";
              case Part::ExpertUp: return p + "ffn_up_exps.weight";
              case Part::ExpertDown: return p + "ffn_down_exps.weight";
              case Part::SharedGate: return p + "ffn_gate_shexp.weight";
              case Part::SharedUp: return p + "ffn_up_shexp.weight";
              case Part::SharedDown: return p + "ffn_down_shexp.weight";
              case Part::SharedExpertGate: return p + "ffn_gate_inp_shexp.weight";
              case Part::OBias: return p + "attn_output.bias";
              case Part::Sinks: return p + "attn_sinks.weight";
              case Part::RouterBias: return p + "ffn_gate_inp.bias";
              case Part::ExpertGateBias: return p + "ffn_gate_exps.bias";
              case Part::ExpertUpBias: return p + "ffn_up_exps.bias";
              case Part::ExpertDownBias: return p + "ffn_down_exps.bias";
              case Part::ExpertGateUp:
              case Part::ExpertGateUpBias: break;  // llama.cpp's converter splits gate and up
            }
            return std::string();
          },
          /*stacked_experts=*/true};
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Builds the weight list for a config from a tensor lookup, checking every shape.
class WeightBinder {
 public:
  WeightBinder(const ModelConfig& config, FindTensor find, std::deque<std::vector<float>>& widened,
               std::deque<std::vector<std::byte>>& converted, std::string checkpoint)
      : config_(config),
        find_(std::move(find)),
        widened_(widened),
        converted_(converted),
        checkpoint_(std::move(checkpoint)) {}

  ModelWeights bind(const TensorNames& names) const {
    const auto& c = config_;
    const std::size_t q_rows = c.num_heads * c.head_dim;
    const std::size_t kv_rows = c.num_kv_heads * c.head_dim;
    ModelWeights w;
    w.embed = matrix(names.embed, c.vocab_size, c.hidden_size);
    w.final_norm = norm(names.final_norm, c.hidden_size);
    if (find_(names.lm_head)) {
      w.lm_head = matrix(names.lm_head, c.vocab_size, c.hidden_size);
    } else if (c.tie_word_embeddings || names.lm_head == "output.weight") {
      w.lm_head = w.embed;  // GGUF files leave out the output matrix of tied models
    } else {
      missing(names.lm_head, "tie_word_embeddings is false");
    }
    for (std::size_t i = 0; i < c.num_layers; ++i) {
      const auto n = [&](Part part) { return names.layer(i, part, 0); };
      LayerWeights l;
      l.attn_norm = norm(n(Part::AttnNorm), c.hidden_size);
      const bool phi3 = c.architecture == Architecture::Phi3;
      // Phi-3 stacks q, k and v (GGUF files may keep them apart, which llama.cpp reads too).
      if (phi3 && find_(n(Part::QKV))) {
        const auto qkv = stacked(n(Part::QKV), {q_rows, kv_rows, kv_rows}, c.hidden_size);
        l.q = qkv[0];
        l.k = qkv[1];
        l.v = qkv[2];
      } else {
        l.q = matrix(n(Part::Q), q_rows, c.hidden_size);
        l.k = matrix(n(Part::K), kv_rows, c.hidden_size);
        l.v = matrix(n(Part::V), kv_rows, c.hidden_size);
      }
      l.o = matrix(n(Part::O), c.hidden_size, q_rows);
      if (c.output_bias) l.o_bias = vector(n(Part::OBias), c.hidden_size);
      if (c.attention_sinks) l.sinks = vector(n(Part::Sinks), c.num_heads);
      if (c.attention_bias) {
        l.q_bias = vector(n(Part::QBias), q_rows);
        l.k_bias = vector(n(Part::KBias), kv_rows);
        l.v_bias = vector(n(Part::VBias), kv_rows);
      }
      if (c.qk_norm) {
        l.q_norm = norm(n(Part::QNorm), c.head_dim);
        l.k_norm = norm(n(Part::KNorm), c.head_dim);
      }
      if (c.post_norms) {
        l.post_attn_norm = norm(n(Part::PostAttnNorm), c.hidden_size);
        l.post_ffn_norm = norm(n(Part::PostFfnNorm), c.hidden_size);
      }
      l.ffn_norm = norm(n(Part::FfnNorm), c.hidden_size);
      if (is_moe_layer(c, i)) {
        l.moe = moe(names, i);
      } else if (phi3) {
        const auto gate_up = stacked(n(Part::GateUp), {c.intermediate_size, c.intermediate_size}, c.hidden_size);
        l.gate = gate_up[0];
        l.up = gate_up[1];
      } else {
        l.gate = matrix(n(Part::Gate), c.intermediate_size, c.hidden_size);
        l.up = matrix(n(Part::Up), c.intermediate_size, c.hidden_size);
      }
      if (!l.moe) l.down = matrix(n(Part::Down), c.hidden_size, c.intermediate_size);
      w.layers.push_back(std::move(l));
    }
    return w;
  }

 private:
  // Layer i's mixture of experts: its router, each expert's gate, up and down (views of GGUF's stacked tensors
  // or tensors of their own), and Qwen2-MoE's shared expert and gate ([hidden] in GGUF, [1, hidden] in
  // safetensors).
  MoeWeights moe(const TensorNames& names, std::size_t i) const {
    const auto& c = config_;
    const MoeConfig& m = *c.moe;
    const auto n = [&](Part part, std::size_t expert = 0) { return names.layer(i, part, expert); };
    const std::uint64_t inter = m.expert_intermediate_size;
    MoeWeights moe;
    moe.router = matrix(n(Part::Router), m.num_experts, c.hidden_size);
    if (m.biases) moe.router_bias = vector(n(Part::RouterBias), m.num_experts);
    if (names.fused_experts) {
      moe.experts = fused_experts(names, i);
    } else if (names.stacked_experts) {
      const auto gates = experts(n(Part::ExpertGate), m.num_experts, inter, c.hidden_size);
      const auto ups = experts(n(Part::ExpertUp), m.num_experts, inter, c.hidden_size);
      const auto downs = experts(n(Part::ExpertDown), m.num_experts, c.hidden_size, inter);
      std::vector<WeightSource> gate_biases, up_biases, down_biases;
      if (m.biases) {
        gate_biases = stacked_vectors(n(Part::ExpertGateBias), m.num_experts, inter, 0, 1, inter);
        up_biases = stacked_vectors(n(Part::ExpertUpBias), m.num_experts, inter, 0, 1, inter);
        down_biases = stacked_vectors(n(Part::ExpertDownBias), m.num_experts, c.hidden_size, 0, 1, c.hidden_size);
      }
      for (std::size_t e = 0; e < m.num_experts; ++e) {
        MlpWeights expert{gates[e], ups[e], downs[e]};
        if (m.biases) {
          expert.gate_bias = gate_biases[e];
          expert.up_bias = up_biases[e];
          expert.down_bias = down_biases[e];
        }
        moe.experts.push_back(std::move(expert));
      }
    } else {
      for (std::size_t e = 0; e < m.num_experts; ++e) {
        MlpWeights expert{matrix(n(Part::ExpertGate, e), inter, c.hidden_size),
                          matrix(n(Part::ExpertUp, e), inter, c.hidden_size),
                          matrix(n(Part::ExpertDown, e), c.hidden_size, inter)};
        for (auto* w : {&expert.gate, &expert.up, &expert.down}) w->expert = true;
        moe.experts.push_back(std::move(expert));
      }
    }
    if (const std::uint64_t shared = m.shared_expert_intermediate_size; shared != 0) {
      moe.shared_expert = MlpWeights{matrix(n(Part::SharedGate), shared, c.hidden_size),
                                     matrix(n(Part::SharedUp), shared, c.hidden_size),
                                     matrix(n(Part::SharedDown), c.hidden_size, shared)};
      const std::string gate = n(Part::SharedExpertGate);
      const auto t = find_(gate);
      moe.shared_expert_gate = t && t->shape.size() == 2 ? vector(gate, c.hidden_size, 0.0f, {1, c.hidden_size})
                                                         : vector(gate, c.hidden_size);
    }
    return moe;
  }

  // gpt-oss's Hugging Face experts (gpt_oss_experts.h): each expert's gate, up and down rebuilt from the layer's
  // fused tensors, MXFP4 (quantization_config mxfp4: _blocks and _scales) or a float type in x · W orientation,
  // with their biases.
  std::vector<MlpWeights> fused_experts(const TensorNames& names, std::size_t i) const {
    const auto& c = config_;
    const std::uint64_t count = c.moe->num_experts, inter = c.moe->expert_intermediate_size, hidden = c.hidden_size;
    const std::string gate_up = names.layer(i, Part::ExpertGateUp, 0), down = names.layer(i, Part::ExpertDown, 0);
    // One rebuilt matrix: `rows` of `cols` values, rows first, first + step, … of expert e's stored matrix.
    using Rebuild = std::function<std::vector<std::byte>(std::size_t e, std::size_t first, std::size_t step)>;
    const auto rebuilt = [&](WeightType type, Rebuild rebuild, std::size_t e, std::size_t first, std::size_t step,
                             std::uint64_t rows, std::uint64_t cols) {
      const auto& bytes = converted_.emplace_back(rebuild(e, first, step));
      WeightSource w{type, bytes, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)};
      w.expert = true;
      return w;
    };
    Rebuild gate_up_rows, down_rows;
    WeightType type = WeightType::MXFP4;
    if (c.mxfp4_experts) {
      // [experts, rows, cols / 32, 16] codes and [experts, rows, cols / 32] exponents, rows = output features.
      const auto mxfp4 = [&](const std::string& name, std::uint64_t rows, std::uint64_t cols) -> Rebuild {
        if (cols % 32 != 0) {
          throw ConfigError(checkpoint_ + ": " + name + "_blocks holds rows of " + std::to_string(cols) +
                            " values, not a whole number of 32-value MXFP4 blocks");
        }
        const auto blocks = raw(name + "_blocks", {count, rows, cols / 32, 16}, "U8");
        const auto scales = raw(name + "_scales", {count, rows, cols / 32}, "U8");
        const std::size_t block_bytes = rows * cols / 2, scale_bytes = rows * cols / 32;
        return [=](std::size_t e, std::size_t first, std::size_t step) {
          return mxfp4_rows_as_ggml(blocks.subspan(e * block_bytes, block_bytes),
                                    scales.subspan(e * scale_bytes, scale_bytes), cols, first, step,
                                    (rows - first + step - 1) / step);
        };
      };
      gate_up_rows = mxfp4(gate_up, 2 * inter, hidden);
      down_rows = mxfp4(down, hidden, inter);
    } else {
      // [experts, inputs, outputs] in a float type: each expert's matrix transposed.
      const auto t = require(gate_up, {count, hidden, 2 * inter});
      const auto d = require(down, {count, inter, hidden});
      type = *t.type;
      if ((type != WeightType::F32 && type != WeightType::F16 && type != WeightType::BF16) || *d.type != type) {
        throw ConfigError(checkpoint_ + ": " + gate_up + " is " + t.type_name + " and " + down + " " + d.type_name +
                          "; gpt-oss's unquantized experts are read as F32, F16 or BF16, both of one type (or "
                          "as MXFP4 blocks with quantization_config mxfp4)");
      }
      const std::size_t element = *quant::row_bytes(type, 1);
      const auto columns = [=](std::span<const std::byte> all, std::uint64_t inputs, std::uint64_t outputs) -> Rebuild {
        const std::size_t bytes = inputs * outputs * element;
        return [=](std::size_t e, std::size_t first, std::size_t step) {
          return columns_as_rows(all.subspan(e * bytes, bytes), element, inputs, outputs, first, step,
                                 (outputs - first + step - 1) / step);
        };
      };
      gate_up_rows = columns(t.bytes, hidden, 2 * inter);
      down_rows = columns(d.bytes, inter, hidden);
    }
    // gate_up's outputs interleave gate (even) and up (odd), and so does its bias.
    const std::string gate_up_bias = names.layer(i, Part::ExpertGateUpBias, 0);
    const auto gate_biases = stacked_vectors(gate_up_bias, count, 2 * inter, 0, 2, inter);
    const auto up_biases = stacked_vectors(gate_up_bias, count, 2 * inter, 1, 2, inter);
    const auto down_biases = stacked_vectors(names.layer(i, Part::ExpertDownBias, 0), count, hidden, 0, 1, hidden);
    std::vector<MlpWeights> experts;
    for (std::size_t e = 0; e < count; ++e) {
      experts.push_back(
          {rebuilt(type, gate_up_rows, e, 0, 2, inter, hidden), rebuilt(type, gate_up_rows, e, 1, 2, inter, hidden),
           rebuilt(type, down_rows, e, 0, 1, hidden, inter), gate_biases[e], up_biases[e], down_biases[e]});
    }
    return experts;
  }

  // A tensor of a type the engine does not compute with (gpt-oss's U8 MXFP4 codes), checked for its dtype and shape.
  std::span<const std::byte> raw(const std::string& name, const std::vector<std::uint64_t>& expected,
                                 std::string_view dtype) const {
    const auto t = find_(name);
    if (!t) missing(name, "quantization_config says the experts are MXFP4");
    if (t->shape != expected || t->type_name != dtype) {
      throw ConfigError(checkpoint_ + ": the tensor " + name + " in " + t->file + " is " + t->type_name + " " +
                        shape_text(t->shape) + " but the config needs " + std::string(dtype) + " " +
                        shape_text(expected) + "; the weights do not belong to this config.json");
    }
    return t->bytes;
  }

  // The `count` vectors of a [count, width] tensor (GGUF's stacked expert biases; gpt-oss's fused ones), each `size`
  // values: elements first, first + step, … of its row, widened to f32.
  std::vector<WeightSource> stacked_vectors(const std::string& name, std::uint64_t count, std::uint64_t width,
                                            std::size_t first, std::size_t step, std::uint64_t size) const {
    const auto t = require(name, {count, width});
    if (*t.type != WeightType::F32 && *t.type != WeightType::F16 && *t.type != WeightType::BF16) {
      throw ConfigError(checkpoint_ + ": the tensor " + name + " in " + t.file + " is stored as " + t.type_name +
                        "; biases are read as F32, F16 or BF16");
    }
    std::vector<float> all(count * width);
    quant::dequantize_row(*t.type, t.bytes, all);
    std::vector<WeightSource> out;
    for (std::size_t e = 0; e < count; ++e) {
      auto& values = widened_.emplace_back(size);
      for (std::size_t j = 0; j < size; ++j) values[j] = all[e * width + first + j * step];
      out.push_back(
          {WeightType::F32, std::as_bytes(std::span<const float>(values)), 1, static_cast<std::size_t>(size)});
    }
    return out;
  }

  // The `count` experts' matrices of `rows` x `cols` stacked in one 3-D tensor, each a view of its slice.
  std::vector<WeightSource> experts(const std::string& name, std::uint64_t count, std::uint64_t rows,
                                    std::uint64_t cols) const {
    const auto t = require(name, {count, rows, cols});
    const auto row_bytes = checked_row_bytes(name, *t.type, cols);
    std::vector<WeightSource> parts;
    const std::size_t bytes = rows * row_bytes;
    for (std::size_t e = 0; e < count; ++e) {
      WeightSource part{*t.type, t.bytes.subspan(e * bytes, bytes), static_cast<std::size_t>(rows),
                        static_cast<std::size_t>(cols), /*file_mapped=*/true};
      part.expert = true;
      parts.push_back(part);
    }
    return parts;
  }

  [[noreturn]] void missing(const std::string& name, const std::string& why) const {
    throw ConfigError(checkpoint_ + ": the tensor " + name + " is missing" + (why.empty() ? "" : " (" + why + ")") +
                      "; the checkpoint is incomplete or not a " +
                      std::string(architecture_name(config_.architecture)) + " checkpoint");
  }

  RawTensor require(const std::string& name, std::vector<std::uint64_t> expected) const {
    auto t = find_(name);
    if (!t) missing(name, "");
    if (t->shape != expected) {
      throw ConfigError(checkpoint_ + ": the tensor " + name + " in " + t->file + " has shape " + shape_text(t->shape) +
                        " but the config needs " + shape_text(expected) +
                        "; the weights do not belong to this config.json");
    }
    if (!t->type) {
      throw ConfigError(checkpoint_ + ": the tensor " + name + " in " + t->file + " is stored as " + t->type_name +
                        ", which the engine does not compute with (supported: " + quant::weight_type_names() + ")");
    }
    return *t;
  }

  std::size_t checked_row_bytes(const std::string& name, WeightType type, std::uint64_t cols) const {
    const auto row_bytes = quant::row_bytes(type, cols);
    if (!row_bytes) {
      throw ConfigError(checkpoint_ + ": the tensor " + name + " is " + std::string(quant::weight_type_name(type)) +
                        " with rows of " + std::to_string(cols) + " values, not a whole number of " +
                        std::to_string(quant::block_elements(type)) + "-value blocks");
    }
    return *row_bytes;
  }

  WeightSource matrix(const std::string& name, std::uint64_t rows, std::uint64_t cols) const {
    const auto t = require(name, {rows, cols});
    checked_row_bytes(name, *t.type, cols);
    WeightSource w{*t.type, t.bytes, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols),
                   /*file_mapped=*/true};
    if (w.type == WeightType::F8_E4M3) w.scales = fp8_scales(name, rows, cols);
    return w;
  }

  // The scales of the FP8 matrix `name` (…weight) of rows x cols, from the tensor beside it that the config's
  // scheme names: one value ([] or [1]) per tensor, [rows, 1] per channel, one per block of the scheme's size.
  quant::BlockScales fp8_scales(const std::string& name, std::uint64_t rows, std::uint64_t cols) const {
    if (!config_.fp8) {
      throw ConfigError(checkpoint_ + ": the tensor " + name +
                        " is stored as F8_E4M3, but config.json has no quantization_config that says how it is scaled "
                        "(quant_method fp8, or compressed-tensors float-quantized)");
    }
    const Fp8Scheme& scheme = *config_.fp8;
    constexpr std::string_view kWeight = "weight";
    const std::string scale_name =
        (name.ends_with(kWeight) ? name.substr(0, name.size() - kWeight.size()) : name + ".") + scheme.scale_name;
    const auto t = find_(scale_name);
    if (!t) missing(scale_name, "the scales of the FP8 matrix " + name);
    quant::BlockScales scales;
    std::vector<std::vector<std::uint64_t>> shapes;  // the shapes the scheme allows
    switch (scheme.granularity) {
      case Fp8Scheme::Granularity::Tensor:
        scales.block_rows = rows;
        scales.block_cols = cols;
        shapes = {{}, {1}};
        break;
      case Fp8Scheme::Granularity::Channel:
        scales.block_rows = 1;
        scales.block_cols = cols;
        shapes = {{rows, 1}, {rows}};
        break;
      case Fp8Scheme::Granularity::Block:
        scales.block_rows = scheme.block_rows;
        scales.block_cols = scheme.block_cols;
        shapes = {
            {(rows + scheme.block_rows - 1) / scheme.block_rows, (cols + scheme.block_cols - 1) / scheme.block_cols}};
        break;
    }
    if (std::find(shapes.begin(), shapes.end(), t->shape) == shapes.end()) {
      throw ConfigError(checkpoint_ + ": the tensor " + scale_name + " in " + t->file + " has shape " +
                        shape_text(t->shape) + " but the scales of " + name + " " + shape_text({rows, cols}) +
                        " need " + shape_text(shapes.front()) + " (quantization_config)");
    }
    const std::size_t count = quant::block_scales_count(scales, rows, cols);
    if (t->type == WeightType::F32) {
      scales.values = {reinterpret_cast<const float*>(t->bytes.data()), count};
    } else if (t->type == WeightType::F16 || t->type == WeightType::BF16) {
      auto& values = widened_.emplace_back(count);
      quant::dequantize_row(*t->type, t->bytes, values);
      scales.values = values;
    } else {
      throw ConfigError(checkpoint_ + ": the tensor " + scale_name + " in " + t->file + " is stored as " +
                        t->type_name + "; scales are read as F32, F16 or BF16");
    }
    return scales;
  }

  // Matrices stacked along their rows in one tensor, each a view of its rows (no copy).
  std::vector<WeightSource> stacked(const std::string& name, std::initializer_list<std::uint64_t> rows,
                                    std::uint64_t cols) const {
    std::uint64_t total = 0;
    for (const auto r : rows) total += r;
    const WeightSource whole = matrix(name, total, cols);
    const std::size_t row_bytes = *quant::row_bytes(whole.type, cols);
    std::vector<WeightSource> parts;
    std::size_t first = 0;
    for (const auto r : rows) {
      WeightSource part{whole.type, whole.bytes.subspan(first * row_bytes, r * row_bytes), static_cast<std::size_t>(r),
                        static_cast<std::size_t>(cols), whole.file_mapped};
      if (!whole.scales.empty()) part.scales = row_scales(name, whole.scales, first, r, cols);
      parts.push_back(part);
      first += r;
    }
    return parts;
  }

  // The scales of rows [first, first + count) of a block-scaled matrix: a per-tensor scale as it is, the blocks of
  // those rows where they start on a block (a part that starts inside a block has no scales of its own).
  quant::BlockScales row_scales(const std::string& name, const quant::BlockScales& whole, std::size_t first,
                                std::size_t count, std::size_t cols) const {
    if (whole.values.size() == 1) return {whole.values, count, cols};
    if (first % whole.block_rows != 0) {
      throw ConfigError(checkpoint_ + ": " + name + " stacks a matrix from row " + std::to_string(first) +
                        ", inside a block of " + std::to_string(whole.block_rows) +
                        " rows of its FP8 scales; the engine splits it on whole blocks only");
    }
    const std::size_t per_row = whole.blocks_per_row(cols);
    const std::size_t blocks = (count + whole.block_rows - 1) / whole.block_rows;
    return {whole.values.subspan(first / whole.block_rows * per_row, blocks * per_row), whole.block_rows,
            whole.block_cols};
  }

  // Vectors (norms, biases) are small; the kernels take them as f32. `plus` is added to every value (in f32,
  // as transformers computes Gemma's 1 + w).
  // `shape` is the tensor's where it is not [size] (a [1, size] matrix read as a vector).
  WeightSource vector(const std::string& name, std::uint64_t size, float plus = 0.0f,
                      std::vector<std::uint64_t> shape = {}) const {
    const auto t = require(name, shape.empty() ? std::vector<std::uint64_t>{size} : std::move(shape));
    if (*t.type == WeightType::F8_E4M3) {
      throw ConfigError(checkpoint_ + ": the vector " + name + " in " + t.file +
                        " is stored as F8_E4M3; FP8 checkpoints keep norms and biases in a float type");
    }
    if (*t.type == WeightType::F32 && plus == 0.0f)
      return {WeightType::F32, t.bytes, 1, static_cast<std::size_t>(size)};
    auto& values = widened_.emplace_back(size);
    quant::dequantize_row(*t.type, t.bytes, values);
    for (auto& v : values) v += plus;
    return {WeightType::F32, std::as_bytes(std::span<const float>(values)), 1, static_cast<std::size_t>(size)};
  }
  // A norm's weight as the norm multiplies by it: 1 + w where the file stores w (Gemma's checkpoints).
  WeightSource norm(const std::string& name, std::uint64_t size) const {
    return vector(name, size, config_.norm_weight_plus_one ? 1.0f : 0.0f);
  }

  const ModelConfig& config_;
  FindTensor find_;
  std::deque<std::vector<float>>& widened_;
  std::deque<std::vector<std::byte>>& converted_;
  std::string checkpoint_;
};

std::optional<WeightType> from_safetensors_dtype(format::SafetensorsDType dtype) {
  switch (dtype) {
    case format::SafetensorsDType::F32: return WeightType::F32;
    case format::SafetensorsDType::F16: return WeightType::F16;
    case format::SafetensorsDType::BF16: return WeightType::BF16;
    case format::SafetensorsDType::F8_E4M3: return WeightType::F8_E4M3;
    default: return std::nullopt;
  }
}

}  // namespace

Checkpoint::Checkpoint() : files_(std::make_unique<Files>()) {}
Checkpoint::~Checkpoint() = default;

std::unique_ptr<Checkpoint> Checkpoint::open(const fs::path& path) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    ckpt->load_directory();
  } else if (fs::is_regular_file(path, ec) && path.extension() == ".gguf") {
    ckpt->load_gguf();
  } else if (!fs::exists(path, ec)) {
    throw ConfigError(path.string() + ": no such file or directory; give a model directory or a .gguf file");
  } else {
    throw ConfigError(path.string() + ": not a model directory (with config.json) or a .gguf file");
  }
  ckpt->collect_eos_ids();
  return ckpt;
}

void Checkpoint::load_directory() {
  const fs::path config_json = path_ / "config.json";
  std::error_code ec;
  if (!fs::exists(config_json, ec)) {
    throw ConfigError(path_.string() + ": no config.json; a Hugging Face model directory needs one");
  }
  // Read once: the model's config and, from the same text, whether its embeddings may be cut short.
  const std::string config_text = read_small_json(config_json);
  config_ = parse_hf_config(config_text, config_json.string());
  generation_ = read_generation_config(path_ / "generation_config.json");
  pooling_ = read_sentence_transformers(path_);
  matryoshka_ = parse_matryoshka(config_text, config_json.string());

  // Shards: the index when there is one, else the single file.
  std::map<std::string, std::size_t, std::less<>> where;  // tensor name → shard
  const fs::path index_json = path_ / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  std::optional<format::SafetensorsIndex> index;
  if (fs::exists(index_json, ec)) {
    index = format::read_safetensors_index(index_json);
    shard_names = index->shard_files();
  } else if (fs::exists(path_ / "model.safetensors", ec)) {
    shard_names = {"model.safetensors"};
  } else {
    throw ConfigError(path_.string() +
                      ": no model.safetensors or model.safetensors.index.json; the engine loads safetensors "
                      "checkpoints (or a .gguf file)");
  }
  for (const auto& shard : shard_names) {
    const std::size_t slot = files_->safetensors.size();
    files_->safetensors.push_back(format::SafetensorsFile::open(path_ / shard));
    for (const auto& t : files_->safetensors.back().tensors()) {
      if (index) {
        const auto it = index->weight_map.find(t.name);
        if (it == index->weight_map.end() || it->second != shard) continue;  // the index decides
      }
      where.emplace(t.name, slot);
    }
  }
  if (index) {
    for (const auto& [name, shard] : index->weight_map) {
      if (!where.contains(name)) {
        throw ConfigError(index_json.string() + ": maps " + name + " to " + shard +
                          ", which does not contain it; the download is incomplete or mixed from two revisions");
      }
    }
  }
  const FindTensor find = [this, where](const std::string& name) -> std::optional<RawTensor> {
    const auto it = where.find(name);
    if (it == where.end()) return std::nullopt;
    const auto& file = files_->safetensors[it->second];
    const auto* t = file.find(name);
    return RawTensor{from_safetensors_dtype(t->dtype), std::string(format::dtype_name(t->dtype)), file.data(*t),
                     t->shape, file.path().filename().string()};
  };
  // Vision-language checkpoints keep the text model under a prefix of their own (transformers wrote
  // language_model.model., and writes model.language_model. since 4.52); their other towers are not read.
  std::string model_prefix = "model.";
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    if (where.contains(prefix + "embed_tokens.weight")) model_prefix = prefix;
  }
  const std::string lm_head =
      model_prefix == "language_model.model." ? "language_model.lm_head.weight" : std::string("lm_head.weight");
  weights_ = WeightBinder(config_, find, files_->widened, files_->converted, path_.string())
                 .bind(hf_names(model_prefix, lm_head, config_.post_norms, config_.architecture));
  // transformers multiplies by the scale rounded to the embedding's dtype (GGUF files keep llama.cpp's exact one).
  if (config_.embedding_scale) config_.embedding_scale = embedding_scale_in(weights_.embed.type, config_.hidden_size);
  tokenizer_ = tokenizer::Tokenizer::from_directory(path_);
  chat_template_ = directory_chat_template(path_, *tokenizer_);
}

std::optional<std::string> directory_chat_template(const std::filesystem::path& dir,
                                                   const tokenizer::Tokenizer& tokenizer) {
  // Newer checkpoints keep the template in its own file, which then takes precedence.
  std::error_code ec;
  if (const fs::path jinja = dir / "chat_template.jinja"; fs::exists(jinja, ec)) {
    const auto mapped = format::MappedFile::open(jinja);
    const auto bytes = mapped.bytes();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return tokenizer.config().chat_template;
}

void Checkpoint::load_gguf() {
  files_->gguf = format::GgufParts::open(path_);
  const auto& layout = files_->gguf->layout();
  // The rotary embedding's tensors, small F32 vectors that may sit in any part of a split.
  const auto f32_vector = [&](const char* tensor) -> std::vector<double> {
    const auto found = files_->gguf->find_tensor(tensor);
    if (!found) return {};
    const auto* info = found->info;
    if (info->type->id != quant::ggml_type_id(WeightType::F32) || info->dims.size() != 1 || info->elements() > 65536) {
      throw ConfigError(path_.string() + ": " + tensor +
                        " must be a vector of F32 values (one per rotary frequency), not " +
                        std::to_string(info->elements()) + " " + std::string(info->type->name) + " values in " +
                        std::to_string(info->dims.size()) + " dimensions");
    }
    std::vector<float> values(info->elements());
    std::memcpy(values.data(), found->data.data(), values.size() * sizeof(float));
    return {values.begin(), values.end()};
  };
  config_ = config_from_gguf(layout, path_.string(),
                             {f32_vector("rope_freqs.weight"), f32_vector("rope_factors_long.weight"),
                              f32_vector("rope_factors_short.weight")});
  pooling_ = gguf_pooling(layout, path_.string());
  // The first part's layout lists only its own tensors; output.weight may sit in any part of a split.
  config_.tie_word_embeddings = !files_->gguf->find_tensor("output.weight");
  const FindTensor find = [this](const std::string& tensor) -> std::optional<RawTensor> {
    const auto found = files_->gguf->find_tensor(tensor);
    if (!found) return std::nullopt;
    const auto* t = found->info;
    return RawTensor{quant::weight_type_from_ggml(t->type->id), std::string(t->type->name), found->data,
                     std::vector<std::uint64_t>(t->dims.rbegin(), t->dims.rend()), found->file->filename().string()};
  };
  weights_ = WeightBinder(config_, find, files_->widened, files_->converted, path_.string())
                 .bind(gguf_names(config_.architecture));
  tokenizer_ = tokenizer::Tokenizer::from_gguf(layout, path_.string());
  chat_template_ = tokenizer_->config().chat_template;
}

void Checkpoint::collect_eos_ids() {
  std::set<std::int32_t> ids;
  for (const auto id : config_.eos_token_ids) ids.insert(static_cast<std::int32_t>(id));
  for (const auto id : generation_.eos_token_ids) ids.insert(static_cast<std::int32_t>(id));
  if (const auto eos = tokenizer_->eos_id()) ids.insert(*eos);
  eos_ids_.assign(ids.begin(), ids.end());
}

std::uint64_t Checkpoint::weight_bytes() const {
  std::uint64_t total = weights_.final_norm.bytes.size() + weights_.lm_head.bytes.size();
  const auto mlp_bytes = [](const MlpWeights& m) {
    return m.gate.bytes.size() + m.up.bytes.size() + m.down.bytes.size();
  };
  for (const auto& l : weights_.layers) {
    for (const auto* w : {&l.attn_norm, &l.q, &l.k, &l.v, &l.o, &l.ffn_norm, &l.gate, &l.up, &l.down}) {
      total += w->bytes.size();
    }
    if (l.moe) {
      std::uint64_t experts = 0;
      for (const auto& e : l.moe->experts) experts += mlp_bytes(e);
      total += l.moe->router.bytes.size() + experts * config_.moe->experts_per_token / l.moe->experts.size();
      if (l.moe->shared_expert) total += mlp_bytes(*l.moe->shared_expert) + l.moe->shared_expert_gate->bytes.size();
    }
    for (const auto* w : {&l.q_bias, &l.k_bias, &l.v_bias, &l.o_bias, &l.sinks, &l.q_norm, &l.k_norm, &l.post_attn_norm,
                          &l.post_ffn_norm}) {
      if (*w) total += (*w)->bytes.size();
    }
  }
  return total;
}

}  // namespace engine::model
