#include "engine/model/quantization_config.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/quant/quant.h"

namespace engine::model {

namespace {

class Reader {
 public:
  Reader(const rapidjson::Value& object, std::string_view name, std::string where)
      : object_(object), name_(name), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(std::string(name_) + ": " + where_ + " " + what + "; " + served_formats());
  }
  const rapidjson::Value* find(const char* key) const {
    const auto it = object_.FindMember(key);
    return it == object_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  std::string string_or(const char* key, std::string fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->IsString()) fail("has a '" + std::string(key) + "' that is not a string");
    return {v->GetString(), v->GetStringLength()};
  }
  // Every key is one of `known`: a setting the engine does not read is refused rather than ignored.
  void only(std::initializer_list<std::string_view> known) const {
    for (const auto& member : object_.GetObject()) {
      const std::string_view key(member.name.GetString(), member.name.GetStringLength());
      if (std::find(known.begin(), known.end(), key) == known.end())
        fail("sets '" + std::string(key) + "', which the engine does not implement");
    }
  }
  // A [rows, columns] block of positive sizes.
  std::pair<std::uint64_t, std::uint64_t> block(const char* key) const {
    const auto* v = find(key);
    if (v == nullptr || !v->IsArray() || v->Size() != 2 || !(*v)[0].IsUint64() || !(*v)[1].IsUint64() ||
        (*v)[0].GetUint64() == 0 || (*v)[1].GetUint64() == 0) {
      fail("needs '" + std::string(key) + "' as [rows, columns] of positive sizes");
    }
    return {(*v)[0].GetUint64(), (*v)[1].GetUint64()};
  }
  const rapidjson::Value& object() const { return object_; }
  std::string_view name() const { return name_; }

