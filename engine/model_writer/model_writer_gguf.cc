// model-writer's GGUF files: the metadata, the tensors' layout and the header, written before the tensor
// data that model_writer.cc streams after it.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/little_endian.h"
#include "engine/model_writer/model_writer.h"
#include "engine/model_writer/model_writer_internal.h"
#include "engine/model_writer/model_writer_tokenizer.h"

namespace engine::tools {

namespace {

using quant::WeightType;

using detail::arch_flag;
using detail::GgufTensorPlan;
using detail::is_float_type;
using detail::kGgufAlignment;
using detail::round_up;
using detail::TensorSpec;

using GgufMetadata = std::vector<std::pair<std::string, format::GgufValue>>;

// llama.cpp's general.file_type: a file whose matrices are all of one type (the K-quants' "S" mixes), or its
// Q4_K_M and Q5_K_M.
std::uint32_t llama_file_type(GgufFileType file) {
  if (file.medium_mix) return file.type == WeightType::Q4_K ? 15 : 17;
  switch (file.type) {
    case WeightType::F32: return 0;
    case WeightType::F16: return 1;
    case WeightType::Q4_0: return 2;
    case WeightType::Q4_1: return 3;
    case WeightType::Q5_0: return 8;
    case WeightType::Q5_1: return 9;
    case WeightType::Q2_K: return 10;
    case WeightType::Q3_K: return 11;
    case WeightType::IQ4_NL: return 25;
    case WeightType::IQ4_XS: return 30;
    case WeightType::Q8_0: return 7;
    case WeightType::Q4_K: return 14;
    case WeightType::Q5_K: return 16;
    case WeightType::Q6_K: return 18;
    case WeightType::BF16: return 32;
    // llama.cpp's IQ2_S file type holds IQ2_XS tensors; its IQ2_M is the one whose default type is IQ2_S.
    case WeightType::IQ2_XXS: return 19;
    case WeightType::IQ2_XS: return 20;
    case WeightType::IQ2_S: return 29;
    case WeightType::IQ3_XXS: return 23;
    case WeightType::IQ3_S: return 26;
    case WeightType::IQ1_S: return 24;
    case WeightType::IQ1_M: return 31;
    // llama.cpp's MXFP4_MOE file type: MXFP4 experts (gpt-oss), here every matrix the file quantizes.
    case WeightType::MXFP4: return 38;
    case WeightType::F8_E4M3: break;  // no GGUF type (open_gguf refuses it)
  }
  return 0;
}

const format::GgmlTypeInfo& ggml_info(WeightType type) {
  const auto id = quant::ggml_type_id(type);
  const auto* info = id ? format::ggml_type_info(*id) : nullptr;
  if (info == nullptr) throw std::logic_error("no ggml type for " + std::string(quant::weight_type_name(type)));
  return *info;
}

// GGUF v3 serialization of the header (metadata and tensor infos); the tensor data follows, streamed.
class GgufHeader {
 public:
  void scalar_bits(std::uint64_t bits, std::size_t size) {
    const auto at = bytes_.size();
    bytes_.resize(at + size);
    std::memcpy(bytes_.data() + at, &bits, size);  // little-endian: the low bytes come first
  }
  template <typename T>
  void scalar(T value) {
    const auto at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    format::store_le<T>(bytes_.data() + at, value);
  }
  void string(std::string_view s) {
    scalar<std::uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes_.insert(bytes_.end(), p, p + s.size());
  }
  void value(const format::GgufValue& v) {
    if (const auto* s = v.as_string()) return string(*s);
    if (!v.is_array()) return scalar_bits(v.scalar_bits(), format::gguf_scalar_size(v.type()));
    scalar<std::uint32_t>(static_cast<std::uint32_t>(v.element_type()));
    scalar<std::uint64_t>(v.size());
    if (const auto* raw = v.numeric_raw()) {
      bytes_.insert(bytes_.end(), raw->begin(), raw->end());
    } else if (const auto* strings = v.strings()) {
      for (const auto& s : *strings) string(s);
    } else {
      for (const auto& item : *v.nested()) value(item);
    }
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// The GGUF file's metadata: general.*, the architecture's hyperparameters, an embedding model's pooling and
// the tokenizer.
GgufMetadata gguf_metadata(GgufFileType file, const model::ModelConfig& config, const TokenizerSpec& tokenizer,
                           std::optional<model::PoolingType> pooling) {
  const std::string arch(detail::gguf_arch_name(config.architecture));
  GgufMetadata metadata;
  const auto u32 = [&](const std::string& k, std::uint64_t v) {
    metadata.emplace_back(k, format::GgufValue::scalar(static_cast<std::uint32_t>(v)));
  };
  const auto f32 = [&](const std::string& k, double v) {
    metadata.emplace_back(k, format::GgufValue::scalar(static_cast<float>(v)));
  };
  metadata.emplace_back("general.architecture", format::GgufValue::string(arch));
  metadata.emplace_back("general.name", format::GgufValue::string("model-writer " + arch));
  u32("general.file_type", llama_file_type(file));
  if (!is_float_type(file.type)) u32("general.quantization_version", 2);
  u32(arch + ".vocab_size", config.vocab_size);
  u32(arch + ".context_length", config.max_position_embeddings);
  u32(arch + ".embedding_length", config.hidden_size);
  u32(arch + ".block_count", config.num_layers);
  u32(arch + ".feed_forward_length", config.intermediate_size);
  u32(arch + ".attention.head_count", config.num_heads);
  u32(arch + ".attention.head_count_kv", config.num_kv_heads);
  u32(arch + ".attention.key_length", config.head_dim);
  u32(arch + ".attention.value_length", config.head_dim);
  u32(arch + ".rope.dimension_count", model::rotary_dims(config));
  if (const auto& moe = config.moe) {
    u32(arch + ".expert_count", moe->num_experts);
    u32(arch + ".expert_used_count", moe->experts_per_token);
    if (config.architecture != model::Architecture::Mixtral)
      u32(arch + ".expert_feed_forward_length", moe->expert_intermediate_size);
    if (moe->shared_expert_intermediate_size != 0)
      u32(arch + ".expert_shared_feed_forward_length", moe->shared_expert_intermediate_size);
  }
  f32(arch + ".rope.freq_base", config.rope_theta);
  f32(arch + ".attention.layer_norm_rms_epsilon", config.rms_norm_eps);
  // llama.cpp's converter writes Phi-3's window always, 0 for none.
  if (config.sliding_window || config.architecture == model::Architecture::Phi3)
    u32(arch + ".attention.sliding_window", config.sliding_window.value_or(0));
  if (config.attn_logit_softcapping) f32(arch + ".attn_logit_softcapping", *config.attn_logit_softcapping);
  if (config.final_logit_softcapping) f32(arch + ".final_logit_softcapping", *config.final_logit_softcapping);
  // Llama 3's rope scaling is no key: llama.cpp's converter stores it only as the rope_freqs.weight tensor
  // (model_writer.cc adds it), and llama.cpp refuses a rope.scaling.type it does not know, such as "llama3".
  // Linear and yarn are keys, as the converter writes them (model_writer.cc refuses dynamic with GGUF).
  if (const auto& r = config.rope_scaling;
      r && (r->type == model::RopeType::Linear || r->type == model::RopeType::Yarn)) {
    metadata.emplace_back(arch + ".rope.scaling.type",
                          format::GgufValue::string(std::string(model::rope_type_name(r->type))));
    f32(arch + ".rope.scaling.factor", r->factor);
    if (r->type == model::RopeType::Yarn)
      u32(arch + ".rope.scaling.original_context_length", r->original_max_position_embeddings);
  }
  // LongRoPE: no type key; its factors are tensors (model_writer.cc), its context and attention factor keys.
  if (const auto& r = config.rope_scaling; r && r->type == model::RopeType::LongRope) {
    u32(arch + ".rope.scaling.original_context_length", r->original_max_position_embeddings);
    f32(arch + ".rope.scaling.attn_factor", *r->attention_factor);
  }
  // llama.cpp's pooling numbers (its converter writes them for embedding models): 1 mean, 2 cls, 3 last.
  if (pooling) {
    u32(arch + ".pooling_type", *pooling == model::PoolingType::Mean ? 1 : *pooling == model::PoolingType::Cls ? 2 : 3);
  }
  for (auto& entry : gguf_tokenizer_metadata(tokenizer, config.vocab_size)) metadata.push_back(std::move(entry));
  return metadata;
}

// llama.cpp's quantizer gives the layers it protects more bits: the first and last eighth, and every third
// between.
bool more_bits_layer(std::uint64_t layer, std::uint64_t layers) {
  const auto i = static_cast<std::int64_t>(layer), n = static_cast<std::int64_t>(layers);
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// A matrix's type in `file`: the file's type, or in an _M mix Q6_K for the output matrix (the token embedding
// where no output.weight is written: tied) and for attn_v / attn_qkv and ffn_down of the more-bits layers.
WeightType matrix_type(GgufFileType file, const TensorSpec& t, std::uint64_t layers, bool tied_output) {
  if (!file.medium_mix) return file.type;
  if (t.gguf_name == "output.weight" || (tied_output && t.gguf_name == "token_embd.weight")) return WeightType::Q6_K;
  unsigned layer = 0;
  int end = 0;
  if (std::sscanf(t.gguf_name.c_str(), "blk.%u.%n", &layer, &end) != 1 || end == 0) return file.type;
  const std::string_view role = std::string_view(t.gguf_name).substr(static_cast<std::size_t>(end));
  const bool protected_role = role == "attn_v.weight" || role == "attn_qkv.weight" || role == "ffn_down.weight" ||
                              role == "ffn_down_exps.weight";
  return protected_role && more_bits_layer(layer, layers) ? WeightType::Q6_K : file.type;
}

// Each GGUF tensor's type (matrix_type for matrices, F32 for the rest) and offset in the data.
std::vector<GgufTensorPlan> plan_tensors(GgufFileType file, const model::ModelConfig& config,
                                         const std::vector<TensorSpec>& tensors) {
  const bool tied_output =
      std::none_of(tensors.begin(), tensors.end(), [](const TensorSpec& t) { return t.gguf_name == "output.weight"; });
  std::vector<GgufTensorPlan> plans;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.gguf_name.empty()) continue;
    // llama.cpp's quantizer leaves a mixture's router in float too.
    const bool router = t.gguf_name.ends_with("ffn_gate_inp.weight");
    const WeightType tensor_type = t.is_matrix() && !t.gguf_vector && !t.gguf_float && !router
                                       ? matrix_type(file, t, config.num_layers, tied_output)
                                       : WeightType::F32;
    const auto row = quant::row_bytes(tensor_type, t.cols());
    if (!row) {
      throw UsageError("--gguf " + gguf_type_name(file) + ": tensor " + t.gguf_name + " has rows of " +
                       std::to_string(t.cols()) + " values, not whole blocks of " +
                       std::to_string(quant::block_elements(tensor_type)));
    }
    plans.push_back({&t, tensor_type, offset, *row * t.rows()});
    offset = round_up(offset + *row * t.rows(), kGgufAlignment);
  }
  return plans;
}

// The header: metadata, then the tensor infos.
GgufHeader gguf_header(const GgufMetadata& metadata, const std::vector<GgufTensorPlan>& tensors) {
  GgufHeader header;
  header.scalar<std::uint32_t>(0x46554747);  // "GGUF"
  header.scalar<std::uint32_t>(3);
  header.scalar<std::uint64_t>(tensors.size());
  header.scalar<std::uint64_t>(metadata.size());
  for (const auto& [k, v] : metadata) {
    header.string(k);
    header.scalar<std::uint32_t>(static_cast<std::uint32_t>(v.type()));
    header.value(v);
  }
  for (const auto& plan : tensors) {
    header.string(plan.spec->gguf_name);
    // GGUF lists dimensions innermost first: columns, then rows (then experts).
    const std::vector<std::uint64_t> shape =
        plan.spec->gguf_vector ? std::vector<std::uint64_t>{plan.spec->elements()} : plan.spec->shape;
    header.scalar<std::uint32_t>(static_cast<std::uint32_t>(shape.size()));
    for (auto d = shape.rbegin(); d != shape.rend(); ++d) header.scalar<std::uint64_t>(*d);
    header.scalar<std::uint32_t>(ggml_info(plan.type).id);
    header.scalar<std::uint64_t>(plan.offset);
  }
  return header;
}

}  // namespace

namespace detail {

GgufOutput open_gguf(GgufFileType type, std::filesystem::path path, const model::ModelConfig& config,
                     const TokenizerSpec& tokenizer, const std::vector<TensorSpec>& tensors,
                     std::optional<model::PoolingType> pooling) {
  GgufOutput out{type, std::move(path), {}, nullptr, 0};
  const GgufMetadata metadata = gguf_metadata(type, config, tokenizer, pooling);
  out.tensors = plan_tensors(type, config, tensors);
  GgufHeader header = gguf_header(metadata, out.tensors);
  out.file = std::make_unique<OutputFile>(out.path);
  out.file->write(header.bytes());
  out.file->pad_to(kGgufAlignment);
  out.data_start = out.file->written();
  return out;
}

}  // namespace detail

}  // namespace engine::tools
