#include "engine/tools/model_writer.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <string>
#include <thread>

#include "base/splitmix64.h"
#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/little_endian.h"
#include "engine/format/safetensors.h"
#include "engine/tools/model_writer_tokenizer.h"

namespace engine::tools {

namespace {

using model::Architecture;
using quant::WeightType;

constexpr std::uint64_t kGgufAlignment = 32;

// ---- names ----------------------------------------------------------------------------------------------

struct ArchNames {
  Architecture arch;
  std::string_view flag;  // --arch value, model_type and general.architecture
};
constexpr std::array kArchs = {ArchNames{Architecture::Qwen3, "qwen3"}, ArchNames{Architecture::Qwen2, "qwen2"},
                               ArchNames{Architecture::Llama, "llama"}};

std::string_view arch_flag(Architecture arch) {
  for (const auto& a : kArchs) {
    if (a.arch == arch) return a.flag;
  }
  return "?";
}

// llama.cpp's general.file_type for a file whose matrices are all of one type (the K-quants' "S" mixes).
std::uint32_t llama_file_type(WeightType type) {
  switch (type) {
    case WeightType::F32: return 0;
    case WeightType::F16: return 1;
    case WeightType::Q4_0: return 2;
    case WeightType::Q8_0: return 7;
    case WeightType::Q4_K: return 14;
    case WeightType::Q5_K: return 16;
    case WeightType::Q6_K: return 18;
    case WeightType::BF16: return 32;
  }
  return 0;
}

bool is_float_type(WeightType type) {
  return type == WeightType::F32 || type == WeightType::F16 || type == WeightType::BF16;
}

std::string_view torch_dtype(WeightType type) {
  return type == WeightType::BF16 ? "bfloat16" : type == WeightType::F16 ? "float16" : "float32";
}

format::SafetensorsDType safetensors_dtype(WeightType type) {
  return type == WeightType::BF16  ? format::SafetensorsDType::BF16
         : type == WeightType::F16 ? format::SafetensorsDType::F16
                                   : format::SafetensorsDType::F32;
}

const format::GgmlTypeInfo& ggml_info(WeightType type) {
  const auto* info = format::ggml_type_info(quant::ggml_type_id(type));
  if (info == nullptr) throw std::logic_error("no ggml type for " + std::string(quant::weight_type_name(type)));
  return *info;
}

// ---- random numbers -------------------------------------------------------------------------------------

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Approximately normal numbers, cheaply: the sum of the four 16-bit fields of one 64-bit draw (Irwin-Hall,
// scaled to unit variance). Tails stop at 3.46 sigma, which random weights do not miss, and 600M values
// take about a second. One stream per tensor, seeded from the seed and the tensor's name, so a tensor's
// values do not depend on which other tensors are written or in what slices.
class NormalStream {
 public:
  NormalStream(std::uint64_t seed, std::string_view name) : random_(seed ^ fnv1a(name)) { random_.next(); }

  void fill(std::span<float> out, float mean, float stddev) {
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3): four U(0,1) sum to variance 1/3
    for (auto& v : out) {
      const std::uint64_t r = random_.next();
      const auto sum =
          static_cast<std::int64_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
      v = mean + stddev * static_cast<float>(sum - 2 * 65535) * kScale;
    }
  }

 private:
  base::SplitMix64 random_;
};

// ---- the tensors ----------------------------------------------------------------------------------------

enum class Init { Normal, NormWeight, RopeFreqs };

struct TensorSpec {
  std::string hf_name;               // empty for GGUF-only tensors
  std::string gguf_name;             // empty for tensors GGUF leaves out
  std::vector<std::uint64_t> shape;  // Hugging Face order: rows, then columns
  Init init = Init::Normal;
  float mean = 0.0f;
  float stddev = 0.0f;
  std::uint64_t permute_heads = 0;  // GGUF llama Q/K: rows reordered within each of these heads

