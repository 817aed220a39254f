#include "engine/model_writer/model_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numbers>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "base/splitmix64.h"
#include "engine/format/gguf_split.h"
#include "engine/format/little_endian.h"
#include "engine/model_writer/model_writer_internal.h"
#include "engine/model_writer/model_writer_tokenizer.h"

namespace engine::tools {

namespace detail {

// ---- names ----------------------------------------------------------------------------------------------

std::string_view arch_flag(Architecture arch) {
  for (const auto& a : kArchs) {
    if (a.arch == arch) return a.flag;
  }
  return "?";
}

std::string_view gguf_arch_name(Architecture arch) {
  return arch == Architecture::Mistral || arch == Architecture::Mixtral ? "llama" : arch_flag(arch);
}

std::string arch_flag_list() {
  std::string out;
  for (std::size_t i = 0; i < kArchs.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kArchs.size() ? " or " : ", ") + std::string(kArchs[i].flag);
  return out;
}

bool is_float_type(WeightType type) {
  return type == WeightType::F32 || type == WeightType::F16 || type == WeightType::BF16;
}

bool SafetensorsStorage::is_fp8(const TensorSpec& t) const {
  return fp8 && t.is_matrix() && !t.hf_name.empty() && !t.gguf_only &&
         (!t.expert_hf_names.empty() || std::string_view(t.hf_name).ends_with("_proj.weight"));
}

std::string SafetensorsStorage::scale_name(const std::string& weight_name) const {
  constexpr std::string_view kWeight = "weight";
  return weight_name.substr(0, weight_name.size() - kWeight.size()) + fp8->scale_name;
}

std::vector<std::uint64_t> SafetensorsStorage::scale_shape(std::uint64_t rows, std::uint64_t cols) const {
  switch (fp8->granularity) {
    case model::Fp8Scheme::Granularity::Tensor: return {1};
    case model::Fp8Scheme::Granularity::Channel: return {rows, 1};
    case model::Fp8Scheme::Granularity::Block: break;
  }
  return {round_up(rows, fp8->block_rows) / fp8->block_rows, round_up(cols, fp8->block_cols) / fp8->block_cols};
}

WeightType SafetensorsStorage::scale_type() const {
  return fp8->granularity == model::Fp8Scheme::Granularity::Channel ? WeightType::BF16 : WeightType::F32;
}

std::uint64_t SafetensorsStorage::scale_bytes(std::uint64_t rows, std::uint64_t cols) const {
  std::uint64_t n = 1;
  for (const auto d : scale_shape(rows, cols)) n *= d;
  return n * quant::block_bytes(scale_type());
}

std::uint64_t SafetensorsStorage::bytes(const TensorSpec& t) const {
  if (t.u8) return t.elements();
  if (!is_fp8(t)) return t.elements() * quant::block_bytes(dtype);
  const std::uint64_t matrices = t.shape.size() == 3 ? t.shape[0] : 1;
  return t.elements() + matrices * scale_bytes(t.shape[t.shape.size() - 2], t.cols());
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// ---- output files ---------------------------------------------------------------------------------------

OutputFile::OutputFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create");
  buffer_.reserve(kRunBytes);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(std::span<const std::byte> bytes) {
  written_ += bytes.size();
  while (!bytes.empty()) {
    const std::size_t take = std::min(kRunBytes - buffer_.size(), bytes.size());
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
    bytes = bytes.subspan(take);
    if (buffer_.size() == kRunBytes) flush();
  }
}

void OutputFile::flush() {
  for (std::span<const std::byte> rest = buffer_; !rest.empty();) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    rest = rest.subspan(static_cast<std::size_t>(n));
  }
  buffer_.clear();
}

void OutputFile::pad_to(std::uint64_t alignment) {
  static constexpr std::array<std::byte, 64> kZeros{};
  for (std::uint64_t pad = (alignment - written_ % alignment) % alignment; pad > 0;) {
    const auto n = std::min<std::uint64_t>(pad, kZeros.size());
    write(std::span(kZeros).first(n));
    pad -= n;
  }
}

void OutputFile::close() {
  flush();
  if (::close(std::exchange(fd_, -1)) != 0) fail("write");
}

void OutputFile::fail(const char* what) const {
  throw std::runtime_error("cannot " + std::string(what) + " " + path_.string() + ": " + std::strerror(errno));
}

void write_text(const std::filesystem::path& path, std::string_view text) {
  OutputFile out(path);
  out.write(std::as_bytes(std::span(text.data(), text.size())));
  out.close();
}

}  // namespace detail

namespace {

using model::Architecture;
using quant::WeightType;

using detail::arch_flag;
using detail::GgufOutput;
using detail::Init;
using detail::is_float_type;
using detail::kGgufAlignment;
using detail::OutputFile;
using detail::round_up;
using detail::SafetensorsStorage;
using detail::TensorSpec;

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

// Llama 3's scaling as llama.cpp's rope_freqs.weight: one divisor per frequency.
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

// Layer l's mixture of experts: the router, each expert's gate, up and down (stacked for GGUF; Mixtral's w1, w3
// and w2), Qwen2-MoE's shared expert and its gate. `down` is how the down projections are made (Zero in a
// scripted model, whose blocks add nothing).
// gpt-oss's mixture: the router with its bias; GGUF's split expert stacks and biases, from which the Hugging Face
// form's fused gate_up_proj and transposed down_proj (with gate_up_proj_bias) are made; down's bias, the same in both.
void add_gpt_oss_experts(const model::ModelConfig& c, std::uint64_t l, float h_std, float inter_std, float bias_std,
                         Init down, std::vector<TensorSpec>& out) {
  const model::MoeConfig& m = *c.moe;
  const std::string hf = "model.layers." + std::to_string(l) + ".mlp.";
  const std::string gg = "blk." + std::to_string(l) + ".";
  const std::uint64_t inter = m.expert_intermediate_size, experts = m.num_experts, hidden = c.hidden_size;
  const auto add = [&](std::string hf_name, std::string gguf, std::vector<std::uint64_t> shape, Init init,
                       float stddev) -> TensorSpec& {
    return out.emplace_back(
        TensorSpec{std::move(hf_name), std::move(gguf), std::move(shape), init, 0, stddev, 0, 0.0f, {}, {}});
  };
  add(hf + "router.weight", gg + "ffn_gate_inp.weight", {experts, hidden}, Init::Normal, h_std);
  add(hf + "router.bias", gg + "ffn_gate_inp.bias", {experts}, Init::Normal, bias_std);
  for (const auto& [part, rows, cols, init, stddev] : {std::tuple{"gate", inter, hidden, Init::Normal, h_std},
                                                       {"up", inter, hidden, Init::Normal, h_std},
                                                       {"down", hidden, inter, down, inter_std}}) {
    TensorSpec& t =
        add(hf + "experts." + part, gg + "ffn_" + part + "_exps.weight", {experts, rows, cols}, init, stddev);
    t.gguf_only = true;
    t.mxfp4_values = c.mxfp4_experts;
  }
  for (const char* part : {"gate", "up"}) {
    TensorSpec& bias = add(hf + "experts." + part + "_bias", gg + "ffn_" + part + "_exps.bias", {experts, inter},
                           Init::Normal, bias_std);
    bias.gguf_only = bias.gguf_float = true;
  }
  if (c.mxfp4_experts) {
    for (const auto& [name, rows, cols] :
         {std::tuple{"gate_up_proj", 2 * inter, hidden}, {"down_proj", hidden, inter}}) {
      add(hf + "experts." + name + "_blocks", "", {experts, rows, cols / 32, 16}, Init::GptOssBlocks, 0).u8 = true;
      add(hf + "experts." + name + "_scales", "", {experts, rows, cols / 32}, Init::GptOssScales, 0).u8 = true;
    }
  } else {
    add(hf + "experts.gate_up_proj", "", {experts, hidden, 2 * inter}, Init::GptOssGateUp, 0);
    add(hf + "experts.down_proj", "", {experts, inter, hidden}, Init::GptOssDown, 0);
  }
  add(hf + "experts.gate_up_proj_bias", "", {experts, 2 * inter}, Init::GptOssGateUpBias, 0);
  add(hf + "experts.down_proj_bias", gg + "ffn_down_exps.bias", {experts, hidden}, Init::Normal, bias_std).gguf_float =
      true;
}

void add_experts(const model::ModelConfig& c, std::uint64_t l, float h_std, float inter_std, Init down,
                 std::vector<TensorSpec>& out) {
  const model::MoeConfig& m = *c.moe;
  const bool mixtral = c.architecture == Architecture::Mixtral;
  const std::string hf = "model.layers." + std::to_string(l) + "." + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::string gg = "blk." + std::to_string(l) + ".";
  const std::uint64_t inter = m.expert_intermediate_size;
  out.push_back({hf + "gate.weight",
                 gg + "ffn_gate_inp.weight",
                 {m.num_experts, c.hidden_size},
                 Init::Normal,
                 0,
                 h_std,
                 0,
                 0.0f,
                 {},
                 {},
                 false});
  const auto stack = [&](const char* hf_matrix, const char* gguf, std::uint64_t rows, std::uint64_t cols, Init init,
                         float stddev) {
    TensorSpec t{
        hf + "experts.*." + hf_matrix, gg + gguf, {m.num_experts, rows, cols}, init, 0, stddev, 0, 0.0f, {}, {}, false};
    for (std::uint64_t e = 0; e < m.num_experts; ++e)
      t.expert_hf_names.push_back(hf + "experts." + std::to_string(e) + "." + hf_matrix);
    out.push_back(std::move(t));
  };
  stack(mixtral ? "w1.weight" : "gate_proj.weight", "ffn_gate_exps.weight", inter, c.hidden_size, Init::Normal, h_std);
  stack(mixtral ? "w3.weight" : "up_proj.weight", "ffn_up_exps.weight", inter, c.hidden_size, Init::Normal, h_std);
  stack(mixtral ? "w2.weight" : "down_proj.weight", "ffn_down_exps.weight", c.hidden_size, inter, down, inter_std);
  if (const std::uint64_t shared = m.shared_expert_intermediate_size; shared != 0) {
    const auto add = [&](std::string hf_name, std::string gguf, std::vector<std::uint64_t> shape, Init init,
                         float stddev) {
      out.push_back({std::move(hf_name), std::move(gguf), std::move(shape), init, 0, stddev, 0, 0.0f, {}, {}, false});
    };
    add(hf + "shared_expert.gate_proj.weight", gg + "ffn_gate_shexp.weight", {shared, c.hidden_size}, Init::Normal,
        h_std);
    add(hf + "shared_expert.up_proj.weight", gg + "ffn_up_shexp.weight", {shared, c.hidden_size}, Init::Normal, h_std);
    add(hf + "shared_expert.down_proj.weight", gg + "ffn_down_shexp.weight", {c.hidden_size, shared}, down,
        1.0f / std::sqrt(static_cast<float>(shared)));
    // [1, hidden] in safetensors (a Linear of one output), [hidden] in GGUF; the same values either way.
    add(hf + "shared_expert_gate.weight", gg + "ffn_gate_inp_shexp.weight", {1, c.hidden_size}, Init::Normal, h_std);
    out.back().gguf_vector = true;
  }
}

std::vector<TensorSpec> model_tensors(const model::ModelConfig& c, ModelPreset preset, bool scripted) {
  const Scales s = preset_scales(preset);
  const auto matrix_std = [&](std::uint64_t fan_in) {
    return s.matrix > 0 ? s.matrix : 1.0f / std::sqrt(static_cast<float>(fan_in));
  };
  // llama.cpp's converter permutes Llama's Q and K rows for its interleaved RoPE, SmolLM3's as a Llama's.
  const bool llama = c.architecture == Architecture::Llama || c.architecture == Architecture::SmolLM3 ||
                     c.architecture == Architecture::Mistral || c.architecture == Architecture::Mixtral;
  const std::uint64_t q_rows = c.num_heads * c.head_dim, kv_rows = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> out;
  const auto add = [&](std::string hf, std::string gguf, std::vector<std::uint64_t> shape, Init init, float mean,
                       float stddev, std::uint64_t permute = 0) {
    out.push_back({std::move(hf), std::move(gguf), std::move(shape), init, mean, stddev, permute, 0.0f, {}, {}, false});
  };
  // Norm weights around 1; Gemma's files store them as w around 0 for its (1 + w), GGUF as w + 1.
  const auto add_norm = [&](std::string hf, std::string gguf, std::uint64_t size) {
    add(std::move(hf), std::move(gguf), {size}, Init::NormWeight, c.norm_weight_plus_one ? 0.0f : 1.0f, s.norm_noise);
    if (c.norm_weight_plus_one) out.back().gguf_plus = 1.0f;
  };
  if (llama && c.rope_scaling && c.rope_scaling->type == model::RopeType::Llama3) {
    add("", "rope_freqs.weight", {c.head_dim / 2}, Init::Fixed, 0, 0);
    out.back().values = llama3_rope_divisors(c);
  }
  // Phi-3's LongRoPE factors are tensors in GGUF files (config.json lists them).
  if (c.rope_scaling && c.rope_scaling->type == model::RopeType::LongRope) {
    for (const auto& [name, factors] : {std::pair{"rope_factors_long.weight", &c.rope_scaling->long_factor},
                                        std::pair{"rope_factors_short.weight", &c.rope_scaling->short_factor}}) {
      add("", name, {factors->size()}, Init::Fixed, 0, 0);
      out.back().values.assign(factors->begin(), factors->end());
    }
  }
  // Phi-3 stacks q, k and v in one matrix, and gate and up in another (llama.cpp's phi3 files too).
  const bool stacked = c.architecture == Architecture::Phi3;
  const Init embed = scripted ? Init::ScriptEmbedding : Init::Normal;
  const Init output_projection = scripted ? Init::Zero : Init::Normal;
  add("model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, c.hidden_size}, embed, 0, s.embed);
  for (std::uint64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string gg = "blk." + std::to_string(l) + ".";
    const float h_std = matrix_std(c.hidden_size);
    add_norm(hf + "input_layernorm.weight", gg + "attn_norm.weight", c.hidden_size);
    if (stacked) {
      add(hf + "self_attn.qkv_proj.weight", gg + "attn_qkv.weight", {q_rows + 2 * kv_rows, c.hidden_size}, Init::Normal,
          0, h_std);
    } else {
      add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q_rows, c.hidden_size}, Init::Normal, 0, h_std,
          llama ? c.num_heads : 0);
      add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv_rows, c.hidden_size}, Init::Normal, 0, h_std,
          llama ? c.num_kv_heads : 0);
      add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv_rows, c.hidden_size}, Init::Normal, 0, h_std);
    }
    if (c.attention_bias) {
      add(hf + "self_attn.q_proj.bias", gg + "attn_q.bias", {q_rows}, Init::Normal, 0, s.bias);
      add(hf + "self_attn.k_proj.bias", gg + "attn_k.bias", {kv_rows}, Init::Normal, 0, s.bias);
      add(hf + "self_attn.v_proj.bias", gg + "attn_v.bias", {kv_rows}, Init::Normal, 0, s.bias);
    }
    if (c.qk_norm) {
      add_norm(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", c.head_dim);
      add_norm(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", c.head_dim);
    }
    add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {c.hidden_size, q_rows}, output_projection, 0,
        matrix_std(q_rows));
    if (c.output_bias)
      add(hf + "self_attn.o_proj.bias", gg + "attn_output.bias", {c.hidden_size}, Init::Normal, 0, s.bias);
    // gpt-oss's sinks: logits around the scores' size, some heads' above them.
    if (c.attention_sinks) add(hf + "self_attn.sinks", gg + "attn_sinks.weight", {c.num_heads}, Init::Normal, 0, 1.0f);
    // Gemma's post_attention_layernorm is the attention output's norm, its pre_feedforward_layernorm the
    // feed-forward input's (the others' post_attention_layernorm).
    if (c.post_norms) {
      add_norm(hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", c.hidden_size);
      add_norm(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight", c.hidden_size);
    } else {
      // llama.cpp's gpt-oss files call it post_attention_norm.
      add_norm(hf + "post_attention_layernorm.weight",
               gg + (c.architecture == Architecture::GptOss ? "post_attention_norm.weight" : "ffn_norm.weight"),
               c.hidden_size);
    }
    if (c.architecture == Architecture::GptOss) {
      add_gpt_oss_experts(c, l, h_std, matrix_std(c.moe->expert_intermediate_size), s.bias, output_projection, out);
    } else if (model::is_moe_layer(c, l)) {
      add_experts(c, l, h_std, matrix_std(c.moe->expert_intermediate_size), output_projection, out);
    } else if (stacked) {
      add(hf + "mlp.gate_up_proj.weight", gg + "ffn_up.weight", {2 * c.intermediate_size, c.hidden_size}, Init::Normal,
          0, h_std);
    } else {
      add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {c.intermediate_size, c.hidden_size}, Init::Normal, 0,
          h_std);
      add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {c.intermediate_size, c.hidden_size}, Init::Normal, 0,
          h_std);
    }
    if (!model::is_moe_layer(c, l)) {
      add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {c.hidden_size, c.intermediate_size}, output_projection,
          0, matrix_std(c.intermediate_size));
    }
    if (c.post_norms) add_norm(hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", c.hidden_size);
  }
  add_norm("model.norm.weight", "output_norm.weight", c.hidden_size);
  if (!c.tie_word_embeddings) {
    add("lm_head.weight", "output.weight", {c.vocab_size, c.hidden_size}, scripted ? Init::ScriptHead : Init::Normal, 0,
        s.lm_head);
  }
  return out;
}

