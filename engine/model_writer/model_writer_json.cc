// model-writer's JSON files: config.json, generation_config.json, model.safetensors.index.json and the
// safetensors headers.

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/format/safetensors.h"
#include "engine/model_writer/model_writer_internal.h"

namespace engine::tools {

namespace {

using quant::WeightType;

std::string_view torch_dtype(WeightType type) {
  return type == WeightType::BF16 ? "bfloat16" : type == WeightType::F16 ? "float16" : "float32";
}

format::SafetensorsDType safetensors_dtype(WeightType type) {
  return type == WeightType::BF16      ? format::SafetensorsDType::BF16
         : type == WeightType::F16     ? format::SafetensorsDType::F16
         : type == WeightType::F8_E4M3 ? format::SafetensorsDType::F8_E4M3
                                       : format::SafetensorsDType::F32;
}

// ---- JSON -----------------------------------------------------------------------------------------------

using Json = rapidjson::PrettyWriter<rapidjson::StringBuffer>;
void key(Json& json, std::string_view k) {
  json.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void string(Json& json, std::string_view s) {
  json.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}
std::string text_of(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

void id_or_list(Json& json, const std::vector<std::int64_t>& ids) {
  if (ids.size() == 1) {
    json.Int64(ids.front());
    return;
  }
  json.SetFormatOptions(rapidjson::kFormatSingleLineArray);
  json.StartArray();
  for (const auto id : ids) json.Int64(id);
  json.EndArray();
  json.SetFormatOptions(rapidjson::kFormatDefault);
}

}  // namespace

namespace detail {

// config.json with the fields transformers writes for each family (sorted, as save_pretrained does).
namespace {

// config.json's model_type: the --arch value, but as transformers names Gemma 3's text model and the mixtures.
std::string_view model_type(Architecture arch) {
  switch (arch) {
    case Architecture::Gemma3: return "gemma3_text";
    case Architecture::Qwen3Moe: return "qwen3_moe";
    case Architecture::Qwen2Moe: return "qwen2_moe";
    case Architecture::GptOss: return "gpt_oss";
    default: return arch_flag(arch);
  }
}

}  // namespace

namespace {

// quantization_config of an FP8 checkpoint: quant_method fp8 with its blocks (DeepSeek's and Qwen's form), or
// compressed-tensors float-quantized per tensor or channel (LLM Compressor's form), activations dynamic.
void write_quantization_config(Json& json, const model::Fp8Scheme& fp8) {
  key(json, "quantization_config");
  json.StartObject();
  if (fp8.granularity == model::Fp8Scheme::Granularity::Block) {
    key(json, "quant_method");
    string(json, "fp8");
    key(json, "fmt");
    string(json, "e4m3");
    key(json, "activation_scheme");
    string(json, "dynamic");
    key(json, "weight_block_size");
    json.StartArray();
    json.Uint64(fp8.block_rows);
    json.Uint64(fp8.block_cols);
    json.EndArray();
    json.EndObject();
    return;
  }
  key(json, "quant_method");
  string(json, "compressed-tensors");
  key(json, "format");
  string(json, "float-quantized");
  key(json, "quantization_status");
  string(json, "compressed");
  key(json, "config_groups");
  json.StartObject();
  key(json, "group_0");
  json.StartObject();
  key(json, "targets");
  json.StartArray();
  string(json, "Linear");
  json.EndArray();
  const auto scheme = [&](const char* strategy, bool dynamic) {
    json.StartObject();
    key(json, "num_bits");
    json.Uint(8);
    key(json, "type");
    string(json, "float");
    key(json, "symmetric");
    json.Bool(true);
    key(json, "strategy");
    string(json, strategy);
    key(json, "dynamic");
    json.Bool(dynamic);
    json.EndObject();
  };
  key(json, "weights");
  scheme(fp8.granularity == model::Fp8Scheme::Granularity::Channel ? "channel" : "tensor", false);
  key(json, "input_activations");
  scheme("token", true);
  json.EndObject();
  json.EndObject();
  key(json, "ignore");
  json.StartArray();
  string(json, "lm_head");
  json.EndArray();
  json.EndObject();
}

}  // namespace

std::string config_json(const model::ModelConfig& c, WeightType dtype) {
  const bool qwen2 = c.architecture == Architecture::Qwen2 || c.architecture == Architecture::Qwen2Moe;
  const bool qwen = qwen2 || c.architecture == Architecture::Qwen3 || c.architecture == Architecture::Qwen3Moe;
  const bool gemma = model::is_gemma(c.architecture);
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartObject();
  key(json, "architectures");
  json.StartArray();
  string(json, model::architecture_name(c.architecture));
  json.EndArray();
  key(json, "attention_bias");
  json.Bool(c.attention_bias);
  key(json, "attention_dropout");
  json.Double(0.0);
  if (c.bos_token_id) {
    key(json, "bos_token_id");
    json.Int64(*c.bos_token_id);
  }
  key(json, "eos_token_id");
  id_or_list(json, c.eos_token_ids);
  if (!qwen2) {  // Qwen2 derives it from hidden_size / heads
    key(json, "head_dim");
    json.Uint64(c.head_dim);
  }
  key(json, gemma ? "hidden_activation" : "hidden_act");
  string(json, c.activation == model::Activation::GeluTanh ? "gelu_pytorch_tanh" : "silu");
  key(json, "hidden_size");
  json.Uint64(c.hidden_size);
  key(json, "initializer_range");
  json.Double(0.02);
  key(json, "intermediate_size");
  json.Uint64(c.intermediate_size);
  key(json, "max_position_embeddings");
  json.Uint64(c.max_position_embeddings);
  // The sliding and full layers, as the layer_types list newer transformers write (Gemma's, gpt-oss's).
  const auto layer_types = [&] {
    key(json, "layer_types");
    json.StartArray();
    for (const bool sliding : c.sliding_layers) string(json, sliding ? "sliding_attention" : "full_attention");
    json.EndArray();
  };
  if (gemma) {
    // Gemma's own fields: the soft-caps (Gemma 2's; null in Gemma 3), the window's layers as the layer_types
    // list newer transformers write (which the engine reads first) and, for Gemma 3, as 4.5x's pattern too,
    // and its local layers' RoPE base.
    const auto cap = [&](const char* name, const std::optional<double>& value) {
      key(json, name);
      if (value) {
        json.Double(*value);
      } else {
        json.Null();
      }
    };
    cap("attn_logit_softcapping", c.attn_logit_softcapping);
    cap("final_logit_softcapping", c.final_logit_softcapping);
    layer_types();
    key(json, "query_pre_attn_scalar");
    json.Double(*c.query_pre_attn_scalar);
    if (c.sliding_rope_theta) {
      key(json, "rope_local_base_freq");
      json.Double(*c.sliding_rope_theta);
    }
    key(json, "sliding_window");
    json.Uint64(*c.sliding_window);
    if (c.architecture == Architecture::Gemma3) {
      key(json, "sliding_window_pattern");
      json.Uint64(6);
    }
  } else if (c.architecture == Architecture::GptOss) {
    // gpt-oss's windowed layers as its config.json lists them.
    layer_types();
    key(json, "sliding_window");
    json.Uint64(*c.sliding_window);
    key(json, "swiglu_limit");
    json.Double(*c.moe->swiglu_limit);
  } else if (!c.rope_layers.empty()) {
    // SmolLM3: 1 for the layers that rotate, 0 for those that do not.
    key(json, "no_rope_layer_interval");
    json.Uint64(4);
    key(json, "no_rope_layers");
    json.SetFormatOptions(rapidjson::kFormatSingleLineArray);
    json.StartArray();
    for (const bool rotates : c.rope_layers) json.Uint(rotates ? 1 : 0);
    json.EndArray();
    json.SetFormatOptions(rapidjson::kFormatDefault);
  }
  const auto& r = c.rope_scaling;
  const bool longrope = r && r->type == model::RopeType::LongRope;
  if (const auto& moe = c.moe) {
    // As Qwen's and Mixtral's configs name their experts (the auxiliary loss coefficient is training's only).
    const bool mixtral = c.architecture == Architecture::Mixtral || c.architecture == Architecture::GptOss;
    if (!mixtral) {
      key(json, "decoder_sparse_step");
      json.Uint64(1);
      key(json, "mlp_only_layers");
      json.StartArray();
      for (std::size_t i = 0; i < moe->layers.size(); ++i) {
        if (!moe->layers[i]) json.Uint64(i);
      }
      json.EndArray();
      key(json, "moe_intermediate_size");
      json.Uint64(moe->expert_intermediate_size);
      key(json, "norm_topk_prob");
      json.Bool(moe->norm_topk_prob);
    }
    key(json, mixtral ? "num_local_experts" : "num_experts");
    json.Uint64(moe->num_experts);
    key(json, "num_experts_per_tok");
    json.Uint64(moe->experts_per_token);
    key(json, "router_aux_loss_coef");
    json.Double(0.001);
    if (moe->shared_expert_intermediate_size != 0) {
      key(json, "shared_expert_intermediate_size");
      json.Uint64(moe->shared_expert_intermediate_size);
    }
  }
  if (qwen) {
    key(json, "max_window_layers");
    json.Uint64(c.num_layers);
  } else {
    key(json, "mlp_bias");
    json.Bool(false);
  }
  key(json, "model_type");
  string(json, model_type(c.architecture));
  key(json, "num_attention_heads");
  json.Uint64(c.num_heads);
  key(json, "num_hidden_layers");
  json.Uint64(c.num_layers);
  key(json, "num_key_value_heads");
  json.Uint64(c.num_kv_heads);
  if (longrope) {  // Phi-3 keeps its trained context beside rope_scaling
    key(json, "original_max_position_embeddings");
    json.Uint64(r->original_max_position_embeddings);
  }
  if (c.architecture == Architecture::Phi3) {
    key(json, "partial_rotary_factor");
    json.Double(static_cast<double>(model::rotary_dims(c)) / static_cast<double>(c.head_dim));
  }
  if (!qwen && !gemma) {
    key(json, "pretraining_tp");
    json.Int(1);
  }
  key(json, "rms_norm_eps");
  json.Double(c.rms_norm_eps);
  key(json, "rope_scaling");
  if (longrope) {
    // As Phi-3's files write it: the two factor lists and "type".
    const auto factors = [&](const char* name, const std::vector<double>& values) {
      key(json, name);
      json.SetFormatOptions(rapidjson::kFormatSingleLineArray);
      json.StartArray();
      for (const double v : values) json.Double(v);
      json.EndArray();
      json.SetFormatOptions(rapidjson::kFormatDefault);
    };
    json.StartObject();
    factors("long_factor", r->long_factor);
    factors("short_factor", r->short_factor);
    key(json, "type");
    string(json, "longrope");
    json.EndObject();
  } else if (r) {
    json.StartObject();
    key(json, "factor");
    json.Double(r->factor);
    if (r->type == model::RopeType::Llama3) {
      key(json, "high_freq_factor");
      json.Double(r->high_freq_factor);
      key(json, "low_freq_factor");
      json.Double(r->low_freq_factor);
    }
    if (r->type == model::RopeType::Llama3 || r->type == model::RopeType::Yarn) {
      key(json, "original_max_position_embeddings");
      json.Uint64(r->original_max_position_embeddings);
    }
    key(json, "rope_type");
    string(json, model::rope_type_name(r->type));
    if (r->type == model::RopeType::Yarn && !r->truncate) {  // gpt-oss's
      key(json, "truncate");
      json.Bool(false);
    }
    json.EndObject();
  } else {
    json.Null();
  }
  key(json, "rope_theta");
  json.Double(c.rope_theta);
  if (qwen) {
    key(json, "sliding_window");
    json.Null();
  }
  key(json, "tie_word_embeddings");
  json.Bool(c.tie_word_embeddings);
  if (c.fp8) write_quantization_config(json, *c.fp8);
  if (c.mxfp4_experts) {  // as OpenAI's gpt-oss checkpoints write it
    key(json, "quantization_config");
    json.StartObject();
    key(json, "modules_to_not_convert");
    json.StartArray();
    for (const char* module :
         {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"})
      string(json, module);
    json.EndArray();
    key(json, "quant_method");
    string(json, "mxfp4");
    json.EndObject();
  }
  key(json, "torch_dtype");
  string(json, torch_dtype(dtype));
  key(json, "transformers_version");
  string(json, "4.51.0");
  key(json, "use_cache");
  json.Bool(true);
  if (qwen) {
    key(json, "use_sliding_window");
    json.Bool(false);
  }
  key(json, "vocab_size");
  json.Uint64(c.vocab_size);
  json.EndObject();
  return text_of(buffer);
}

// generation_config.json: sampling defaults as Qwen3 and Llama 3 ship them.
std::string generation_config_json(const model::ModelConfig& c, const TokenizerSpec& tokenizer) {
  const bool qwen = c.architecture != Architecture::Llama;
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartObject();
  if (tokenizer.bos_id) {
    key(json, "bos_token_id");
    json.Int(*tokenizer.bos_id);
  }
  key(json, "do_sample");
  json.Bool(true);
  key(json, "eos_token_id");
  json.SetFormatOptions(rapidjson::kFormatSingleLineArray);
  json.StartArray();
  for (const auto id : tokenizer.stop_ids) json.Int(id);
  json.EndArray();
  json.SetFormatOptions(rapidjson::kFormatDefault);
  if (tokenizer.pad_id) {
    key(json, "pad_token_id");
    json.Int(*tokenizer.pad_id);
  }
  key(json, "temperature");
  json.Double(0.6);
  if (qwen) {
    key(json, "top_k");
    json.Int(20);
  }
  key(json, "top_p");
  json.Double(qwen ? 0.95 : 0.9);
  key(json, "transformers_version");
  string(json, "4.51.0");
  json.EndObject();
  return text_of(buffer);
}

std::string index_json(const std::map<std::string, std::string>& weight_map, std::uint64_t total_size) {
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartObject();
  key(json, "metadata");
  json.StartObject();
  key(json, "total_size");
  json.Uint64(total_size);
  json.EndObject();
  key(json, "weight_map");
  json.StartObject();
  for (const auto& [name, file] : weight_map) {
    key(json, name);
    string(json, file);
  }
  json.EndObject();
  json.EndObject();
  return text_of(buffer);
}

std::string sentence_transformers_modules_json() {
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 2);
  json.StartArray();
  const std::string_view modules[][2] = {{"", "Transformer"}, {"1_Pooling", "Pooling"}, {"2_Normalize", "Normalize"}};
  for (std::size_t i = 0; i < std::size(modules); ++i) {
    json.StartObject();
    key(json, "idx");
    json.Uint64(i);
    key(json, "name");
    string(json, std::to_string(i));
    key(json, "path");
    string(json, modules[i][0]);
    key(json, "type");
    string(json, "sentence_transformers.models." + std::string(modules[i][1]));
    json.EndObject();
  }
  json.EndArray();
  return text_of(buffer);
}

std::string pooling_config_json(model::PoolingType pooling, std::uint64_t hidden_size) {
  rapidjson::StringBuffer buffer;
  Json json(buffer);
  json.SetIndent(' ', 4);
  json.StartObject();
  key(json, "word_embedding_dimension");
  json.Uint64(hidden_size);
  // Every mode sentence-transformers writes, the model's one true.
  const std::pair<std::string_view, bool> modes[] = {{"pooling_mode_cls_token", pooling == model::PoolingType::Cls},
                                                     {"pooling_mode_mean_tokens", pooling == model::PoolingType::Mean},
                                                     {"pooling_mode_max_tokens", false},
                                                     {"pooling_mode_mean_sqrt_len_tokens", false},
                                                     {"pooling_mode_weightedmean_tokens", false},
                                                     {"pooling_mode_lasttoken", pooling == model::PoolingType::Last}};
  for (const auto& [name, on] : modes) {
    key(json, name);
    json.Bool(on);
  }
  key(json, "include_prompt");
  json.Bool(true);
  json.EndObject();
  return text_of(buffer);
}

// The safetensors header of one shard: tensors in write order, data offsets from 0, padded to 8 bytes.
std::string safetensors_header(const std::vector<const TensorSpec*>& tensors, const SafetensorsStorage& storage) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
  json.StartObject();
  json.Key("__metadata__");
  json.StartObject();
  json.Key("format");
  json.String("pt");
  json.EndObject();
  std::uint64_t offset = 0;
  const auto entry = [&](const std::string& tensor, std::optional<WeightType> type,
                         std::span<const std::uint64_t> shape) {  // nullopt: U8
    std::uint64_t elements = 1;
    for (const auto d : shape) elements *= d;
    const auto name = format::dtype_name(type ? safetensors_dtype(*type) : format::SafetensorsDType::U8);
    json.Key(tensor.c_str(), static_cast<rapidjson::SizeType>(tensor.size()));
    json.StartObject();
    json.Key("dtype");
    json.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    json.Key("shape");
    json.StartArray();
    for (const auto d : shape) json.Uint64(d);
    json.EndArray();
    json.Key("data_offsets");
    json.StartArray();
    json.Uint64(offset);
    offset += elements * (type ? quant::block_bytes(*type) : 1);
    json.Uint64(offset);
    json.EndArray();
    json.EndObject();
  };
  // One entry per matrix (a stack of experts' matrices is one per expert, their bytes one after the other), an
  // FP8 matrix's scales right after it.
  const auto matrix = [&](const TensorSpec& t, const std::string& tensor, std::span<const std::uint64_t> shape) {
    if (t.u8) return entry(tensor, std::nullopt, shape);
    if (!storage.is_fp8(t)) return entry(tensor, storage.dtype, shape);
    entry(tensor, WeightType::F8_E4M3, shape);
    entry(storage.scale_name(tensor), storage.scale_type(), storage.scale_shape(shape[0], shape[1]));
  };
  for (const auto* t : tensors) {
    if (t->expert_hf_names.empty()) {
      matrix(*t, t->hf_name, t->shape);
      continue;
    }
    const std::span<const std::uint64_t> expert_shape = std::span(t->shape).subspan(1);
    for (const auto& expert : t->expert_hf_names) matrix(*t, expert, expert_shape);
  }
  json.EndObject();
  std::string header(buffer.GetString(), buffer.GetSize());
  header.resize((header.size() + 7) / 8 * 8, ' ');
  return header;
}

}  // namespace detail

}  // namespace engine::tools