 private:
  const rapidjson::Value& object_;
  std::string_view name_;
  std::string where_;
};

// quant_method "fp8": E4M3 weights with weight_scale_inv per block of weight_block_size, or weight_scale per tensor.
Fp8Scheme read_fp8(const Reader& q) {
  q.only({"quant_method", "fmt", "activation_scheme", "weight_block_size", "modules_to_not_convert", "ignored_layers"});
  if (const std::string fmt = q.string_or("fmt", "e4m3"); fmt != "e4m3")
    q.fail("has fmt '" + fmt + "'; the engine computes with e4m3 FP8 weights");
  if (const std::string act = q.string_or("activation_scheme", "dynamic"); act != "dynamic" && act != "static")
    q.fail("has activation_scheme '" + act + "' (dynamic or static)");
  Fp8Scheme scheme;
  scheme.quant_method = "fp8";
  if (q.find("weight_block_size") == nullptr) {
    scheme.granularity = Fp8Scheme::Granularity::Tensor;
    scheme.scale_name = "weight_scale";
    return scheme;
  }
  std::tie(scheme.block_rows, scheme.block_cols) = q.block("weight_block_size");
  scheme.scale_name = "weight_scale_inv";
  return scheme;
}

// One config group's `weights`: 8-bit symmetric floats, static, per tensor, channel or block.
Fp8Scheme read_ct_weights(const Reader& w) {
  w.only({"num_bits", "type", "symmetric", "strategy", "block_structure", "group_size", "dynamic", "actorder",
          "observer", "observer_kwargs", "scale_dtype", "zp_dtype"});
  const auto* bits = w.find("num_bits");
  const std::string type = w.string_or("type", "int");
  if (bits == nullptr || !bits->IsUint64() || bits->GetUint64() != 8 || type != "float") {
    w.fail("quantizes weights to " + (bits != nullptr && bits->IsUint64() ? std::to_string(bits->GetUint64()) : "?") +
           "-bit " + type + "s; the engine computes with 8-bit float (FP8) weights");
  }
  if (const auto* s = w.find("symmetric"); s != nullptr && !(s->IsBool() && s->GetBool()))
    w.fail("is asymmetric (zero points); FP8 weights are symmetric");
  if (const auto* d = w.find("dynamic"); d != nullptr && !(d->IsBool() && !d->GetBool()))
    w.fail("quantizes weights dynamically; a checkpoint's weights are static");
  if (w.find("actorder") != nullptr) w.fail("sets 'actorder', which the engine does not implement");
  Fp8Scheme scheme;
  scheme.scale_name = "weight_scale";
  scheme.quant_method = "compressed-tensors";
  const std::string strategy = w.string_or("strategy", "tensor");
  if (strategy == "tensor") {
    scheme.granularity = Fp8Scheme::Granularity::Tensor;
  } else if (strategy == "channel") {
    scheme.granularity = Fp8Scheme::Granularity::Channel;
  } else if (strategy == "block") {
    scheme.granularity = Fp8Scheme::Granularity::Block;
    std::tie(scheme.block_rows, scheme.block_cols) = w.block("block_structure");
  } else {
    w.fail("has strategy '" + strategy + "' (the engine reads tensor, channel and block FP8 scales)");
  }
  return scheme;
}

// quant_method "compressed-tensors" in format float-quantized: every config group's weights one FP8 scheme.
Fp8Scheme read_compressed_tensors(const Reader& q) {
  q.only({"quant_method", "format", "config_groups", "ignore", "kv_cache_scheme", "quantization_status",
          "global_compression_ratio", "sparsity_config", "version", "provider", "transform_config"});
  if (const std::string format = q.string_or("format", ""); format != "float-quantized")
    q.fail("has format '" + format + "'; the engine reads compressed-tensors checkpoints in format float-quantized");
  if (q.find("kv_cache_scheme") != nullptr) q.fail("sets 'kv_cache_scheme'; the KV cache is not quantized from it");
  if (q.find("transform_config") != nullptr) q.fail("sets 'transform_config', which the engine does not implement");
  if (const auto* sparsity = q.find("sparsity_config"); sparsity != nullptr && !sparsity->ObjectEmpty())
    q.fail("sets 'sparsity_config', which the engine does not implement");
  if (const std::string status = q.string_or("quantization_status", "compressed"); status != "compressed")
    q.fail("has quantization_status '" + status + "'; the engine reads compressed checkpoints");
  const auto* groups = q.find("config_groups");
  if (groups == nullptr || !groups->IsObject() || groups->ObjectEmpty()) q.fail("has no config_groups");
  std::optional<Fp8Scheme> scheme;
  for (const auto& group : groups->GetObject()) {
    const std::string group_name(group.name.GetString(), group.name.GetStringLength());
    if (!group.value.IsObject()) q.fail("has a config group '" + group_name + "' that is not an object");
    const Reader g(group.value, q.name(), "quantization_config's config group '" + group_name + "'");
    g.only({"targets", "weights", "input_activations", "output_activations", "format"});
    if (g.find("output_activations") != nullptr) g.fail("quantizes output activations");
    const auto* weights = g.find("weights");
    if (weights == nullptr || !weights->IsObject()) g.fail("has no weights scheme");
    const Fp8Scheme s =
        read_ct_weights(Reader(*weights, q.name(), "quantization_config's config group '" + group_name + "' weights"));
    if (scheme && (scheme->granularity != s.granularity || scheme->block_rows != s.block_rows ||
                   scheme->block_cols != s.block_cols)) {
      g.fail("scales its weights unlike the other config groups; the engine reads one FP8 scheme per checkpoint");
    }
    scheme = s;
  }
  return *scheme;
}

}  // namespace

std::string served_formats() {
  return "this engine serves unquantized safetensors (float32, float16, bfloat16), FP8 safetensors (quant_method "
         "fp8, or compressed-tensors float-quantized), gpt-oss's MXFP4 experts (quant_method mxfp4) and GGUF files (" +
         quant::weight_type_names() + "): use one of those checkpoints of the model";
}

void parse_quantization_config(const rapidjson::Value& config, std::string_view name, ModelConfig& c) {
  if (!config.IsObject()) throw ConfigError(std::string(name) + ": quantization_config is not an object");
  const Reader q(config, name, "quantization_config");
  const std::string method = q.string_or("quant_method", "(none named)");
  if (method == "fp8") {
    c.fp8 = read_fp8(q);
    return;
  }
  if (method == "compressed-tensors") {
    c.fp8 = read_compressed_tensors(q);
    return;
  }
  // gpt-oss's own: the experts in MXFP4 (modules_to_not_convert lists what stays unquantized, which the tensors'
  // names and dtypes show anyway).
  if (method == "mxfp4") {
    q.only({"quant_method", "modules_to_not_convert"});
    if (c.architecture != Architecture::GptOss)
      q.fail("is mxfp4, which only " + std::string(architecture_name(Architecture::GptOss)) + "'s experts use");
    c.mxfp4_experts = true;
    return;
  }
  throw ConfigError(std::string(name) + ": quantization_config with quant_method '" + method + "' is not supported; " +
                    served_formats());
}

}  // namespace engine::model