// ---- safetensors ----------------------------------------------------------------------------------------

// Splits the tensors into `count` consecutive shards of about equal bytes, none empty.
std::vector<std::uint32_t> assign_shards(const std::vector<const TensorSpec*>& tensors, std::uint32_t count,
                                         const SafetensorsStorage& storage) {
  std::uint64_t total = 0;
  for (const auto* t : tensors) total += storage.bytes(*t);
  std::vector<std::uint32_t> shard(tensors.size());
  std::uint64_t before = 0;
  std::uint32_t previous = 0;
  const auto n = static_cast<std::uint64_t>(tensors.size());
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t bytes = storage.bytes(*tensors[i]);
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

// Quantizes one matrix (rows x cols values) to FP8 with the storage's scales: each block's scale is its largest
// magnitude over 448 (E4M3's largest), rounded to the scales' type first, so the values divided by it fit; the
// values become what was stored (FP8 times scale), so that later outputs see exactly that.
void store_fp8(const SafetensorsStorage& storage, std::span<float> values, std::uint64_t rows, std::uint64_t cols,
               std::span<std::byte> stored, std::span<std::byte> scale_bytes) {
  const auto shape = storage.scale_shape(rows, cols);
  const std::uint64_t grid_rows = shape.size() == 2 ? shape[0] : 1;
  const std::uint64_t grid_cols = shape.size() == 2 ? shape[1] : 1;
  const std::uint64_t block_rows = (rows + grid_rows - 1) / grid_rows, block_cols = (cols + grid_cols - 1) / grid_cols;
  std::vector<float> scales(grid_rows * grid_cols, 0.0f);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      float& s = scales[r / block_rows * grid_cols + c / block_cols];
      s = std::max(s, std::fabs(values[r * cols + c]));
    }
  }
  const WeightType scale_type = storage.scale_type();
  for (auto& s : scales) {
    s = s > 0 ? s / 448.0f : 1.0f;
    if (scale_type == WeightType::BF16) s = quant::bf16_to_f32(quant::f32_to_bf16(s));
  }
  quant::quantize_row(scale_type, scales, scale_bytes);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      float& v = values[r * cols + c];
      const float s = scales[r / block_rows * grid_cols + c / block_cols];
      const std::uint8_t q = quant::f32_to_e4m3(v / s);
      stored[r * cols + c] = static_cast<std::byte>(q);
      v = quant::e4m3_to_f32(q) * s;
    }
  }
}

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