  std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
  std::uint64_t cols() const { return shape.back(); }
  std::uint64_t rows() const { return elements() / cols(); }
  bool is_matrix() const { return shape.size() == 2; }
};

// How spread the random weights are. Tiny models use 1/sqrt(fan_in) for matrices so that every block moves
// the residual stream and the logits spread over several units; the real-size preset uses the
// initializer_range of real checkpoints.
struct Scales {
  float embed;
  float lm_head;
  float matrix;  // 0: 1/sqrt(fan_in)
  float norm_noise = 0.05f;
  float bias = 0.1f;
};

Scales preset_scales(ModelPreset preset) {
  if (preset == ModelPreset::Tiny) return {0.5f, 0.35f, 0.0f};
  return {0.1f, 0.02f, 0.02f};
}

std::vector<TensorSpec> model_tensors(const model::ModelConfig& c, ModelPreset preset) {
  const Scales s = preset_scales(preset);
  const auto matrix_std = [&](std::uint64_t fan_in) {
    return s.matrix > 0 ? s.matrix : 1.0f / std::sqrt(static_cast<float>(fan_in));
  };
  const bool llama = c.architecture == Architecture::Llama;
  const std::uint64_t q_rows = c.num_heads * c.head_dim, kv_rows = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> out;
  const auto add = [&](std::string hf, std::string gguf, std::vector<std::uint64_t> shape, Init init, float mean,
                       float stddev, std::uint64_t permute = 0) {
    out.push_back({std::move(hf), std::move(gguf), std::move(shape), init, mean, stddev, permute});
  };
  if (llama && c.rope_scaling) {
    // llama.cpp's converter stores Llama 3's per-frequency divisors as a tensor beside the metadata.
    add("", "rope_freqs.weight", {c.head_dim / 2}, Init::RopeFreqs, 0, 0);
  }
  add("model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, c.hidden_size}, Init::Normal, 0, s.embed);
  for (std::uint64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string gg = "blk." + std::to_string(l) + ".";
    const float h_std = matrix_std(c.hidden_size);
    add(hf + "input_layernorm.weight", gg + "attn_norm.weight", {c.hidden_size}, Init::NormWeight, 1, s.norm_noise);
    add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q_rows, c.hidden_size}, Init::Normal, 0, h_std,
        llama ? c.num_heads : 0);
    add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv_rows, c.hidden_size}, Init::Normal, 0, h_std,
        llama ? c.num_kv_heads : 0);
    add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv_rows, c.hidden_size}, Init::Normal, 0, h_std);
    if (c.attention_bias) {
      add(hf + "self_attn.q_proj.bias", gg + "attn_q.bias", {q_rows}, Init::Normal, 0, s.bias);
      add(hf + "self_attn.k_proj.bias", gg + "attn_k.bias", {kv_rows}, Init::Normal, 0, s.bias);
      add(hf + "self_attn.v_proj.bias", gg + "attn_v.bias", {kv_rows}, Init::Normal, 0, s.bias);
    }
    if (c.qk_norm) {
      add(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", {c.head_dim}, Init::NormWeight, 1, s.norm_noise);
      add(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", {c.head_dim}, Init::NormWeight, 1, s.norm_noise);
    }
    add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {c.hidden_size, q_rows}, Init::Normal, 0,
        matrix_std(q_rows));
    add(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {c.hidden_size}, Init::NormWeight, 1,
        s.norm_noise);
    add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {c.intermediate_size, c.hidden_size}, Init::Normal, 0,
        h_std);
    add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {c.intermediate_size, c.hidden_size}, Init::Normal, 0, h_std);
    add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {c.hidden_size, c.intermediate_size}, Init::Normal, 0,
        matrix_std(c.intermediate_size));
  }
  add("model.norm.weight", "output_norm.weight", {c.hidden_size}, Init::NormWeight, 1, s.norm_noise);
  if (!c.tie_word_embeddings) {
    add("lm_head.weight", "output.weight", {c.vocab_size, c.hidden_size}, Init::Normal, 0, s.lm_head);
  }
  return out;
}

// Llama 3's divisor of each RoPE frequency (1 for high frequencies, `factor` for low ones, a smooth blend
// between), as llama.cpp's converter computes rope_freqs.
std::vector<float> llama3_rope_divisors(const model::ModelConfig& c) {
  const auto& r = *c.rope_scaling;
  const double low_wavelen = static_cast<double>(r.original_max_position_embeddings) / r.low_freq_factor;
  const double high_wavelen = static_cast<double>(r.original_max_position_embeddings) / r.high_freq_factor;
  std::vector<float> out;
  for (std::uint64_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = std::pow(c.rope_theta, -static_cast<double>(2 * i) / static_cast<double>(c.head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = r.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (static_cast<double>(r.original_max_position_embeddings) / wavelen - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
      divisor = 1.0 / ((1 - smooth) / r.factor + smooth);
    }
    out.push_back(static_cast<float>(divisor));
  }
  return out;
}

// ---- output files ---------------------------------------------------------------------------------------

// A file written front to back through a large buffer; errors are reported with the path.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) throw std::runtime_error("cannot create " + path_.string() + ": " + std::strerror(errno));
    std::setvbuf(file_, nullptr, _IOFBF, 4u << 20);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
  }

  void write(std::span<const std::byte> bytes) {
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
    }
    written_ += bytes.size();
  }
  void pad_to(std::uint64_t alignment) {
    static constexpr std::array<std::byte, 64> kZeros{};
    for (std::uint64_t pad = (alignment - written_ % alignment) % alignment; pad > 0;) {
      const auto n = std::min<std::uint64_t>(pad, kZeros.size());
      write(std::span(kZeros).first(n));
      pad -= n;
    }
  }
  std::uint64_t written() const { return written_; }
  void close() {
    const bool ok = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok) throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
  }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t written_ = 0;
};

