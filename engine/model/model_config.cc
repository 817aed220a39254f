#include "engine/model/model_config.h"

#include <array>
#include <fstream>
#include <sstream>

#include "engine/format/json.h"

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
};

std::string supported_list() {
  std::string out;
  for (const auto& k : kKnown) out += (out.empty() ? "" : ", ") + std::string(k.hf_class);
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
  bool flag_or(const char* key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->IsBool()) fail("'" + std::string(key) + "' must be true or false");
    return v->GetBool();
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
}

}  // namespace

std::string_view architecture_name(Architecture arch) {
  for (const auto& k : kKnown) {
    if (k.arch == arch) return k.hf_class;
  }
  return "unknown";
}

ModelConfig parse_hf_config(std::string_view json, std::string_view name) {
  const auto doc = parse_json_object(json, name);
  const JsonFields f(doc, name);

  const auto* archs = f.find("architectures");
  if (archs == nullptr || !archs->IsArray() || archs->Empty() || !(*archs)[0].IsString()) {
    f.fail("'architectures' names no model class; this engine runs " + supported_list());
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
    f.fail("the architecture " + std::string(hf_class) + " is not supported; this engine runs " + supported_list());

  c.vocab_size = f.positive("vocab_size");
  c.hidden_size = f.positive("hidden_size");
  c.intermediate_size = f.positive("intermediate_size");
  c.num_layers = f.positive("num_hidden_layers");
  c.num_heads = f.positive("num_attention_heads");
  c.num_kv_heads = f.positive_or("num_key_value_heads", c.num_heads);
  c.head_dim = f.positive_or("head_dim", c.hidden_size / c.num_heads);
  c.max_position_embeddings = f.positive_or("max_position_embeddings", 4096);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  // transformers 5 writes one rope_parameters object (rope_theta with the scaling keys) in place of
  // rope_theta and rope_scaling; older files keep the two keys, which then take precedence.
  const auto* rope_parameters = f.find("rope_parameters");
  if (rope_parameters != nullptr && !rope_parameters->IsObject()) f.fail("'rope_parameters' must be an object");
  const double theta =
      rope_parameters != nullptr ? JsonFields(*rope_parameters, name).number_or("rope_theta", 10000.0) : 10000.0;
  c.rope_theta = f.number_or("rope_theta", theta);
  c.tie_word_embeddings = f.flag_or("tie_word_embeddings", false);
  c.qk_norm = c.architecture == Architecture::Qwen3;
  c.attention_bias = f.flag_or("attention_bias", c.architecture == Architecture::Qwen2);
  c.eos_token_ids = f.ids("eos_token_id");
  if (const auto bos = f.ids("bos_token_id"); !bos.empty()) c.bos_token_id = bos.front();

  const char* scaling_key = f.find("rope_scaling") != nullptr ? "rope_scaling" : "rope_parameters";
  if (const auto* scaling = f.find(scaling_key)) {
    if (!scaling->IsObject()) f.fail("'" + std::string(scaling_key) + "' must be an object");
    const JsonFields s(*scaling, name);
    const auto* type = s.find("rope_type") != nullptr ? s.find("rope_type") : s.find("type");
    const std::string kind = type != nullptr && type->IsString() ? type->GetString() : "";
    if (kind == "llama3") {
      Llama3RopeScaling r;
      r.factor = s.number_or("factor", r.factor);
      r.low_freq_factor = s.number_or("low_freq_factor", r.low_freq_factor);
      r.high_freq_factor = s.number_or("high_freq_factor", r.high_freq_factor);
      r.original_max_position_embeddings =
          s.positive_or("original_max_position_embeddings", r.original_max_position_embeddings);
      c.rope_scaling = r;
    } else if (!kind.empty() && kind != "default") {
      f.fail(std::string(scaling_key) + " of type '" + kind + "' is not supported (supported: llama3)");
    }
  }
  check_shape(c, name);
  return c;
}

namespace {

std::string read_small_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError(file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (16u << 20)) throw ConfigError(file.string() + ": larger than 16 MiB");
  return text.str();
}

}  // namespace

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

ModelConfig config_from_gguf(const format::GgufLayout& gguf, std::string_view name) {
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
    for (const auto& k : kKnown) list += (list.empty() ? "" : ", ") + std::string(k.gguf_name);
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
  c.qk_norm = c.architecture == Architecture::Qwen3;
  c.attention_bias = c.architecture == Architecture::Qwen2;
  c.rope_pairing = c.architecture == Architecture::Llama ? RopePairing::Interleaved : RopePairing::HalfSplit;
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
  // Llama 3's scaling comes as the rope_freqs.weight tensor (Checkpoint reads it), as llama.cpp's converter
  // writes it; the scaling types of the key (linear, yarn, longrope) are not implemented, so they are refused.
  if (const auto* scaling = gguf.find(p + "rope.scaling.type"); scaling != nullptr) {
    const std::string type = scaling->as_string() != nullptr ? *scaling->as_string() : "(not a string)";
    if (type != "none") {
      throw_config_error(name, p + "rope.scaling.type '" + type +
                                   "' is not supported; this engine runs unscaled RoPE and Llama 3's scaling given as "
                                   "rope_freqs.weight");
    }
  }
  check_shape(c, name);
  return c;
}

}  // namespace engine::model
