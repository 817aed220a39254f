#include "engine/model/model_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/format/json.h"
#include "engine/model/quantization_config.h"
#include "engine/quant/quant.h"

namespace engine::model {

namespace {

struct Known {
  Architecture arch;
  std::string_view hf_class;
  std::string_view gguf_name;
};
constexpr std::array kKnown = {
    Known{Architecture::Qwen3, "Qwen3ForCausalLM", "qwen3"},
    Known{Architecture::Qwen2, "Qwen2ForCausalLM", "qwen2"},
    Known{Architecture::Llama, "LlamaForCausalLM", "llama"},
    // llama.cpp's converter writes Mistral's checkpoints as general.architecture "llama".
    Known{Architecture::Mistral, "MistralForCausalLM", ""},
    Known{Architecture::Gemma3, "Gemma3ForCausalLM", "gemma3"},
    // The vision-language class: its text model (config.json's text_config) is Gemma3ForCausalLM.
    Known{Architecture::Gemma3, "Gemma3ForConditionalGeneration", ""},
    Known{Architecture::Gemma2, "Gemma2ForCausalLM", "gemma2"},
    Known{Architecture::SmolLM3, "SmolLM3ForCausalLM", "smollm3"},
    // Phi-4-mini is a Phi3ForCausalLM too.
    Known{Architecture::Phi3, "Phi3ForCausalLM", "phi3"},
    Known{Architecture::Qwen3Moe, "Qwen3MoeForCausalLM", "qwen3moe"},
    Known{Architecture::Qwen2Moe, "Qwen2MoeForCausalLM", "qwen2moe"},
    // llama.cpp's converter writes Mixtral as general.architecture "llama" with experts.
    Known{Architecture::Mixtral, "MixtralForCausalLM", ""},
    Known{Architecture::GptOss, "GptOssForCausalLM", "gpt-oss"},
};

// GptOssConfig's default clamp of its experts' SwiGLU.
constexpr double kGptOssSwigluLimit = 7.0;

// SmolLM3Config's default and llama.cpp's fixed step: every fourth layer without RoPE.
constexpr std::uint64_t kSmolLM3NoRopeLayerInterval = 4;

// True for every layer but each interval-th (Gemma's sliding layers, SmolLM3's rotating ones).
std::vector<bool> every_layer_but_each(std::uint64_t interval, std::uint64_t layers) {
  std::vector<bool> kept(layers);
  for (std::size_t i = 0; i < layers; ++i) kept[i] = (i + 1) % interval != 0;
  return kept;
}

// Gemma3TextConfig's defaults, which Gemma 3's config.json files rely on (text_config of the 4B and larger
// models leaves out the heads, head_dim, vocab_size and the RoPE bases).
struct Gemma3Defaults {
  static constexpr std::uint64_t vocab_size = 262208, hidden_size = 2304, intermediate_size = 9216, layers = 26,
                                 heads = 8, kv_heads = 4, head_dim = 256, max_position_embeddings = 131072,
                                 sliding_window = 4096, sliding_window_pattern = 6;
  static constexpr double rope_theta = 1e6, rope_local_base_freq = 10000.0, query_pre_attn_scalar = 256.0;
};

// Gemma2Config's defaults for what Gemma 2 changes beside Gemma 3 (its other fields the files give).
struct Gemma2Defaults {
  static constexpr std::uint64_t sliding_window = 4096, sliding_window_pattern = 2;
  static constexpr double query_pre_attn_scalar = 224.0, attn_logit_softcapping = 50.0, final_logit_softcapping = 30.0;
};

// The activations the feed-forward block computes, as config.json names them.
constexpr std::array<std::pair<Activation, std::string_view>, 2> kActivations = {{
    {Activation::Silu, "silu"},
    {Activation::GeluTanh, "gelu_pytorch_tanh"},
}};

constexpr std::array<std::pair<RopeType, std::string_view>, 5> kRopeTypes = {{
    {RopeType::Linear, "linear"},
    {RopeType::Dynamic, "dynamic"},
    {RopeType::Yarn, "yarn"},
    {RopeType::Llama3, "llama3"},
    {RopeType::LongRope, "longrope"},
}};

std::string supported_list() {
  std::string out;
  for (const auto& k : kKnown) out += (out.empty() ? "" : ", ") + std::string(k.hf_class);
  return out;
}

std::string rope_type_list() {
  std::string out;
  for (const auto& [type, name] : kRopeTypes) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

class JsonFields {
 public:
  JsonFields(const rapidjson::Value& object, std::string_view name) : object_(object), name_(name) {}

  [[noreturn]] void fail(const std::string& what) const { throw ConfigError(std::string(name_) + ": " + what); }
  const rapidjson::Value* find(const char* key) const {
    const auto it = object_.FindMember(key);
    return it == object_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  std::uint64_t positive(const char* key) const {
    const auto* v = find(key);
    if (v == nullptr) fail("'" + std::string(key) + "' is missing");
    if (!v->IsUint64() || v->GetUint64() == 0) fail("'" + std::string(key) + "' must be a positive integer");
    return v->GetUint64();
  }
  std::uint64_t positive_or(const char* key, std::uint64_t fallback) const {
    return find(key) == nullptr ? fallback : positive(key);
  }
  double number_or(const char* key, double fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->IsNumber()) fail("'" + std::string(key) + "' must be a number");
    return v->GetDouble();
  }
  std::string string_or(const char* key, std::string fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->IsString()) fail("'" + std::string(key) + "' must be a string");
    return {v->GetString(), v->GetStringLength()};
  }
  bool flag_or(const char* key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->IsBool()) fail("'" + std::string(key) + "' must be true or false");
    return v->GetBool();
  }
  // A list of numbers (LongRoPE's factors); empty when absent.
  std::vector<double> numbers(const char* key) const {
    std::vector<double> out;
    const auto* v = find(key);
    if (v == nullptr) return out;
    if (!v->IsArray()) fail("'" + std::string(key) + "' must be a list of numbers");
    for (const auto& n : v->GetArray()) {
      if (!n.IsNumber()) fail("'" + std::string(key) + "' holds something that is not a number");
      out.push_back(n.GetDouble());
    }
    return out;
  }
  // An id or a list of ids (eos_token_id is either).
  std::vector<std::int64_t> ids(const char* key) const {
    std::vector<std::int64_t> out;
    const auto* v = find(key);
    if (v == nullptr) return out;
    if (v->IsInt64()) return {v->GetInt64()};
    if (!v->IsArray()) fail("'" + std::string(key) + "' must be a token id or a list of them");
    for (const auto& id : v->GetArray()) {
      if (!id.IsInt64()) fail("'" + std::string(key) + "' holds something that is not a token id");
      out.push_back(id.GetInt64());
    }
    return out;
  }