void write_text(const std::filesystem::path& path, std::string_view text) {
  OutputFile out(path);
  out.write(std::as_bytes(std::span(text.data(), text.size())));
  out.close();
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

struct GgufTensorPlan {
  const TensorSpec* spec;
  WeightType type;
  std::uint64_t offset;
  std::uint64_t bytes;
};

// One GGUF output: its tensors' types and offsets are fixed before any data is written.
struct GgufOutput {
  WeightType type;
  std::filesystem::path path;
  std::vector<GgufTensorPlan> tensors;  // in write order
  std::unique_ptr<OutputFile> file;
  std::uint64_t data_start = 0;
};

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

// config.json with the fields transformers writes for each family (sorted, as save_pretrained does).
std::string config_json(const model::ModelConfig& c, WeightType dtype) {
  const bool qwen = c.architecture != Architecture::Llama;
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
  if (c.architecture != Architecture::Qwen2) {  // Qwen2 derives it from hidden_size / heads
    key(json, "head_dim");
    json.Uint64(c.head_dim);
  }
  key(json, "hidden_act");
  string(json, "silu");
  key(json, "hidden_size");
  json.Uint64(c.hidden_size);
  key(json, "initializer_range");
  json.Double(0.02);
  key(json, "intermediate_size");
  json.Uint64(c.intermediate_size);
  key(json, "max_position_embeddings");
  json.Uint64(c.max_position_embeddings);
  if (qwen) {
    key(json, "max_window_layers");
    json.Uint64(c.num_layers);
  } else {
    key(json, "mlp_bias");
    json.Bool(false);
  }
  key(json, "model_type");
  string(json, arch_flag(c.architecture));
  key(json, "num_attention_heads");
  json.Uint64(c.num_heads);
  key(json, "num_hidden_layers");
  json.Uint64(c.num_layers);
  key(json, "num_key_value_heads");
  json.Uint64(c.num_kv_heads);
  if (!qwen) {
    key(json, "pretraining_tp");
    json.Int(1);
  }
  key(json, "rms_norm_eps");
  json.Double(c.rms_norm_eps);
  key(json, "rope_scaling");
  if (c.rope_scaling) {
    json.StartObject();
    key(json, "factor");
    json.Double(c.rope_scaling->factor);
    key(json, "high_freq_factor");
    json.Double(c.rope_scaling->high_freq_factor);
    key(json, "low_freq_factor");
    json.Double(c.rope_scaling->low_freq_factor);
    key(json, "original_max_position_embeddings");
    json.Uint64(c.rope_scaling->original_max_position_embeddings);
    key(json, "rope_type");
    string(json, "llama3");
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

// The safetensors header of one shard: tensors in write order, data offsets from 0, padded to 8 bytes.
std::string safetensors_header(const std::vector<const TensorSpec*>& tensors, WeightType dtype) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
  json.StartObject();
  json.Key("__metadata__");
  json.StartObject();
  json.Key("format");
  json.String("pt");
  json.EndObject();
  const auto name = format::dtype_name(safetensors_dtype(dtype));
  std::uint64_t offset = 0;
  for (const auto* t : tensors) {
    json.Key(t->hf_name.c_str(), static_cast<rapidjson::SizeType>(t->hf_name.size()));
    json.StartObject();
    json.Key("dtype");
    json.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    json.Key("shape");
    json.StartArray();
    for (const auto d : t->shape) json.Uint64(d);
    json.EndArray();
    json.Key("data_offsets");
    json.StartArray();
    json.Uint64(offset);
    offset += t->elements() * quant::block_bytes(dtype);
    json.Uint64(offset);
    json.EndArray();
    json.EndObject();
  }
  json.EndObject();
  std::string header(buffer.GetString(), buffer.GetSize());
  header.resize((header.size() + 7) / 8 * 8, ' ');
  return header;
}

// Splits the tensors into `count` consecutive shards of about equal bytes, none empty.
std::vector<std::uint32_t> assign_shards(const std::vector<const TensorSpec*>& tensors, std::uint32_t count,
                                         WeightType dtype) {
  std::uint64_t total = 0;
  for (const auto* t : tensors) total += t->elements() * quant::block_bytes(dtype);
  std::vector<std::uint32_t> shard(tensors.size());
  std::uint64_t before = 0;
  std::uint32_t previous = 0;
  const auto n = static_cast<std::uint64_t>(tensors.size());
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t bytes = tensors[i]->elements() * quant::block_bytes(dtype);
    // The shard where the tensor's middle byte falls, kept monotone, gap-free and leaving enough tensors
    // for the shards still to come.
    auto want = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        count - 1, static_cast<std::uint64_t>((static_cast<long double>(before) + bytes / 2.0L) * count / total)));
    want = std::clamp<std::uint32_t>(want, previous, std::min<std::uint32_t>(previous + 1, count - 1));
    if (i > 0 && want == previous && count - 1 - previous >= n - i) want = previous + 1;
    if (i == 0) want = 0;
    shard[i] = previous = want;
    before += bytes;
  }
  return shard;
}