// ---- the steps of write_model ---------------------------------------------------------------------------

// Checks the options that only fit together in some ways, and returns the safetensors storage type.
WeightType checked_dtype(const ModelWriterOptions& options) {
  if (options.preset == ModelPreset::Qwen3_0_6B && options.arch != Architecture::Qwen3) {
    throw UsageError("--preset qwen3-0.6b is Qwen3-0.6B's configuration; it needs --arch qwen3, not --arch " +
                     std::string(arch_flag(options.arch)));
  }
  if (options.preset == ModelPreset::Qwen3_30B_A3B && options.arch != Architecture::Qwen3Moe) {
    throw UsageError("--preset qwen3-30b-a3b is Qwen3-30B-A3B's configuration; it needs --arch qwen3moe, not --arch " +
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
  return dtype;
}

// The preset's configuration for `tokenizer`: its vocabulary size and special tokens.
model::ModelConfig model_config(const ModelWriterOptions& options, const TokenizerSpec& tokenizer) {
  model::ModelConfig config = preset_config(options.arch, options.preset, tokenizer.tokens.size());
  if (options.num_layers) {
    config.num_layers = *options.num_layers;
    if (config.moe && !config.moe->layers.empty()) config.moe->layers.resize(config.num_layers, true);
    for (auto* per_layer : {&config.sliding_layers, &config.rope_layers}) {
      if (!per_layer->empty()) {
        throw UsageError("--num-hidden-layers with --arch " + std::string(arch_flag(options.arch)) +
                         ": its layers differ from each other (sliding windows, RoPE), which a shorter model "
                         "would cut at random");
      }
    }
  }
  if (config.vocab_size < tokenizer.tokens.size()) {
    throw UsageError("--preset qwen3-0.6b has " + std::to_string(config.vocab_size) +
                     " embedding rows, fewer than the " + std::to_string(tokenizer.tokens.size()) +
                     " tokens of the tokenizer in --tokenizer-dir");
  }
  if (options.rope_scaling) {
    config.rope_scaling.reset();
    if (*options.rope_scaling) config.rope_scaling = preset_rope_scaling(**options.rope_scaling, config);
  }
  const bool llama3 = config.rope_scaling && config.rope_scaling->type == model::RopeType::Llama3;
  if (llama3 && options.arch != Architecture::Llama) {
    throw UsageError("--rope-scaling llama3 is Llama 3's; --arch " + std::string(arch_flag(options.arch)) +
                     " files would carry it in no form llama.cpp reads (it is llama's rope_freqs.weight)");
  }
  const bool longrope = config.rope_scaling && config.rope_scaling->type == model::RopeType::LongRope;
  if (longrope && options.arch != Architecture::Phi3) {
    throw UsageError("--rope-scaling longrope is Phi-3's; --arch " + std::string(arch_flag(options.arch)) +
                     " is not run with it (transformers' Phi3ForCausalLM is)");
  }
  if (config.rope_scaling && config.rope_scaling->type == model::RopeType::Dynamic && !options.gguf_types.empty()) {
    throw UsageError(
        "--rope-scaling dynamic with --gguf: GGUF has no dynamic scaling type (llama.cpp's are none, "
        "linear, yarn and longrope)");
  }
  config.fp8 = options.fp8;
  if (options.mxfp4) {
    if (options.arch != Architecture::GptOss) {
      throw UsageError("--mxfp4 is gpt-oss's checkpoint form (its experts as MXFP4 blocks); --arch " +
                       std::string(arch_flag(options.arch)) + " has no such form");
    }
    if (options.fp8) throw UsageError("--mxfp4 with --fp8: a checkpoint has one quantization_config");
    config.mxfp4_experts = true;
  }
  config.bos_token_id = tokenizer.bos_id;
  if (options.arch == Architecture::Llama) {
    config.eos_token_ids.assign(tokenizer.stop_ids.begin(), tokenizer.stop_ids.end());
  } else {
    config.eos_token_ids = {tokenizer.eos_id};  // Qwen's config.json names one; generation_config.json lists all
  }
  return config;
}

// Writes dir/name and lists it among the files written.
void text_file(WrittenModel& result, const std::filesystem::path& dir, const char* name, std::string_view text) {
  detail::write_text(dir / name, text);
  result.files.push_back(dir / name);
}

// config.json, generation_config.json and the tokenizer's files.
void write_json_files(WrittenModel& result, const std::filesystem::path& dir, const model::ModelConfig& config,
                      WeightType dtype, const TokenizerSpec& tokenizer) {
  text_file(result, dir, "config.json", detail::config_json(config, dtype));
  text_file(result, dir, "generation_config.json", detail::generation_config_json(config, tokenizer));
  text_file(result, dir, "tokenizer.json", tokenizer.tokenizer_json);
  text_file(result, dir, "tokenizer_config.json", tokenizer.tokenizer_config_json);
}

// Where the safetensors weights go.
struct SafetensorsLayout {
  std::vector<std::uint32_t> shard_of;                        // each Hugging Face tensor's shard
  std::vector<std::vector<const TensorSpec*>> shard_tensors;  // each shard's tensors, in write order
  std::vector<std::filesystem::path> shard_paths;
};

// Safetensors: which shard each tensor goes to, the headers and the index.
SafetensorsLayout plan_safetensors(WrittenModel& result, const std::filesystem::path& dir,
                                   const std::vector<const TensorSpec*>& hf_tensors, std::uint32_t shards,
                                   const SafetensorsStorage& storage) {
  SafetensorsLayout layout;
  auto& [shard_of, shard_tensors, shard_paths] = layout;
  shard_of = assign_shards(hf_tensors, shards, storage);
  shard_tensors.resize(shards);
  std::map<std::string, std::string> weight_map;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < hf_tensors.size(); ++i) {
    shard_tensors[shard_of[i]].push_back(hf_tensors[i]);
    total += storage.bytes(*hf_tensors[i]);
  }
  for (std::uint32_t s = 0; s < shards; ++s) {
    shard_paths.push_back(dir / (shards == 1 ? std::string("model.safetensors") : shard_file_name(s + 1, shards)));
    for (const auto* t : shard_tensors[s]) {
      const std::string file = shard_paths.back().filename().string();
      std::vector<std::string> names = t->expert_hf_names;
      if (names.empty()) names.push_back(t->hf_name);
      for (const auto& name : names) {
        weight_map[name] = file;
        if (storage.is_fp8(*t)) weight_map[storage.scale_name(name)] = file;
      }
    }
  }
  if (shards > 1) text_file(result, dir, "model.safetensors.index.json", detail::index_json(weight_map, total));
  return layout;
}

// A safetensors shard holding `tensors`, its header written.
std::unique_ptr<OutputFile> open_shard(const std::filesystem::path& path, const std::vector<const TensorSpec*>& tensors,
                                       const SafetensorsStorage& storage) {
  auto shard = std::make_unique<OutputFile>(path);
  const std::string header = detail::safetensors_header(tensors, storage);
  std::array<std::byte, 8> length{};
  format::store_le<std::uint64_t>(length.data(), header.size());
  shard->write(length);
  shard->write(std::as_bytes(std::span(header.data(), header.size())));
  return shard;
}

// The values of one of gpt-oss's fused Hugging Face expert tensors (Init::GptOss*, shape [experts, ...]) from the
// split stacks kept under the same prefix: gate_up_proj [experts, hidden, 2 x inter] with gate's outputs on even
// columns and up's on odd ones, down_proj [experts, inter, hidden], gate_up_proj_bias [experts, 2 x inter].
void fuse_gpt_oss_experts(const TensorSpec& t, const std::map<std::string, std::vector<float>>& kept,
                          std::span<float> values) {
  const std::string base = t.hf_name.substr(0, t.hf_name.rfind('.') + 1);  // "model.layers.L.mlp.experts."
  const auto split = [&](const char* name) -> const std::vector<float>& {
    const auto it = kept.find(base + name);
    if (it == kept.end()) throw std::logic_error("model-writer: " + t.hf_name + " comes before " + base + name);
    return it->second;
  };
  const std::uint64_t experts = t.shape[0];
  if (t.init == Init::GptOssGateUpBias) {
    const auto &gate = split("gate_bias"), &up = split("up_bias");
    const std::uint64_t inter = t.shape[1] / 2;
    for (std::uint64_t e = 0; e < experts; ++e) {
      for (std::uint64_t j = 0; j < inter; ++j) {
        values[(e * inter + j) * 2] = gate[e * inter + j];
        values[(e * inter + j) * 2 + 1] = up[e * inter + j];
      }
    }
    return;
  }
  const std::uint64_t inputs = t.shape[1], outputs = t.shape[2];
  for (std::uint64_t e = 0; e < experts; ++e) {
    for (std::uint64_t i = 0; i < inputs; ++i) {
      float* row = values.data() + (e * inputs + i) * outputs;
      if (t.init == Init::GptOssDown) {  // down [experts, hidden, inter] transposed
        const auto& down = split("down");
        for (std::uint64_t o = 0; o < outputs; ++o) row[o] = down[(e * outputs + o) * inputs + i];
      } else {
        const auto &gate = split("gate"), &up = split("up");
        for (std::uint64_t j = 0; j < outputs / 2; ++j) {
          row[2 * j] = gate[(e * outputs / 2 + j) * inputs + i];
          row[2 * j + 1] = up[(e * outputs / 2 + j) * inputs + i];
        }
      }
    }
  }
}

// OpenAI's MXFP4 form of one of gpt-oss's fused expert matrices (Init::GptOssBlocks or GptOssScales of
// `<prefix>gate_up_proj` or `<prefix>down_proj`) from the split stacks kept (already MXFP4 values): each output row
// quantized to ggml's blocks ({e, qs[16]}, element j in qs[j]'s low nibble, j + 16 in its high one), then laid out
// as OpenAI's (codes two a byte, the even element low; the exponents apart).
std::vector<std::byte> gpt_oss_mxfp4_bytes(const TensorSpec& t, const std::map<std::string, std::vector<float>>& kept) {
  const std::string base = t.hf_name.substr(0, t.hf_name.rfind('.') + 1);
  const bool gate_up = t.hf_name.find("gate_up_proj") != std::string::npos;
  const auto split = [&](const char* name) -> const std::vector<float>& {
    const auto it = kept.find(base + name);
    if (it == kept.end()) throw std::logic_error("model-writer: " + t.hf_name + " comes before " + base + name);
    return it->second;
  };
  const std::uint64_t experts = t.shape[0], rows = t.shape[1], cols = t.shape[2] * 32;
  const std::size_t ggml_row = *quant::row_bytes(WeightType::MXFP4, cols);
  std::vector<std::byte> out, ggml(ggml_row);
  for (std::uint64_t e = 0; e < experts; ++e) {
    for (std::uint64_t r = 0; r < rows; ++r) {
      // gate_up's rows interleave gate's (even) and up's (odd) outputs.
      const std::vector<float>& from = gate_up ? split(r % 2 == 0 ? "gate" : "up") : split("down");
      const std::uint64_t row = gate_up ? e * rows / 2 + r / 2 : e * rows + r;
      quant::quantize_row(WeightType::MXFP4, std::span(from).subspan(row * cols, cols), ggml);
      for (std::uint64_t b = 0; b < cols / 32; ++b) {
        const std::byte* block = ggml.data() + b * 17;
        if (t.init == Init::GptOssScales) {
          out.push_back(block[0]);
          continue;
        }
        const auto code = [&](unsigned i) {
          return (std::to_integer<unsigned>(block[1 + i % 16]) >> (i < 16 ? 0 : 4)) & 15u;
        };
        for (unsigned k = 0; k < 16; ++k) out.push_back(static_cast<std::byte>(code(2 * k) | code(2 * k + 1) << 4));
      }
    }
  }
  return out;
}

// The tensors, a slice of rows at a time, into the current shard and every GGUF file.
void write_tensors(WrittenModel& result, const std::vector<TensorSpec>& tensors, const ModelWriterOptions& options,
                   const detail::ScriptPlan& script, const SafetensorsStorage& storage,
                   const SafetensorsLayout& safetensors, std::vector<GgufOutput>& ggufs) {
  const WeightType dtype = storage.dtype;
  const auto& [shard_of, shard_tensors, shard_paths] = safetensors;
  std::unique_ptr<OutputFile> shard;
  std::uint32_t shard_index = 0;
  std::size_t hf_index = 0;
  std::vector<float> values, permuted;
  std::vector<std::byte> stored, encoded, scales;
  std::vector<std::size_t> gguf_next(ggufs.size(), 0);
  std::map<std::string, std::vector<float>> kept;  // gpt-oss's split experts, by stream name, for the fused ones
  for (const auto& t : tensors) {
    const bool in_safetensors = options.safetensors && !t.hf_name.empty() && !t.gguf_only;
    if (in_safetensors) {
      const auto s = shard_of[hf_index++];
      if (!shard || s != shard_index) {
        if (shard) shard->close();
        shard_index = s;
        shard = open_shard(shard_paths[s], shard_tensors[s], storage);
        result.files.push_back(shard_paths[s]);
      }
    }
    if (t.u8) {  // gpt-oss's MXFP4 experts: bytes made whole, in safetensors only
      if (in_safetensors) shard->write(gpt_oss_mxfp4_bytes(t, kept));
      continue;
    }
    const std::uint64_t cols = t.cols(), rows = t.rows();
    const bool fp8 = storage.is_fp8(t);
    // Permuted tensors are reordered whole (Q and K are small), FP8 ones a matrix (an expert's) at a time, for its
    // scales; the rest go in slices of about 1M values.
    const bool fused = t.init == Init::GptOssGateUp || t.init == Init::GptOssDown || t.init == Init::GptOssGateUpBias;
    const std::uint64_t slice_rows = t.permute_heads > 0 || fused ? rows
                                     : fp8
                                         ? t.shape[t.shape.size() - 2]
                                         : std::max<std::uint64_t>(1, std::min<std::uint64_t>(rows, (1u << 20) / cols));
    NormalStream stream(options.seed, t.hf_name.empty() ? t.gguf_name : t.hf_name);
    for (std::uint64_t row = 0; row < rows; row += slice_rows) {
      const std::uint64_t n_rows = std::min(slice_rows, rows - row);
      const std::size_t n = n_rows * cols;
      values.resize(n);
      if (t.init == Init::Fixed) {
        std::copy(t.values.begin(), t.values.end(), values.begin());
      } else if (t.init == Init::Zero || t.init == Init::ScriptEmbedding || t.init == Init::ScriptHead) {
        detail::fill_script_rows(t.init, script, row, n_rows, cols, values);
      } else if (fused) {
        fuse_gpt_oss_experts(t, kept, values);
      } else {
        stream.fill(values, t.mean, t.stddev);
      }
      // Checkpoint tensors are rounded to the storage type first (GGUF files are converted from what the
      // checkpoint holds); GGUF-only ones (rope_freqs) keep float32.
      if (fp8) {
        stored.resize(n);
        scales.resize(storage.scale_bytes(n_rows, cols));
        store_fp8(storage, values, n_rows, cols, stored, scales);
      } else if (t.mxfp4_values) {
        stored.resize(*quant::row_bytes(WeightType::MXFP4, cols) * n_rows);
        store_as(WeightType::MXFP4, values, stored);
      } else if (!t.hf_name.empty()) {
        stored.resize(n * quant::block_bytes(dtype));
        store_as(dtype, values, stored);
      }
      if (in_safetensors) {
        shard->write(stored);
        if (fp8) shard->write(scales);
      }
      if (t.gguf_only) {
        auto& whole = kept[t.hf_name];
        whole.insert(whole.end(), values.begin(), values.end());
      }
      for (std::size_t g = 0; g < ggufs.size(); ++g) {
        auto& out = ggufs[g];
        if (gguf_next[g] >= out.tensors.size() || out.tensors[gguf_next[g]].spec != &t) continue;
        const auto& plan = out.tensors[gguf_next[g]];
        std::span<const float> source = values;
        if (t.gguf_plus != 0.0f) {
          permuted.resize(n);
          std::transform(values.begin(), values.end(), permuted.begin(), [&](float v) { return v + t.gguf_plus; });
          source = permuted;
        }
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
}

}  // namespace

// ---- public -------------------------------------------------------------------------------------------

std::string shard_file_name(std::uint32_t index, std::uint32_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05u-of-%05u.safetensors", index, count);
  return name;
}

std::string gguf_type_name(GgufFileType file) {
  return std::string(quant::weight_type_name(file.type)) + (file.medium_mix ? "_M" : "");
}

std::optional<GgufFileType> gguf_type_from_name(std::string_view name) {
  if (name == "Q4_K_M") return GgufFileType(WeightType::Q4_K, true);
  if (name == "Q5_K_M") return GgufFileType(WeightType::Q5_K, true);
  const auto type = quant::weight_type_from_name(name);
  if (!type || !quant::ggml_type_id(*type) || !quant::has_quantizer(*type)) return std::nullopt;
  return GgufFileType(*type);
}

std::string gguf_type_names() {
  std::string names;
  for (std::size_t i = 0; i < quant::kWeightTypeCount; ++i) {
    const auto type = static_cast<WeightType>(i);
    if (quant::ggml_type_id(type) && quant::has_quantizer(type))
      names += std::string(quant::weight_type_name(type)) + ", ";
  }
  return names + "Q4_K_M, Q5_K_M";
}

std::string gguf_file_name(GgufFileType file) {
  return "model-" + gguf_type_name(file) + ".gguf";
}

model::RopeScaling preset_rope_scaling(model::RopeType type, const model::ModelConfig& config) {
  model::RopeScaling r;
  r.type = type;
  if (type == model::RopeType::Llama3) {
    r.factor = 8.0;
    r.original_max_position_embeddings = 8192;
    r.low_freq_factor = 1.0;
    r.high_freq_factor = 4.0;
  } else if (type == model::RopeType::LongRope) {
    // Phi-3's form: trained at a sixteenth of max_position_embeddings; one divisor per rotary frequency for
    // each side of it, the short ones from 1 to 2, the long ones from 1 to 16 (low frequencies stretched most).
    r.original_max_position_embeddings = config.max_position_embeddings / 16;
    r.factor = 16.0;
    const std::uint64_t n = model::rotary_dims(config) / 2;
    for (std::uint64_t i = 0; i < n; ++i) {
      const double t = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
      r.short_factor.push_back(1.0 + t);
      r.long_factor.push_back(1.0 + 15.0 * t * t);
    }
    r.attention_factor = model::longrope_attention_factor(r.factor, r.original_max_position_embeddings);
  } else {
    r.factor = 4.0;
    r.original_max_position_embeddings = config.max_position_embeddings;
  }
  return r;
}

model::ModelConfig preset_config(Architecture arch, ModelPreset preset, std::uint64_t tokenizer_size) {
  model::ModelConfig c;
  c.architecture = arch;
  c.qk_norm = arch == Architecture::Qwen3 || arch == Architecture::Qwen3Moe;
  c.attention_bias = arch == Architecture::Qwen2 || arch == Architecture::Qwen2Moe;
  if (preset == ModelPreset::Qwen3_30B_A3B) {
    // Qwen3-30B-A3B's config.json: 128 experts of 768, 8 per token, renormalized, on every one of 48 layers.
    c.vocab_size = 151936;
    c.hidden_size = 2048;
    c.intermediate_size = 6144;
    c.num_layers = 48;
    c.num_heads = 32;
    c.num_kv_heads = 4;
    c.head_dim = 128;
    c.max_position_embeddings = 40960;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1e6;
    c.tie_word_embeddings = false;
    c.moe = model::MoeConfig{.num_experts = 128,
                             .experts_per_token = 8,
                             .expert_intermediate_size = 768,
                             .norm_topk_prob = true,
                             .shared_expert_intermediate_size = 0,
                             .layers = {}};
    return c;
  }
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
  c.num_layers = arch == Architecture::Llama                                     ? 3
                 : arch == Architecture::Gemma3                                  ? 6
                 : arch == Architecture::Gemma2 || arch == Architecture::SmolLM3 ? 4
                                                                                 : 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  // Qwen3's head_dim is not hidden / heads
  c.head_dim = arch == Architecture::Qwen3 || arch == Architecture::Qwen3Moe ? 128 : 64;
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = arch == Architecture::Llama ? 1e-5 : 1e-6;
  c.rope_theta = arch == Architecture::Llama ? 5e5 : 1e6;
  // Qwen3 tiny has its own lm_head and Qwen2 tiny ties it, so both paths get exercised.
  c.tie_word_embeddings = arch == Architecture::Qwen2 || model::is_gemma(arch) || arch == Architecture::SmolLM3;
  // Mistral: Mistral-Nemo's head_dim apart from hidden_size / heads, Mistral 7B's RoPE base and epsilon, no window
  // (v0.2 on; engine_reference_test sets one).
  if (arch == Architecture::Mistral) {
    c.head_dim = 128;    // 4 heads of 128 across a hidden size of 256 (whole K-quant blocks)
    c.rope_theta = 1e4;  // Mistral 7B v0.1's
    c.rms_norm_eps = 1e-5;
  }
  // Phi-3: Phi-4-mini's partial rotary (three quarters of each head) and Phi-3's LongRoPE, whose long factors
  // the tests' max_model_len (past the original 128 positions) selects.
  if (arch == Architecture::Phi3) {
    c.rotary_dim = c.head_dim * 3 / 4;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.rope_scaling = preset_rope_scaling(model::RopeType::LongRope, c);
  }
  // SmolLM3: the fourth layer without RoPE, as llama.cpp fixes it for GGUF files.
  if (arch == Architecture::SmolLM3) {
    for (std::uint64_t i = 0; i < c.num_layers; ++i) c.rope_layers.push_back((i + 1) % 4 != 0);
  }
  if (arch == Architecture::Llama) c.rope_scaling = preset_rope_scaling(model::RopeType::Llama3, c);
  // The mixtures: 8 experts of 256 (whole K-quant blocks for the down projections' rows), 2 chosen per token,
  // Qwen3-MoE's weights renormalized as its checkpoints set it, Qwen2-MoE's not, beside its shared expert of
  // 512; Mixtral's experts are intermediate_size wide and always renormalized.
  if (model::is_moe(arch)) {
    model::MoeConfig moe;
    moe.num_experts = 8;
    moe.experts_per_token = 2;
    moe.expert_intermediate_size = 256;
    moe.norm_topk_prob = arch != Architecture::Qwen2Moe;
    if (arch == Architecture::Qwen2Moe) moe.shared_expert_intermediate_size = 512;
    if (arch == Architecture::Mixtral) {
      c.intermediate_size = moe.expert_intermediate_size;
      c.rope_theta = 1e6;
      c.rms_norm_eps = 1e-5;
    }
    c.moe = moe;
  }
  // gpt-oss's data on that shape: experts intermediate_size wide with biases and the SwiGLU clamped at 7 (low enough
  // that random weights reach it), biases on every attention projection, sinks, the first of the two layers over a
  // window of 16 positions that the tests' sequences outgrow, its RoPE base and YaRN without truncation (factor 4).
  if (arch == Architecture::GptOss) {
    c.intermediate_size = c.moe->expert_intermediate_size;
    c.moe->biases = true;
    c.moe->swiglu_limit = 7.0;
    c.attention_bias = c.output_bias = c.attention_sinks = true;
    c.rope_theta = 150000.0;
    c.rms_norm_eps = 1e-5;
    c.sliding_window = 16;
    for (std::uint64_t i = 0; i < c.num_layers; ++i) c.sliding_layers.push_back(i % 2 == 0);
    c.rope_scaling = preset_rope_scaling(model::RopeType::Yarn, c);
    c.rope_scaling->truncate = false;
  }
  if (model::is_gemma(arch)) {
    // Gemma's data on that shape. Gemma 3: six layers so that the sixth is global (llama.cpp's fixed
    // pattern), the others over a window of 16 positions that the tests' sequences outgrow with their own
    // RoPE base, linear scaling 8 on the global layer as the 4B+ models have it. Gemma 2: every other layer
    // global, caps low enough that the tiny model's scores and logits reach them.
    const bool gemma3 = arch == Architecture::Gemma3;
    c.qk_norm = gemma3;
    c.activation = model::Activation::GeluTanh;
    c.post_norms = true;
    c.norm_weight_plus_one = true;
    c.query_pre_attn_scalar = 64.0;  // = head_dim, as llama.cpp assumes for GGUF files (but Gemma 3 27B's)
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.sliding_window = 16;
    const std::uint64_t pattern = gemma3 ? 6 : 2;
    for (std::uint64_t i = 0; i < c.num_layers; ++i) c.sliding_layers.push_back((i + 1) % pattern != 0);
    if (gemma3) {
      c.sliding_rope_theta = 10000.0;
      c.rope_scaling = preset_rope_scaling(model::RopeType::Linear, c);
      c.rope_scaling->factor = 8.0;
    } else {
      c.rope_theta = 10000.0;
      c.attn_logit_softcapping = 4.0;
      c.final_logit_softcapping = 30.0;  // Gemma 2's own
    }
  }
  return c;
}

WrittenModel write_model(const ModelWriterOptions& options) {
  const WeightType dtype = checked_dtype(options);

  const TokenizerSpec tokenizer = options.tokenizer_dir ? tokenizer_from_directory(*options.tokenizer_dir)
                                                        : generated_tokenizer(options.arch, options.script);
  const model::ModelConfig config = model_config(options, tokenizer);
  const detail::ScriptPlan script = detail::plan_script(options, tokenizer, config);

  const std::vector<TensorSpec> tensors = model_tensors(config, options.preset, !script.pieces.empty());
  std::vector<const TensorSpec*> hf_tensors;
  for (const auto& t : tensors) {
    if (!t.hf_name.empty() && !t.gguf_only) hf_tensors.push_back(&t);
  }
  if (options.safetensors && options.shards > hf_tensors.size()) {
    throw UsageError("--shards " + std::to_string(options.shards) + ": the model has only " +
                     std::to_string(hf_tensors.size()) + " tensors");
  }

  if (options.split_max_tensors != 0 && options.gguf_types.empty()) {
    throw UsageError("--split-max-tensors " + std::to_string(options.split_max_tensors) +
                     ": no GGUF file to split (add --gguf TYPE)");
  }

  const auto& dir = options.out_dir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error("cannot create " + dir.string() + ": " + error.message());

  WrittenModel result;
  result.config = config;
  for (const auto* t : hf_tensors) result.parameters += t->elements();
  write_json_files(result, dir, config, dtype, tokenizer);
  if (options.pooling) {
    text_file(result, dir, "modules.json", detail::sentence_transformers_modules_json());
    std::filesystem::create_directories(dir / "1_Pooling", error);
    if (error) throw std::runtime_error("cannot create " + (dir / "1_Pooling").string() + ": " + error.message());
    text_file(result, dir, "1_Pooling/config.json", detail::pooling_config_json(*options.pooling, config.hidden_size));
  }
  const SafetensorsStorage storage{dtype, config.fp8};
  const SafetensorsLayout safetensors =
      options.safetensors ? plan_safetensors(result, dir, hf_tensors, options.shards, storage) : SafetensorsLayout{};

  // GGUF: the header of each file, with every tensor's type and offset decided now.
  std::vector<GgufOutput> ggufs;
  for (const auto file : options.gguf_types) {
    ggufs.push_back(detail::open_gguf(file, dir / gguf_file_name(file), config, tokenizer, tensors, options.pooling));
  }

  write_tensors(result, tensors, options, script, storage, safetensors, ggufs);
  for (auto& out : ggufs) {
    out.file->close();
    if (options.split_max_tensors == 0) {
      result.files.push_back(out.path);
      continue;
    }
    // The parts replace the whole file, as a hub repository holds them.
    auto prefix = out.path;
    prefix.replace_extension();
    const auto parts = format::write_gguf_split(format::GgufFile::open(out.path), prefix, options.split_max_tensors);
    std::filesystem::remove(out.path);
    result.files.insert(result.files.end(), parts.begin(), parts.end());
  }
  return result;
}

}  // namespace engine::tools