 private:
  const rapidjson::Value& object_;
  std::string_view name_;
};

// A JSON document that must be an object (config.json, generation_config.json).
rapidjson::Document parse_json_object(std::string_view json, std::string_view name) {
  std::size_t consumed = 0;
  std::string error;
  auto doc = format::parse_json_prefix(json, consumed, error);
  if (!error.empty()) throw ConfigError(std::string(name) + ": not valid JSON: " + error);
  if (!doc.IsObject()) throw ConfigError(std::string(name) + ": not a JSON object");
  return doc;
}

[[noreturn]] void throw_config_error(std::string_view name, const std::string& what) {
  throw ConfigError(std::string(name) + ": " + what);
}

void check_shape(const ModelConfig& c, std::string_view name) {
  if (c.num_heads % c.num_kv_heads != 0) {
    throw ConfigError(std::string(name) + ": num_attention_heads (" + std::to_string(c.num_heads) +
                      ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    throw ConfigError(std::string(name) + ": head_dim " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  }
  const std::uint64_t rotary = rotary_dims(c);
  if (rotary == 0 || rotary % 2 != 0 || rotary > c.head_dim) {
    throw ConfigError(std::string(name) + ": RoPE over " + std::to_string(rotary) + " dimensions of a head of " +
                      std::to_string(c.head_dim) + "; it needs an even number, at most the head");
  }
  if (const auto& r = c.rope_scaling; r && r->type == RopeType::LongRope) {
    for (const auto& [what, factors] :
         {std::pair{"short_factor", &r->short_factor}, {"long_factor", &r->long_factor}}) {
      if (factors->size() != rotary / 2) {
        throw ConfigError(std::string(name) + ": LongRoPE's " + what + " holds " + std::to_string(factors->size()) +
                          " factors; RoPE over " + std::to_string(rotary) + " dimensions needs " +
                          std::to_string(rotary / 2) + " (one per frequency)");
      }
      for (const double v : *factors) {
        if (!(v > 0))
          throw ConfigError(std::string(name) + ": LongRoPE's " + what + " holds " + std::to_string(v) +
                            "; each factor must be positive");
      }
    }
  }
}

// The scaling a rope_scaling (or transformers 5 rope_parameters) object describes; nullopt for the default
// rotary embedding. Every key is one the type reads, or refused by name. `top_original` is the config's own
// original_max_position_embeddings (Phi-3 keeps it beside rope_scaling), 0 where it has none.
std::optional<RopeScaling> parse_rope_scaling(const rapidjson::Value& object, const std::string& key,
                                              const ModelConfig& c, std::string_view name,
                                              std::uint64_t top_original = 0) {
  const JsonFields s(object, name);
  const auto* type_value = s.find("rope_type") != nullptr ? s.find("rope_type") : s.find("type");
  if (type_value == nullptr) return std::nullopt;  // rope_parameters with rope_theta alone
  if (!type_value->IsString()) s.fail("'" + key + "' has a rope_type that is not a string");
  std::string kind(type_value->GetString(), type_value->GetStringLength());
  if (kind == "default") return std::nullopt;
  if (kind == "su") kind = "longrope";  // the first Phi-3 configs' name for it, as transformers reads them
  RopeScaling r;
  bool known = false;
  for (const auto& [type, type_name] : kRopeTypes) {
    if (type_name == kind) {
      r.type = type;
      known = true;
    }
  }
  if (!known) s.fail(key + " of type '" + kind + "' is not supported (supported: " + rope_type_list() + ")");
  // The keys each type reads (besides the type and rope_theta, which rope_parameters holds too).
  std::vector<std::string_view> reads = {"factor"};
  if (r.type == RopeType::Yarn) {
    reads.insert(reads.end(), {"original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                               "mscale", "mscale_all_dim", "truncate"});
  } else if (r.type == RopeType::Llama3) {
    reads.insert(reads.end(), {"original_max_position_embeddings", "low_freq_factor", "high_freq_factor"});
  } else if (r.type == RopeType::LongRope) {
    reads.insert(reads.end(), {"original_max_position_embeddings", "short_factor", "long_factor", "attention_factor"});
  }
  for (const auto& member : object.GetObject()) {
    const std::string_view field(member.name.GetString(), member.name.GetStringLength());
    if (field == "rope_type" || field == "type" || field == "rope_theta" || field == "partial_rotary_factor") continue;
    if (std::find(reads.begin(), reads.end(), field) == reads.end()) {
      s.fail(key + " of type '" + kind + "' sets '" + std::string(field) +
             "', which the engine does not implement for that type");
    }
  }
  if (r.type == RopeType::LongRope) {
    // As transformers reads Phi-3: an original context (here or beside rope_scaling) makes the factor the ratio
    // of max_position_embeddings to it.
    const auto* original = s.find("original_max_position_embeddings");
    if (original != nullptr || top_original != 0) {
      r.original_max_position_embeddings =
          original != nullptr ? s.positive("original_max_position_embeddings") : top_original;
      r.factor =
          static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
    } else {
      r.original_max_position_embeddings = c.max_position_embeddings;
      r.factor = s.number_or("factor", 1.0);
    }
    r.short_factor = s.numbers("short_factor");
    r.long_factor = s.numbers("long_factor");
    if (r.short_factor.empty() || r.long_factor.empty())
      s.fail(key + " of type 'longrope' needs short_factor and long_factor");
    r.attention_factor = s.find("attention_factor") != nullptr
                             ? s.number_or("attention_factor", 1.0)
                             : longrope_attention_factor(r.factor, r.original_max_position_embeddings);
    return r;
  }
  if (r.type == RopeType::Llama3) {
    r.factor = s.number_or("factor", 8.0);
    r.low_freq_factor = s.number_or("low_freq_factor", r.low_freq_factor);
    r.high_freq_factor = s.number_or("high_freq_factor", r.high_freq_factor);
    r.original_max_position_embeddings = s.positive_or("original_max_position_embeddings", 8192);
  } else {
    if (s.find("factor") == nullptr) s.fail(key + " of type '" + kind + "' has no 'factor'");
    r.factor = s.number_or("factor", 1.0);
    r.original_max_position_embeddings = s.positive_or("original_max_position_embeddings", c.max_position_embeddings);
  }
  if (!(r.factor > 0)) s.fail(key + ": 'factor' must be positive, not " + std::to_string(r.factor));
  if (r.type == RopeType::Yarn) {
    r.beta_fast = s.number_or("beta_fast", r.beta_fast);
    r.beta_slow = s.number_or("beta_slow", r.beta_slow);
    r.truncate = s.flag_or("truncate", r.truncate);
    if (s.find("attention_factor") != nullptr) r.attention_factor = s.number_or("attention_factor", 1.0);
    r.mscale = s.number_or("mscale", 0.0);
    r.mscale_all_dim = s.number_or("mscale_all_dim", 0.0);
  }
  return r;
}

// The feed-forward activation: Gemma's hidden_activation (gelu_pytorch_tanh by default), the others'
// hidden_act (silu by default); another is refused with its value.
Activation activation(const JsonFields& f, bool gemma) {
  const char* key = f.find("hidden_activation") != nullptr || gemma ? "hidden_activation" : "hidden_act";
  const std::string act = f.string_or(key, gemma ? "gelu_pytorch_tanh" : "silu");
  std::string names;
  for (const auto& [kind, name] : kActivations) {
    if (name == act) return kind;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  f.fail("'" + std::string(key) + "' is '" + act + "', which the engine does not compute (it computes " + names + ")");
}

// partial_rotary_factor, at the top level or in transformers 5's rope_parameters; 1 where neither sets it.
double partial_rotary_factor(const JsonFields& f) {
  const auto* rope_parameters = f.find("rope_parameters");
  return f.number_or("partial_rotary_factor",
                     rope_parameters != nullptr && rope_parameters->IsObject()
                         ? JsonFields(*rope_parameters, "").number_or("partial_rotary_factor", 1.0)
                         : 1.0);
}

// Fields that change the arithmetic in ways the graph does not implement, refused with their values.
void refuse_unimplemented_fields(const JsonFields& f, Architecture arch) {
  for (const char* softcap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (!is_gemma(arch) && f.find(softcap) != nullptr) {
      f.fail("'" + std::string(softcap) + "' is " + std::to_string(f.number_or(softcap, 0)) + ": " +
             std::string(architecture_name(arch)) + " does not soft-cap (Gemma2ForCausalLM and Gemma3ForCausalLM do)");
    }
  }
  if (f.flag_or("mlp_bias", false)) f.fail("'mlp_bias' is true: MLP biases are not implemented");
  if (const double partial = partial_rotary_factor(f); partial != 1.0 && arch != Architecture::Phi3) {
    f.fail("'partial_rotary_factor' is " + std::to_string(partial) + ": " + std::string(architecture_name(arch)) +
           " rotates whole heads (Phi3ForCausalLM rotates part of each)");
  }
}

// The window of sliding-window attention and its layers, where the config turns it on: Mistral's
// sliding_window on every layer, unless use_sliding_window is false (Qwen2 and Qwen3 write a window they do
// not use); transformers 5's layer_types naming the sliding layers (none: no window); Gemma 3's every layer
// but each sliding_window_pattern-th (its default window and pattern where the file has neither).
void read_sliding_window(const JsonFields& f, ModelConfig& c) {
  const bool gemma = is_gemma(c.architecture);
  const bool gemma2 = c.architecture == Architecture::Gemma2;
  if ((!gemma && f.find("sliding_window") == nullptr) || !f.flag_or("use_sliding_window", true)) return;
  std::vector<bool> sliding(c.num_layers, true);
  if (const auto* layer_types = f.find("layer_types"); layer_types != nullptr) {
    if (!layer_types->IsArray() || layer_types->Size() != c.num_layers) {
      f.fail("'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
    }
    for (rapidjson::SizeType i = 0; i < layer_types->Size(); ++i) {
      const auto& t = (*layer_types)[i];
      const std::string_view type = t.IsString() ? std::string_view(t.GetString(), t.GetStringLength()) : "";
      if (type != "sliding_attention" && type != "full_attention") {
        f.fail("'layer_types' names layer " + std::to_string(i) + " '" + std::string(type) +
               "'; the engine runs sliding_attention and full_attention layers");
      }
      sliding[i] = type == "sliding_attention";
    }
  } else if (gemma) {
    // Gemma 2 alternates, local first.
    const auto pattern = gemma2 ? Gemma2Defaults::sliding_window_pattern
                                : f.positive_or("sliding_window_pattern", Gemma3Defaults::sliding_window_pattern);
    sliding = every_layer_but_each(pattern, c.num_layers);
  }
  if (std::find(sliding.begin(), sliding.end(), true) == sliding.end()) return;
  c.sliding_window =
      gemma ? f.positive_or("sliding_window", Gemma3Defaults::sliding_window) : f.positive("sliding_window");
  if (std::find(sliding.begin(), sliding.end(), false) != sliding.end()) c.sliding_layers = std::move(sliding);
}

// The experts of a mixture-of-experts config: Qwen's keys (num_experts, moe_intermediate_size, norm_topk_prob,
// decoder_sparse_step, mlp_only_layers, Qwen2-MoE's shared expert) or Mixtral's (num_local_experts, its experts
// intermediate_size wide, their weights always renormalized; gpt-oss's too, its softmax over the chosen experts'
// scores being the same, with biases and its clamped SwiGLU).
MoeConfig read_moe(const JsonFields& f, const ModelConfig& c) {
  MoeConfig moe;
  const bool gpt_oss = c.architecture == Architecture::GptOss;
  // gpt-oss's first configs name it experts_per_token.
  moe.experts_per_token = gpt_oss && f.find("num_experts_per_tok") == nullptr ? f.positive("experts_per_token")
                                                                              : f.positive("num_experts_per_tok");
  if (c.architecture == Architecture::Mixtral || gpt_oss) {
    moe.num_experts = f.positive("num_local_experts");
    moe.expert_intermediate_size = c.intermediate_size;
    moe.norm_topk_prob = true;
    if (gpt_oss) {
      moe.biases = true;
      moe.swiglu_limit = f.number_or("swiglu_limit", kGptOssSwigluLimit);
      if (!(*moe.swiglu_limit > 0)) f.fail("'swiglu_limit' must be positive");
    }
  } else {
    moe.num_experts = f.positive("num_experts");
    moe.expert_intermediate_size = f.positive("moe_intermediate_size");
    moe.norm_topk_prob = f.flag_or("norm_topk_prob", false);
    if (c.architecture == Architecture::Qwen2Moe)
      moe.shared_expert_intermediate_size = f.positive("shared_expert_intermediate_size");
    // transformers: layer i is sparse unless mlp_only_layers lists it, and then only where (i + 1) is a
    // multiple of decoder_sparse_step.
    const std::uint64_t step = f.positive_or("decoder_sparse_step", 1);
    std::vector<bool> sparse(c.num_layers);
    for (std::size_t i = 0; i < c.num_layers; ++i) sparse[i] = (i + 1) % step == 0;
    if (const auto* dense = f.find("mlp_only_layers")) {
      if (!dense->IsArray()) f.fail("'mlp_only_layers' must be a list of layer indices");
      for (const auto& v : dense->GetArray()) {
        if (!v.IsUint64() || v.GetUint64() >= c.num_layers) {
          f.fail("'mlp_only_layers' holds something that is not a layer index below num_hidden_layers (" +
                 std::to_string(c.num_layers) + ")");
        }
        sparse[v.GetUint64()] = false;
      }
    }
    if (std::find(sparse.begin(), sparse.end(), false) != sparse.end()) moe.layers = std::move(sparse);
  }
  if (moe.experts_per_token > moe.num_experts) {
    f.fail("'num_experts_per_tok' (" + std::to_string(moe.experts_per_token) + ") is more than the " +
           std::to_string(moe.num_experts) + " experts");
  }
  return moe;
}

}  // namespace

bool is_moe(Architecture arch) {
  return arch == Architecture::Qwen3Moe || arch == Architecture::Qwen2Moe || arch == Architecture::Mixtral ||
         arch == Architecture::GptOss;
}

namespace {

// Whether a class puts a bias on o_proj when attention_bias is set (Qwen2's, Mistral's, Mixtral's and Phi-3's
// output projections never have one).
bool class_biases_output(Architecture arch) {
  switch (arch) {
    case Architecture::Qwen2:
    case Architecture::Qwen2Moe:
    case Architecture::Mistral:
    case Architecture::Mixtral:
    case Architecture::Phi3: return false;
    default: return true;
  }
}

}  // namespace

bool is_gemma(Architecture arch) {
  return arch == Architecture::Gemma2 || arch == Architecture::Gemma3;
}

std::string_view architecture_name(Architecture arch) {
  for (const auto& k : kKnown) {
    if (k.arch == arch) return k.hf_class;
  }
  return "unknown";
}

ModelConfig parse_hf_config(std::string_view json, std::string_view name) {
  const auto doc = parse_json_object(json, name);
  const JsonFields top(doc, name);

  const auto* archs = top.find("architectures");
  if (archs == nullptr || !archs->IsArray() || archs->Empty() || !(*archs)[0].IsString()) {
    top.fail("'architectures' names no model class; this engine runs " + supported_list());
  }
  const std::string_view hf_class((*archs)[0].GetString(), (*archs)[0].GetStringLength());
  ModelConfig c;
  bool known = false;
  for (const auto& k : kKnown) {
    if (k.hf_class == hf_class) {
      c.architecture = k.arch;
      known = true;
    }
  }
  if (!known)
    top.fail("the architecture " + std::string(hf_class) + " is not supported; this engine runs " + supported_list());
  // A vision-language checkpoint's text model is configured in its text_config (the vision tower is not run).
  const bool multimodal = hf_class == "Gemma3ForConditionalGeneration";
  const std::string text_name = std::string(name) + (multimodal ? " text_config" : "");
  const auto* text = multimodal ? top.find("text_config") : &static_cast<const rapidjson::Value&>(doc);
  if (text == nullptr || !text->IsObject()) top.fail("'text_config' must be the text model's configuration");
  const JsonFields f(*text, text_name);

  const bool gemma = is_gemma(c.architecture);
  const bool gemma3 = c.architecture == Architecture::Gemma3;
  // Gemma 3's files leave fields at Gemma3TextConfig's defaults; the others must give them.
  const auto size = [&](const char* key, std::uint64_t gemma_default) {
    return gemma3 ? f.positive_or(key, gemma_default) : f.positive(key);
  };
  c.vocab_size = size("vocab_size", Gemma3Defaults::vocab_size);
  c.hidden_size = size("hidden_size", Gemma3Defaults::hidden_size);
  c.intermediate_size = size("intermediate_size", Gemma3Defaults::intermediate_size);
  c.num_layers = size("num_hidden_layers", Gemma3Defaults::layers);
  c.num_heads = size("num_attention_heads", Gemma3Defaults::heads);
  c.num_kv_heads = f.positive_or("num_key_value_heads", gemma3 ? Gemma3Defaults::kv_heads : c.num_heads);
  c.head_dim = f.positive_or("head_dim", gemma3 ? Gemma3Defaults::head_dim : c.hidden_size / c.num_heads);
  c.max_position_embeddings =
      f.positive_or("max_position_embeddings", gemma3 ? Gemma3Defaults::max_position_embeddings : 4096);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  // transformers 5 writes one rope_parameters object (rope_theta with the scaling keys) in place of
  // rope_theta and rope_scaling; older files keep the two keys, which then take precedence. Gemma 3's holds one
  // object per layer type (full_attention, sliding_attention).
  const auto* rope_parameters = f.find("rope_parameters");
  if (rope_parameters != nullptr && !rope_parameters->IsObject()) f.fail("'rope_parameters' must be an object");
  const rapidjson::Value* sliding_rope = nullptr;
  if (rope_parameters != nullptr && rope_parameters->HasMember("full_attention")) {
    sliding_rope = JsonFields(*rope_parameters, text_name).find("sliding_attention");
    rope_parameters = JsonFields(*rope_parameters, text_name).find("full_attention");
    if (rope_parameters == nullptr || !rope_parameters->IsObject() ||
        (sliding_rope != nullptr && !sliding_rope->IsObject()))
      f.fail("'rope_parameters' must hold an object for each layer type");
  }
  const double default_theta = gemma3 ? Gemma3Defaults::rope_theta : 10000.0;
  const double theta = rope_parameters != nullptr
                           ? JsonFields(*rope_parameters, text_name).number_or("rope_theta", default_theta)
                           : default_theta;
  c.rope_theta = f.number_or("rope_theta", theta);
  c.tie_word_embeddings = f.flag_or("tie_word_embeddings", top.flag_or("tie_word_embeddings", gemma));
  const bool qwen2 = c.architecture == Architecture::Qwen2 || c.architecture == Architecture::Qwen2Moe;
  c.qk_norm = c.architecture == Architecture::Qwen3 || c.architecture == Architecture::Qwen3Moe || gemma3;
  c.attention_bias = f.flag_or("attention_bias", qwen2);
  c.output_bias = c.attention_bias && class_biases_output(c.architecture);
  c.attention_sinks = c.architecture == Architecture::GptOss;
  c.activation = activation(f, gemma);
  if (gemma) {
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.post_norms = true;
    c.norm_weight_plus_one = true;
    c.query_pre_attn_scalar = f.number_or("query_pre_attn_scalar", gemma3 ? Gemma3Defaults::query_pre_attn_scalar
                                                                          : Gemma2Defaults::query_pre_attn_scalar);
    // Gemma2Config's caps where the file leaves the key out (Gemma3TextConfig's: none); null turns a cap off.
    const auto cap = [&](const char* key, std::optional<double> fallback) -> std::optional<double> {
      if (!text->HasMember(key)) return fallback;
      if (f.find(key) == nullptr) return std::nullopt;
      const double value = f.number_or(key, 0.0);
      if (!(value > 0)) f.fail("'" + std::string(key) + "' must be positive, not " + std::to_string(value));
      return value;
    };
    const bool gemma2 = c.architecture == Architecture::Gemma2;
    c.attn_logit_softcapping =
        cap("attn_logit_softcapping", gemma2 ? std::optional(Gemma2Defaults::attn_logit_softcapping) : std::nullopt);
    c.final_logit_softcapping =
        cap("final_logit_softcapping", gemma2 ? std::optional(Gemma2Defaults::final_logit_softcapping) : std::nullopt);
  }
  if (gemma3) {
    const double local_theta =
        sliding_rope != nullptr
            ? JsonFields(*sliding_rope, text_name).number_or("rope_theta", Gemma3Defaults::rope_local_base_freq)
            : Gemma3Defaults::rope_local_base_freq;
    c.sliding_rope_theta = f.number_or("rope_local_base_freq", local_theta);
    if (sliding_rope != nullptr && parse_rope_scaling(*sliding_rope, "rope_parameters.sliding_attention", c, text_name))
      f.fail("rope_parameters.sliding_attention scales its RoPE, which Gemma 3's local layers do not");
  }
  c.eos_token_ids = f.ids("eos_token_id");
  if (c.eos_token_ids.empty()) c.eos_token_ids = top.ids("eos_token_id");
  if (auto bos = f.ids("bos_token_id"); !bos.empty() || !(bos = top.ids("bos_token_id")).empty())
    c.bos_token_id = bos.front();

  refuse_unimplemented_fields(f, c.architecture);
  if (multimodal) refuse_unimplemented_fields(top, c.architecture);
  if (c.architecture == Architecture::Phi3) {
    // transformers rotates int(head_dim * partial_rotary_factor) dimensions (Phi-4-mini's 0.75: 96 of 128).
    const double partial = partial_rotary_factor(f);
    if (!(partial > 0 && partial <= 1))
      f.fail("'partial_rotary_factor' is " + std::to_string(partial) + "; it must be in (0, 1]");
    c.rotary_dim = static_cast<std::uint64_t>(static_cast<double>(c.head_dim) * partial);
  }
  if (c.architecture == Architecture::SmolLM3) {
    // no_rope_layers: 1 where a layer rotates, 0 where it does not (its name notwithstanding).
    if (const auto* listed = f.find("no_rope_layers")) {
      if (!listed->IsArray() || listed->Size() != c.num_layers) {
        f.fail("'no_rope_layers' must hold one 0 or 1 per layer (" + std::to_string(c.num_layers) + ")");
      }
      for (const auto& v : listed->GetArray()) {
        if (!v.IsUint() || v.GetUint() > 1) f.fail("'no_rope_layers' holds something that is not 0 or 1");
        c.rope_layers.push_back(v.GetUint() == 1);
      }
    } else {
      c.rope_layers =
          every_layer_but_each(f.positive_or("no_rope_layer_interval", kSmolLM3NoRopeLayerInterval), c.num_layers);
    }
  }
  read_sliding_window(f, c);
  if (is_moe(c.architecture)) c.moe = read_moe(f, c);
  // A vision-language checkpoint keeps it at the top, beside text_config.
  if (const auto* q =
          f.find("quantization_config") != nullptr ? f.find("quantization_config") : top.find("quantization_config")) {
    parse_quantization_config(*q, name, c);
  }
  const std::string scaling_key = f.find("rope_scaling") != nullptr ? "rope_scaling" : "rope_parameters";
  const auto* scaling = f.find("rope_scaling") != nullptr ? f.find("rope_scaling") : rope_parameters;
  if (scaling != nullptr) {
    if (!scaling->IsObject()) f.fail("'" + scaling_key + "' must be an object");
    const std::uint64_t top_original = f.positive_or("original_max_position_embeddings", 0);
    c.rope_scaling = parse_rope_scaling(*scaling, scaling_key, c, text_name, top_original);
  }
  check_shape(c, name);
  return c;
}

std::string read_small_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError(file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (16u << 20)) throw ConfigError(file.string() + ": larger than 16 MiB");
  return text.str();
}

ModelConfig read_hf_config(const std::filesystem::path& config_json) {
  return parse_hf_config(read_small_json(config_json), config_json.string());
}

GenerationDefaults parse_generation_config(std::string_view json, std::string_view name) {
  const auto doc = parse_json_object(json, name);
  const JsonFields f(doc, name);
  GenerationDefaults g;
  auto number = [&](const char* key, std::optional<double>& out) {
    if (f.find(key) != nullptr) out = f.number_or(key, 0.0);
  };
  number("temperature", g.temperature);
  number("top_p", g.top_p);
  number("min_p", g.min_p);
  number("repetition_penalty", g.repetition_penalty);
  if (const auto* k = f.find("top_k")) {
    if (!k->IsInt64()) f.fail("'top_k' must be an integer");
    g.top_k = k->GetInt64();
  }
  if (f.find("max_new_tokens") != nullptr) g.max_new_tokens = f.positive("max_new_tokens");
  // transformers ignores the sampling fields when do_sample is false: generation is greedy.
  if (!f.flag_or("do_sample", true)) {
    g.temperature = 0.0;
    g.top_p.reset();
    g.top_k.reset();
    g.min_p.reset();
  }
  g.eos_token_ids = f.ids("eos_token_id");
  return g;
}

GenerationDefaults read_generation_config(const std::filesystem::path& generation_config_json) {
  std::error_code ec;
  if (!std::filesystem::exists(generation_config_json, ec)) return {};
  return parse_generation_config(read_small_json(generation_config_json), generation_config_json.string());
}

ModelConfig config_from_gguf(const format::GgufLayout& gguf, std::string_view name, const GgufRopeTensors& rope) {
  const auto* arch_value = gguf.find("general.architecture");
  if (arch_value == nullptr || arch_value->as_string() == nullptr)
    throw_config_error(name, "general.architecture is missing");
  const std::string arch = *arch_value->as_string();
  ModelConfig c;
  bool known = false;
  for (const auto& k : kKnown) {
    if (k.gguf_name == arch) {
      c.architecture = k.arch;
      known = true;
    }
  }
  if (!known) {
    std::string list;
    for (const auto& k : kKnown) {
      if (!k.gguf_name.empty()) list += (list.empty() ? "" : ", ") + std::string(k.gguf_name);
    }
    throw_config_error(name, "general.architecture '" + arch + "' is not supported; this engine runs " + list);
  }
  const auto uint_key = [&](const std::string& key, std::optional<std::uint64_t> fallback) -> std::uint64_t {
    const auto* v = gguf.find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw_config_error(name, key + " is missing");
    }
    const auto n = v->as_uint();
    if (!n || *n == 0) throw_config_error(name, key + " must be a positive integer");
    return *n;
  };
  const auto float_key = [&](const std::string& key, double fallback) {
    const auto* v = gguf.find(key);
    if (v == nullptr) return fallback;
    const auto d = v->as_float();
    if (!d) throw_config_error(name, key + " must be a number");
    return *d;
  };
  const std::string p = arch + ".";
  c.hidden_size = uint_key(p + "embedding_length", std::nullopt);
  c.intermediate_size = uint_key(p + "feed_forward_length", std::nullopt);
  c.num_layers = uint_key(p + "block_count", std::nullopt);
  c.num_heads = uint_key(p + "attention.head_count", std::nullopt);
  c.num_kv_heads = uint_key(p + "attention.head_count_kv", c.num_heads);
  c.head_dim = uint_key(p + "attention.key_length", c.hidden_size / c.num_heads);
  c.max_position_embeddings = uint_key(p + "context_length", 4096);
  c.rms_norm_eps = float_key(p + "attention.layer_norm_rms_epsilon", 1e-6);
  c.rope_theta = float_key(p + "rope.freq_base", 10000.0);
  c.qk_norm = c.architecture == Architecture::Qwen3 || c.architecture == Architecture::Qwen3Moe;
  c.attention_bias = c.architecture == Architecture::Qwen2 || c.architecture == Architecture::Qwen2Moe ||
                     c.architecture == Architecture::GptOss;
  c.output_bias = c.attention_sinks = c.architecture == Architecture::GptOss;
  // Mixtral is a llama file with experts; qwen3moe and qwen2moe files are sparse on every layer, llama.cpp's
  // qwen3moe and llama graphs renormalizing the chosen experts' weights, its qwen2moe graph not.
  if (c.architecture == Architecture::Llama && gguf.find(p + "expert_count") != nullptr &&
      uint_key(p + "expert_count", std::nullopt) > 1)
    c.architecture = Architecture::Mixtral;
  if (is_moe(c.architecture)) {
    MoeConfig moe;
    moe.num_experts = uint_key(p + "expert_count", std::nullopt);
    moe.experts_per_token = uint_key(p + "expert_used_count", std::nullopt);
    moe.expert_intermediate_size = c.architecture == Architecture::Mixtral
                                       ? c.intermediate_size
                                       : uint_key(p + "expert_feed_forward_length", std::nullopt);
    moe.norm_topk_prob = c.architecture != Architecture::Qwen2Moe;
    if (c.architecture == Architecture::GptOss) {
      // llama.cpp's gpt-oss graph: biases everywhere, its SwiGLU clamped at 7 (a constant there, not a key).
      moe.biases = true;
      moe.swiglu_limit = kGptOssSwigluLimit;
    }
    if (c.architecture == Architecture::Qwen2Moe)
      moe.shared_expert_intermediate_size = uint_key(p + "expert_shared_feed_forward_length", std::nullopt);
    if (moe.experts_per_token > moe.num_experts) {
      throw_config_error(name, p + "expert_used_count (" + std::to_string(moe.experts_per_token) + ") is more than " +
                                   p + "expert_count (" + std::to_string(moe.num_experts) + ")");
    }
    // llama.cpp scales the chosen experts' weights by this where it is neither 0 nor 1 (DeepSeek's files).
    if (const double scale = float_key(p + "expert_weights_scale", 1.0); scale != 0.0 && scale != 1.0) {
      throw_config_error(name, p + "expert_weights_scale is " + std::to_string(scale) +
                                   ": the engine does not scale experts' weights");
    }
    c.moe = moe;
  }
  // llama.cpp's converter permutes Llama's Q and K rows (SmolLM3's and Mixtral's too, Llamas to it).
  const bool permuted = c.architecture == Architecture::Llama || c.architecture == Architecture::SmolLM3 ||
                        c.architecture == Architecture::Mixtral;
  c.rope_pairing = permuted ? RopePairing::Interleaved : RopePairing::HalfSplit;
  if (c.architecture == Architecture::SmolLM3)
    c.rope_layers = every_layer_but_each(kSmolLM3NoRopeLayerInterval, c.num_layers);
  if (const auto* tokens = gguf.find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->strings() != nullptr) {
    c.vocab_size = tokens->strings()->size();
  }
  c.vocab_size = uint_key(p + "vocab_size", c.vocab_size ? std::optional<std::uint64_t>(c.vocab_size) : std::nullopt);
  c.tie_word_embeddings = gguf.find_tensor("output.weight") == nullptr;
  if (const auto* eos = gguf.find("tokenizer.ggml.eos_token_id"); eos != nullptr && eos->as_int()) {
    c.eos_token_ids = {*eos->as_int()};
  }
  if (const auto* bos = gguf.find("tokenizer.ggml.bos_token_id"); bos != nullptr && bos->as_int()) {
    c.bos_token_id = *bos->as_int();
  }
  const bool phi3 = c.architecture == Architecture::Phi3;
  if (const auto rotary = uint_key(p + "rope.dimension_count", c.head_dim); rotary != c.head_dim) {
    if (!phi3) {
      throw_config_error(name, p + "rope.dimension_count is " + std::to_string(rotary) + " of a head of " +
                                   std::to_string(c.head_dim) + ": " + arch +
                                   " rotates whole heads (phi3 files rotate part of each)");
    }
    c.rotary_dim = rotary;
  }
  // llama.cpp's converter writes Phi-3's window as 0 where the model has none (Phi-4-mini).
  if (const auto* window = gguf.find(p + "attention.sliding_window");
      window != nullptr && !(phi3 && window->as_uint() == std::optional<std::uint64_t>(0)))
    c.sliding_window = uint_key(p + "attention.sliding_window", 0);
  if (c.architecture == Architecture::GptOss) {
    // llama.cpp's gpt-oss loader: every other layer sliding, the first among them.
    if (!c.sliding_window) throw_config_error(name, p + "attention.sliding_window is missing");
    c.sliding_layers = every_layer_but_each(2, c.num_layers);
  }
  if (is_gemma(c.architecture)) {
    // What llama.cpp's gemma2 and gemma3 loaders fix rather than read: Gemma 3's every sixth layer global, the
    // others sliding with RoPE base 10000 unscaled; Gemma 2's every other layer global; q scaled by
    // head_dim^-0.5 but for the 27B models (Gemma 2's 46 layers, Gemma 3's 62), whose query_pre_attn_scalar
    // is hidden_size / heads. The norm weights are stored as w + 1 already. Gemma 2's caps are keys.
    const bool gemma3 = c.architecture == Architecture::Gemma3;
    c.qk_norm = gemma3;
    c.activation = Activation::GeluTanh;
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.post_norms = true;
    const bool large = c.num_layers == (gemma3 ? 62u : 46u);
    c.query_pre_attn_scalar = static_cast<double>(large ? c.hidden_size / c.num_heads : c.head_dim);
    // Gemma 2's loader needs the window; Gemma 3's runs a file without one on global layers alone.
    if (!c.sliding_window && !gemma3) throw_config_error(name, p + "attention.sliding_window is missing");
    if (c.sliding_window) {
      if (gemma3) c.sliding_rope_theta = Gemma3Defaults::rope_local_base_freq;
      const std::uint64_t pattern =
          gemma3 ? Gemma3Defaults::sliding_window_pattern : Gemma2Defaults::sliding_window_pattern;
      c.sliding_layers = every_layer_but_each(pattern, c.num_layers);
    }
    for (const auto& [key, cap] : {std::pair{p + "attn_logit_softcapping", &c.attn_logit_softcapping},
                                   std::pair{p + "final_logit_softcapping", &c.final_logit_softcapping}}) {
      if (gguf.find(key) != nullptr) *cap = float_key(key, 0.0);
    }
  }
  // Llama 3's scaling comes as the rope_freqs.weight tensor, as llama.cpp's converter writes it, and Phi-3's
  // LongRoPE as its two factor tensors with the original context and attention factor as keys; linear and
  // yarn as keys (the converter's names), older files' linear as rope.scale_linear.
  const auto* scaling = gguf.find(p + "rope.scaling.type");
  const std::string type = scaling == nullptr                ? "none"
                           : scaling->as_string() != nullptr ? *scaling->as_string()
                                                             : "(not a string)";
  const auto refuse_unless = [&](const std::string& key, double expected) {
    if (const auto* v = gguf.find(key); v != nullptr && float_key(key, expected) != expected) {
      throw_config_error(name, key + " is " + std::to_string(float_key(key, expected)) +
                                   ": the engine implements only " + std::to_string(expected));
    }
  };
  if (type == "linear" || type == "yarn") {
    RopeScaling r;
    r.type = type == "linear" ? RopeType::Linear : RopeType::Yarn;
    if (gguf.find(p + "rope.scaling.factor") == nullptr) throw_config_error(name, p + "rope.scaling.factor is missing");
    r.factor = float_key(p + "rope.scaling.factor", 1.0);
    if (!(r.factor > 0)) throw_config_error(name, p + "rope.scaling.factor must be positive");
    r.original_max_position_embeddings =
        uint_key(p + "rope.scaling.original_context_length", c.max_position_embeddings);
    if (r.type == RopeType::Yarn) {
      r.beta_fast = float_key(p + "rope.scaling.yarn_beta_fast", r.beta_fast);
      r.beta_slow = float_key(p + "rope.scaling.yarn_beta_slow", r.beta_slow);
      // The converter writes config.json's attention_factor here.
      if (gguf.find(p + "rope.scaling.yarn_attn_factor") != nullptr) {
        r.attention_factor = float_key(p + "rope.scaling.yarn_attn_factor", 1.0);
      }
      refuse_unless(p + "rope.scaling.yarn_ext_factor", 1.0);
      refuse_unless(p + "rope.scaling.yarn_log_multiplier", 0.0);
    }
    refuse_unless(p + "rope.scaling.attn_factor", 1.0);
    c.rope_scaling = r;
  } else if (type == "none" && (!rope.long_factors.empty() || !rope.short_factors.empty())) {
    if (rope.long_factors.empty() || rope.short_factors.empty()) {
      throw_config_error(
          name, std::string(rope.long_factors.empty() ? "rope_factors_long.weight" : "rope_factors_short.weight") +
                    " is missing beside the other LongRoPE factor tensor");
    }
    RopeScaling r;
    r.type = RopeType::LongRope;
    r.original_max_position_embeddings = uint_key(p + "rope.scaling.original_context_length", std::nullopt);
    r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
    r.attention_factor = float_key(p + "rope.scaling.attn_factor",
                                   longrope_attention_factor(r.factor, r.original_max_position_embeddings));
    r.long_factor = rope.long_factors;
    r.short_factor = rope.short_factors;
    c.rope_scaling = r;
  } else if (type == "none") {
    refuse_unless(p + "rope.scaling.attn_factor", 1.0);
    if (const double linear = float_key(p + "rope.scale_linear", 1.0); linear != 1.0) {
      RopeScaling r;
      r.type = RopeType::Linear;
      r.factor = linear;
      c.rope_scaling = r;
    }
  } else {
    throw_config_error(name, p + "rope.scaling.type '" + type +
                                 "' is not supported (supported: none, linear, yarn; Llama 3's scaling as "
                                 "rope_freqs.weight, LongRoPE's as rope_factors_long.weight and "
                                 "rope_factors_short.weight)");
  }
  if (!rope.freqs.empty()) {
    if (rope.freqs.size() != rotary_dims(c) / 2) {
      throw_config_error(name, "rope_freqs.weight holds " + std::to_string(rope.freqs.size()) +
                                   " values; it needs one per rotary frequency (" + std::to_string(rotary_dims(c) / 2) +
                                   ")");
    }
    c.rope_freq_factors = rope.freqs;
    c.rope_scaling.reset();
  }
  check_shape(c, name);
  return c;
}

std::string_view rope_type_name(RopeType type) {
  for (const auto& [t, type_name] : kRopeTypes) {
    if (t == type) return type_name;
  }
  return "unknown";
}

double embedding_scale_in(quant::WeightType embedding_type, std::uint64_t hidden_size) {
  const auto exact = static_cast<float>(std::sqrt(static_cast<double>(hidden_size)));
  switch (embedding_type) {
    case quant::WeightType::BF16: return quant::bf16_to_f32(quant::f32_to_bf16(exact));
    case quant::WeightType::F16: return quant::f16_to_f32(quant::f32_to_f16(exact));
    default: return exact;
  }
}

double longrope_attention_factor(double factor, std::uint64_t original) {
  return factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(original)));
}

std::uint64_t rotary_dims(const ModelConfig& config) {
  return config.rotary_dim != 0 ? config.rotary_dim : config.head_dim;
}

bool is_moe_layer(const ModelConfig& config, std::size_t layer) {
  return config.moe && (config.moe->layers.empty() || config.moe->layers.at(layer));
}

bool is_sliding_layer(const ModelConfig& config, std::size_t layer) {
  if (!config.sliding_window) return false;
  return config.sliding_layers.empty() || config.sliding_layers.at(layer);
}

std::uint64_t derived_max_model_len(const ModelConfig& config) {
  const auto& r = config.rope_scaling;
  // Gemma 3's max_position_embeddings already counts its global layers' scaling (vLLM leaves it as it is).
  if (!r || r->type == RopeType::Llama3 || r->type == RopeType::LongRope || r->factor <= 1.0 ||
      config.architecture == Architecture::Gemma3)
    return config.max_position_embeddings;
  const std::uint64_t base =
      r->type == RopeType::Yarn ? r->original_max_position_embeddings : config.max_position_embeddings;
  return static_cast<std::uint64_t>(static_cast<double>(base) * r->factor);
}

}  // namespace engine::model