// ---- values -------------------------------------------------------------------------------------------

// Converts values to a float storage type and back, so later outputs see exactly what was stored.
void store_as(WeightType dtype, std::span<float> values, std::span<std::byte> bytes) {
  quant::quantize_row(dtype, values, bytes);
  if (dtype != WeightType::F32) quant::dequantize_row(dtype, bytes, values);
}

// Encodes rows into a GGUF type. The K-quants' reference quantizers search scales and take ~70 ns a value,
// so large slices are split across the cores.
void encode_rows(WeightType type, std::span<const float> values, std::span<std::byte> out, std::uint64_t rows,
                 std::uint64_t cols) {
  const std::uint64_t workers =
      is_float_type(type) ? 1 : std::clamp<std::uint64_t>(std::thread::hardware_concurrency(), 1, 16);
  if (workers == 1 || rows < 2 * workers || values.size() < (1u << 16)) {
    quant::quantize_row(type, values, out);
    return;
  }
  const std::size_t row_out = out.size() / rows;
  std::vector<std::jthread> threads;
  const auto part = [&](std::uint64_t begin, std::uint64_t end) {
    quant::quantize_row(type, values.subspan(begin * cols, (end - begin) * cols),
                        out.subspan(begin * row_out, (end - begin) * row_out));
  };
  const std::uint64_t per = (rows + workers - 1) / workers;
  for (std::uint64_t begin = per; begin < rows; begin += per)
    threads.emplace_back(part, begin, std::min(rows, begin + per));
  // Sizes were checked when the GGUF layout was planned, so no part throws; the jthreads join on return.
  part(0, std::min(rows, per));
}

// GGUF llama: within each head, row (half j, index i) moves to 2i + j, so that adjacent rows pair in RoPE
// as rows i and i + head_dim/2 pair in the Hugging Face layout.
void permute_rows(std::span<const float> in, std::span<float> out, std::uint64_t heads, std::uint64_t rows,
                  std::uint64_t cols) {
  const std::uint64_t dim = rows / heads, half = dim / 2;
  for (std::uint64_t h = 0; h < heads; ++h) {
    for (std::uint64_t j = 0; j < 2; ++j) {
      for (std::uint64_t i = 0; i < half; ++i) {
        const auto from = (h * dim + j * half + i) * cols;
        const auto to = (h * dim + 2 * i + j) * cols;
        std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(from), cols,
                    out.begin() + static_cast<std::ptrdiff_t>(to));
      }
    }
  }
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

// ---- command line ---------------------------------------------------------------------------------------

// Flags whose presence matters once every flag is read: the required ones and --no-safetensors.
struct FlagsSeen {
  bool arch = false;
  bool preset = false;
  bool out = false;
  bool no_safetensors = false;
};

// "--shards two: expected ..."
UsageError bad_value(std::string_view flag, std::string_view value, std::string_view expected) {
  return UsageError("--" + std::string(flag) + " " + (value.empty() ? "\"\"" : std::string(value)) + ": " +
                    std::string(expected));
}

// model-writer's flags, read into `options` and `seen` (which must outlive the parser).
base::FlagParser model_writer_flags(ModelWriterOptions& options, FlagsSeen& seen) {
  base::FlagParser flags(
      "usage: model-writer --arch ARCH --preset PRESET --out DIR [options]\n\n"
      "Writes a model with random weights (deterministic from --seed) into DIR: config.json,\n"
      "generation_config.json, tokenizer.json, tokenizer_config.json, safetensors weights (one file, or\n"
      "--shards N files with model.safetensors.index.json) and model-TYPE.gguf for each --gguf TYPE.\n"
      "--preset tiny is hidden 256, 2 layers (3 for llama), with a generated byte-level BPE tokenizer;\n"
      "--preset qwen3-0.6b is Qwen3-0.6B's exact shape (--arch qwen3; bf16 by default).");
  std::string arch_names;
  for (const auto& a : kArchs) arch_names += (arch_names.empty() ? "" : "|") + std::string(a.flag);
  flags.add_value("arch", arch_names, "Architecture (required)", [&options, &seen](std::string_view v) {
    const auto it = std::find_if(kArchs.begin(), kArchs.end(), [&](const auto& a) { return a.flag == v; });
    if (it == kArchs.end()) throw bad_value("arch", v, "unknown architecture (expected qwen3, qwen2 or llama)");
    options.arch = it->arch;
    seen.arch = true;
  });
  flags.add_value("preset", "tiny|qwen3-0.6b", "Model shape (required)", [&options, &seen](std::string_view v) {
    if (v == "tiny") {
      options.preset = ModelPreset::Tiny;
    } else if (v == "qwen3-0.6b") {
      options.preset = ModelPreset::Qwen3_0_6B;
    } else {
      throw bad_value("preset", v, "unknown preset (expected tiny or qwen3-0.6b)");
    }
    seen.preset = true;
  });
  flags.add_value("out", "DIR", "Directory to write into, created when missing (required)",
                  [&options, &seen](std::string_view v) {
                    if (v.empty()) throw bad_value("out", v, "needs a directory");
                    options.out_dir = v;
                    seen.out = true;
                  });
  flags.add_value("dtype", "f32|bf16|f16", "Safetensors storage type (default f32 for tiny, bf16 for qwen3-0.6b)",
                  [&options](std::string_view v) {
                    if (v == "f32") {
                      options.dtype = WeightType::F32;
                    } else if (v == "bf16") {
                      options.dtype = WeightType::BF16;
                    } else if (v == "f16") {
                      options.dtype = WeightType::F16;
                    } else {
                      throw bad_value("dtype", v, "unknown dtype (expected f32, bf16 or f16)");
                    }
                  });
  flags.add_value("shards", "N", "Safetensors files, with an index when more than one (default 1)",
                  [&options](std::string_view v) {
                    if (!parse_number(v, options.shards) || options.shards == 0 || options.shards > 99999)
                      throw bad_value("shards", v, "expected a number of shards from 1 to 99999");
                  });
  flags.add_value("seed", "S", "Seed of the random weights (default 0)", [&options](std::string_view v) {
    if (!parse_number(v, options.seed)) throw bad_value("seed", v, "expected an unsigned 64-bit integer");
  });
  flags.add_value(
      "gguf", "TYPE[,TYPE...]", "Also write model-TYPE.gguf; TYPE: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K",
      [&options](std::string_view v) {
        std::size_t start = 0;
        while (start <= v.size()) {
          const auto comma = std::min(v.find(',', start), v.size());
          const auto name = v.substr(start, comma - start);
          const auto type = quant::weight_type_from_name(name);
          if (!type) {
            throw bad_value("gguf", v,
                            "unknown GGUF type \"" + std::string(name) +
                                "\" (expected F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K)");
          }
          if (std::find(options.gguf_types.begin(), options.gguf_types.end(), *type) == options.gguf_types.end())
            options.gguf_types.push_back(*type);
          start = comma + 1;
        }
      });
  flags.add_value("tokenizer-dir", "DIR",
                  "Copy DIR's tokenizer.json and tokenizer_config.json instead of generating them",
                  [&options](std::string_view v) {
                    std::error_code error;
                    if (!std::filesystem::is_regular_file(std::filesystem::path(v) / "tokenizer.json", error))
                      throw bad_value("tokenizer-dir", v, "holds no tokenizer.json");
                    options.tokenizer_dir = v;
                  });
  flags.add_switch("no-safetensors", "Write no .safetensors files (nor index), only the GGUF ones",
                   &seen.no_safetensors);
  return flags;
}

}  // namespace

// ---- public -------------------------------------------------------------------------------------------

std::string shard_file_name(std::uint32_t index, std::uint32_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05u-of-%05u.safetensors", index, count);
  return name;
}

std::string gguf_file_name(WeightType type) {
  return "model-" + std::string(quant::weight_type_name(type)) + ".gguf";
}

model::ModelConfig preset_config(Architecture arch, ModelPreset preset, std::uint64_t tokenizer_size) {
  model::ModelConfig c;
  c.architecture = arch;
  c.qk_norm = arch == Architecture::Qwen3;
  c.attention_bias = arch == Architecture::Qwen2;
  if (preset == ModelPreset::Qwen3_0_6B) {
    c.vocab_size = 151936;
    c.hidden_size = 1024;
    c.intermediate_size = 3072;
    c.num_layers = 28;
    c.num_heads = 16;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.max_position_embeddings = 40960;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1e6;
    c.tie_word_embeddings = true;
    return c;
  }
  // Embedding rows round up past the tokenizer's ids, as real checkpoints pad theirs.
  c.vocab_size = round_up(tokenizer_size, 64);
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = arch == Architecture::Llama ? 3 : 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = arch == Architecture::Qwen3 ? 128 : 64;  // Qwen3's head_dim is not hidden / heads
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = arch == Architecture::Llama ? 1e-5 : 1e-6;
  c.rope_theta = arch == Architecture::Llama ? 5e5 : 1e6;
  // Qwen3 tiny has its own lm_head and Qwen2 tiny ties it, so both paths get exercised.
  c.tie_word_embeddings = arch == Architecture::Qwen2;
  if (arch == Architecture::Llama) c.rope_scaling = model::Llama3RopeScaling{8.0, 1.0, 4.0, 8192};
  return c;
}

std::string model_writer_usage() {
  ModelWriterOptions options;
  FlagsSeen seen;
  return model_writer_flags(options, seen).help();
}

std::optional<ModelWriterOptions> parse_model_writer_command_line(std::span<const std::string> args) {
  ModelWriterOptions options;
  FlagsSeen seen;
  if (!model_writer_flags(options, seen).parse(args)) return std::nullopt;
  if (!seen.arch) throw UsageError("--arch is required (qwen3, qwen2 or llama)");
  if (!seen.preset) throw UsageError("--preset is required (tiny or qwen3-0.6b)");
  if (!seen.out) throw UsageError("--out is required");
  options.safetensors = !seen.no_safetensors;
  return options;
}

ModelWriterOptions parse_model_writer_args(std::span<const std::string> args) {
  auto options = parse_model_writer_command_line(args);
  if (!options) throw UsageError("--help is for the command line; model_writer_usage() has the text");
  return *std::move(options);
}

WrittenModel write_model(const ModelWriterOptions& options) {
  if (options.preset == ModelPreset::Qwen3_0_6B && options.arch != Architecture::Qwen3) {
    throw UsageError("--preset qwen3-0.6b is Qwen3-0.6B's configuration; it needs --arch qwen3, not --arch " +
                     std::string(arch_flag(options.arch)));
  }
  const WeightType dtype =
      options.dtype.value_or(options.preset == ModelPreset::Tiny ? WeightType::F32 : WeightType::BF16);
  if (!is_float_type(dtype)) {
    throw UsageError("--dtype " + std::string(quant::weight_type_name(dtype)) +
                     ": safetensors weights are f32, bf16 or f16");
  }
  if (!options.safetensors && options.shards != 1) {
    throw UsageError("--shards " + std::to_string(options.shards) +
                     " with --no-safetensors: there are no shards to write");
  }

  const TokenizerSpec tokenizer =
      options.tokenizer_dir ? tokenizer_from_directory(*options.tokenizer_dir) : generated_tokenizer(options.arch);
  model::ModelConfig config = preset_config(options.arch, options.preset, tokenizer.tokens.size());
  if (config.vocab_size < tokenizer.tokens.size()) {
    throw UsageError("--preset qwen3-0.6b has " + std::to_string(config.vocab_size) +
                     " embedding rows, fewer than the " + std::to_string(tokenizer.tokens.size()) +
                     " tokens of the tokenizer in --tokenizer-dir");
  }
  config.bos_token_id = tokenizer.bos_id;
  if (options.arch == Architecture::Llama) {
    config.eos_token_ids.assign(tokenizer.stop_ids.begin(), tokenizer.stop_ids.end());
  } else {
    config.eos_token_ids = {tokenizer.eos_id};  // Qwen's config.json names one; generation_config.json lists all
  }

  const std::vector<TensorSpec> tensors = model_tensors(config, options.preset);
  std::vector<const TensorSpec*> hf_tensors;
  for (const auto& t : tensors) {
    if (!t.hf_name.empty()) hf_tensors.push_back(&t);
  }
  if (options.safetensors && options.shards > hf_tensors.size()) {
    throw UsageError("--shards " + std::to_string(options.shards) + ": the model has only " +
                     std::to_string(hf_tensors.size()) + " tensors");
  }

  const auto& dir = options.out_dir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error("cannot create " + dir.string() + ": " + error.message());

  WrittenModel result;
  result.config = config;
  for (const auto* t : hf_tensors) result.parameters += t->elements();
  const auto text_file = [&](const char* name, std::string_view text) {
    write_text(dir / name, text);
    result.files.push_back(dir / name);
  };
  text_file("config.json", config_json(config, dtype));
  text_file("generation_config.json", generation_config_json(config, tokenizer));
  text_file("tokenizer.json", tokenizer.tokenizer_json);
  text_file("tokenizer_config.json", tokenizer.tokenizer_config_json);

  // Safetensors: which shard each tensor goes to, the headers and the index.
  std::vector<std::uint32_t> shard_of;
  std::vector<std::vector<const TensorSpec*>> shard_tensors;
  std::vector<std::filesystem::path> shard_paths;
  if (options.safetensors) {
    shard_of = assign_shards(hf_tensors, options.shards, dtype);
    shard_tensors.resize(options.shards);
    std::map<std::string, std::string> weight_map;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < hf_tensors.size(); ++i) {
      shard_tensors[shard_of[i]].push_back(hf_tensors[i]);
      total += hf_tensors[i]->elements() * quant::block_bytes(dtype);
    }
    for (std::uint32_t s = 0; s < options.shards; ++s) {
      shard_paths.push_back(
          dir / (options.shards == 1 ? std::string("model.safetensors") : shard_file_name(s + 1, options.shards)));
      for (const auto* t : shard_tensors[s]) weight_map[t->hf_name] = shard_paths.back().filename().string();
    }
    if (options.shards > 1) text_file("model.safetensors.index.json", index_json(weight_map, total));
  }

  // GGUF: the header of each file, with every tensor's type and offset decided now.
  std::vector<GgufOutput> ggufs;
  const std::vector<float> rope_divisors = config.rope_scaling ? llama3_rope_divisors(config) : std::vector<float>();
  for (const auto type : options.gguf_types) {
    GgufOutput out{type, dir / gguf_file_name(type), {}, nullptr, 0};
    const std::string arch(arch_flag(options.arch));
    std::vector<std::pair<std::string, format::GgufValue>> metadata;
    const auto u32 = [&](const std::string& k, std::uint64_t v) {
      metadata.emplace_back(k, format::GgufValue::scalar(static_cast<std::uint32_t>(v)));
    };
    const auto f32 = [&](const std::string& k, double v) {
      metadata.emplace_back(k, format::GgufValue::scalar(static_cast<float>(v)));
    };
    metadata.emplace_back("general.architecture", format::GgufValue::string(arch));
    metadata.emplace_back("general.name", format::GgufValue::string("model-writer " + arch));
    u32("general.file_type", llama_file_type(type));
    if (!is_float_type(type)) u32("general.quantization_version", 2);
    u32(arch + ".vocab_size", config.vocab_size);
    u32(arch + ".context_length", config.max_position_embeddings);
    u32(arch + ".embedding_length", config.hidden_size);
    u32(arch + ".block_count", config.num_layers);
    u32(arch + ".feed_forward_length", config.intermediate_size);
    u32(arch + ".attention.head_count", config.num_heads);
    u32(arch + ".attention.head_count_kv", config.num_kv_heads);
    u32(arch + ".attention.key_length", config.head_dim);
    u32(arch + ".attention.value_length", config.head_dim);
    u32(arch + ".rope.dimension_count", config.head_dim);
    f32(arch + ".rope.freq_base", config.rope_theta);
    f32(arch + ".attention.layer_norm_rms_epsilon", config.rms_norm_eps);
    if (config.rope_scaling) {
      metadata.emplace_back(arch + ".rope.scaling.type", format::GgufValue::string("llama3"));
      f32(arch + ".rope.scaling.factor", config.rope_scaling->factor);
      u32(arch + ".rope.scaling.original_context_length", config.rope_scaling->original_max_position_embeddings);
    }
    for (auto& entry : gguf_tokenizer_metadata(tokenizer, config.vocab_size)) metadata.push_back(std::move(entry));

    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
      if (t.gguf_name.empty()) continue;
      const WeightType tensor_type = t.is_matrix() ? type : WeightType::F32;
      const auto row = quant::row_bytes(tensor_type, t.cols());
      if (!row) {
        throw UsageError("--gguf " + std::string(quant::weight_type_name(type)) + ": tensor " + t.gguf_name +
                         " has rows of " + std::to_string(t.cols()) + " values, not whole blocks of " +
                         std::to_string(quant::block_elements(tensor_type)));
      }
      out.tensors.push_back({&t, tensor_type, offset, *row * t.rows()});
      offset = round_up(offset + *row * t.rows(), kGgufAlignment);
    }

    GgufHeader header;
    header.scalar<std::uint32_t>(0x46554747);  // "GGUF"
    header.scalar<std::uint32_t>(3);
    header.scalar<std::uint64_t>(out.tensors.size());
    header.scalar<std::uint64_t>(metadata.size());
    for (const auto& [k, v] : metadata) {
      header.string(k);
      header.scalar<std::uint32_t>(static_cast<std::uint32_t>(v.type()));
      header.value(v);
    }
    for (const auto& plan : out.tensors) {
      header.string(plan.spec->gguf_name);
      header.scalar<std::uint32_t>(static_cast<std::uint32_t>(plan.spec->shape.size()));
      // GGUF lists dimensions innermost first: columns, then rows.
      for (auto d = plan.spec->shape.rbegin(); d != plan.spec->shape.rend(); ++d) header.scalar<std::uint64_t>(*d);
      header.scalar<std::uint32_t>(ggml_info(plan.type).id);
      header.scalar<std::uint64_t>(plan.offset);
    }
    out.file = std::make_unique<OutputFile>(out.path);
    out.file->write(header.bytes());
    out.file->pad_to(kGgufAlignment);
    out.data_start = out.file->written();
    ggufs.push_back(std::move(out));
  }

  // The tensors, a slice of rows at a time, into the current shard and every GGUF file.
  std::unique_ptr<OutputFile> shard;
  std::uint32_t shard_index = 0;
  std::size_t hf_index = 0;
  std::vector<float> values, permuted;
  std::vector<std::byte> stored, encoded;
  std::vector<std::size_t> gguf_next(ggufs.size(), 0);
  for (const auto& t : tensors) {
    const bool in_safetensors = options.safetensors && !t.hf_name.empty();
    if (in_safetensors) {
      const auto s = shard_of[hf_index++];
      if (!shard || s != shard_index) {
        if (shard) shard->close();
        shard_index = s;
        shard = std::make_unique<OutputFile>(shard_paths[s]);
        const std::string header = safetensors_header(shard_tensors[s], dtype);
        std::array<std::byte, 8> length{};
        format::store_le<std::uint64_t>(length.data(), header.size());
        shard->write(length);
        shard->write(std::as_bytes(std::span(header.data(), header.size())));
        result.files.push_back(shard_paths[s]);
      }
    }
    const std::uint64_t cols = t.cols(), rows = t.rows();
    // Permuted tensors are reordered whole (Q and K are small); the rest go in slices of about 1M values.
    const std::uint64_t slice_rows =
        t.permute_heads > 0 ? rows : std::max<std::uint64_t>(1, std::min<std::uint64_t>(rows, (1u << 20) / cols));
    NormalStream stream(options.seed, t.hf_name.empty() ? t.gguf_name : t.hf_name);
    for (std::uint64_t row = 0; row < rows; row += slice_rows) {
      const std::uint64_t n_rows = std::min(slice_rows, rows - row);
      const std::size_t n = n_rows * cols;
      values.resize(n);
      if (t.init == Init::RopeFreqs) {
        std::copy(rope_divisors.begin(), rope_divisors.end(), values.begin());
      } else {
        stream.fill(values, t.mean, t.stddev);
      }
      // Checkpoint tensors are rounded to the storage type first (GGUF files are converted from what the
      // checkpoint holds); GGUF-only ones (rope_freqs) keep float32.
      if (!t.hf_name.empty()) {
        stored.resize(n * quant::block_bytes(dtype));
        store_as(dtype, values, stored);
      }
      if (in_safetensors) shard->write(stored);
      for (std::size_t g = 0; g < ggufs.size(); ++g) {
        auto& out = ggufs[g];
        if (gguf_next[g] >= out.tensors.size() || out.tensors[gguf_next[g]].spec != &t) continue;
        const auto& plan = out.tensors[gguf_next[g]];
        std::span<const float> source = values;
        if (t.permute_heads > 0) {
          permuted.resize(n);
          permute_rows(values, permuted, t.permute_heads, rows, cols);
          source = permuted;
        }
        encoded.resize(*quant::row_bytes(plan.type, cols) * n_rows);
        encode_rows(plan.type, source, encoded, n_rows, cols);
        out.file->write(encoded);
      }
    }
    for (std::size_t g = 0; g < ggufs.size(); ++g) {
      auto& out = ggufs[g];
      if (gguf_next[g] < out.tensors.size() && out.tensors[gguf_next[g]].spec == &t) {
        const auto& plan = out.tensors[gguf_next[g]];
        if (out.file->written() != out.data_start + plan.offset + plan.bytes) {
          throw std::logic_error(out.path.string() + ": tensor " + t.gguf_name + " ends at the wrong offset");
        }
        out.file->pad_to(kGgufAlignment);
        ++gguf_next[g];
      }
    }
  }
  if (shard) shard->close();
  for (auto& out : ggufs) {
    out.file->close();
    result.files.push_back(out.path);
  }
  return result;
}

}  // namespace engine::tools
