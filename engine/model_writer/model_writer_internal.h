#pragma once

// What model-writer's files share: the architectures' names, the tensor list's entries, the output file,
// the JSON files (model_writer_json.cc) and the GGUF files (model_writer_gguf.cc). Internal to
// engine_model_writer; the tool's interface is engine/model_writer/model_writer.h.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/pooling.h"
#include "engine/model_writer/model_writer.h"
#include "engine/model_writer/model_writer_tokenizer.h"
#include "engine/quant/quant.h"

namespace engine::tools::detail {

using model::Architecture;
using quant::WeightType;

inline constexpr std::uint64_t kGgufAlignment = 32;

// ---- names ----------------------------------------------------------------------------------------------

struct ArchNames {
  Architecture arch;
  std::string_view flag;  // --arch value, model_type and general.architecture
};
inline constexpr std::array kArchs = {
    ArchNames{Architecture::Qwen3, "qwen3"},       ArchNames{Architecture::Qwen2, "qwen2"},
    ArchNames{Architecture::Llama, "llama"},       ArchNames{Architecture::Gemma3, "gemma3"},
    ArchNames{Architecture::Gemma2, "gemma2"},     ArchNames{Architecture::SmolLM3, "smollm3"},
    ArchNames{Architecture::Phi3, "phi3"},         ArchNames{Architecture::Mistral, "mistral"},
    ArchNames{Architecture::Qwen3Moe, "qwen3moe"}, ArchNames{Architecture::Qwen2Moe, "qwen2moe"},
    ArchNames{Architecture::Mixtral, "mixtral"},   ArchNames{Architecture::GptOss, "gpt-oss"}};

// "qwen3, qwen2, llama or gemma3": the --arch values, for help and refusals.
std::string arch_flag_list();

// The --arch value of `arch` ("?" for none), which is also config.json's model_type.
std::string_view arch_flag(Architecture arch);
// general.architecture of its GGUF files: the --arch value, but llama for Mistral and Mixtral (as llama.cpp's
// converter writes their checkpoints).
std::string_view gguf_arch_name(Architecture arch);
// F32, F16 or BF16.
bool is_float_type(WeightType type);
// `n` rounded up to a multiple of `multiple`.
std::uint64_t round_up(std::uint64_t n, std::uint64_t multiple);

// ---- the tensors ----------------------------------------------------------------------------------------

// How a tensor's values are made: random (Normal, NormWeight), given (Fixed: GGUF's rope tables, Llama 3's
// divisors and Phi-3's LongRoPE factors), or a scripted model's exact rows (model_writer_script.cc).
// gpt-oss's Hugging Face experts are the GGUF-only stacks (GptOssSplit, rounded as the checkpoint stores them) put
// together: GptOssGateUp interleaves gate's and up's outputs in x · W orientation, GptOssDown transposes down,
// GptOssGateUpBias interleaves the two biases (model_writer.cc).
enum class Init {
  Normal,
  NormWeight,
  Fixed,
  Zero,
  ScriptEmbedding,
  ScriptHead,
  GptOssGateUp,
  GptOssDown,
  GptOssGateUpBias,
  // OpenAI's MXFP4 form of GptOssGateUp (rows: gate's and up's outputs interleaved) and of down: `_blocks` [experts,
  // rows, cols / 32, 16] of E2M1 codes (the even element in the low nibble), `_scales` [experts, rows, cols / 32]
  // of E8M0 exponents, U8 both.
  GptOssBlocks,
  GptOssScales
};

struct TensorSpec {
  std::string hf_name;               // empty for GGUF-only tensors
  std::string gguf_name;             // empty for tensors GGUF leaves out
  std::vector<std::uint64_t> shape;  // Hugging Face order: rows, then columns
  Init init = Init::Normal;
  float mean = 0.0f;
  float stddev = 0.0f;
  std::uint64_t permute_heads = 0;  // GGUF llama Q/K: rows reordered within each of these heads
  // Added to the values written into GGUF: Gemma's norms, stored as w in safetensors for a norm that
  // multiplies by 1 + w, are w + 1 in llama.cpp's files.
  float gguf_plus = 0.0f;
  std::vector<float> values;  // Init::Fixed: every value
  // A mixture's experts' matrices stacked, shape {experts, rows, cols}: safetensors holds each expert's as a
  // tensor of its own under these names (in order, one after the other), GGUF the stack under gguf_name. hf_name
  // then only names the values' random stream.
  std::vector<std::string> expert_hf_names;
  // Written to GGUF as a vector of all its values (Qwen2-MoE's shared expert gate, [1, hidden] in safetensors).
  bool gguf_vector = false;
  // Kept in F32 in GGUF though it has rows (gpt-oss's experts' stacked biases).
  bool gguf_float = false;
  // A GGUF-only tensor whose values the checkpoint stores in another form (gpt-oss's split experts): rounded to the
  // checkpoint's dtype like a checkpoint tensor and kept for the fused tensors made from it (its values' stream is
  // named by hf_name, which is not written).
  bool gguf_only = false;
  // Rounded to MXFP4 rather than the checkpoint's dtype (gpt-oss's split experts beside an MXFP4 checkpoint).
  bool mxfp4_values = false;
  // Stored in safetensors as U8 bytes rather than the checkpoint's dtype (Init::GptOssBlocks, GptOssScales).
  bool u8 = false;

  std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
  std::uint64_t cols() const { return shape.back(); }
  std::uint64_t rows() const { return elements() / cols(); }
  bool is_matrix() const { return shape.size() >= 2; }
};

// ---- FP8 checkpoints ------------------------------------------------------------------------------------

// How the safetensors files store the tensors: each in `dtype`, but where `fp8` is set the linear layers'
// matrices (each expert's too; not the embedding, the output matrix or a router, as FP8 checkpoints leave them) as
// F8_E4M3, each followed by its scales' tensor.
struct SafetensorsStorage {
  WeightType dtype = WeightType::F32;
  std::optional<model::Fp8Scheme> fp8;

  bool is_fp8(const TensorSpec& t) const;
  // The name, shape and type of the scales of one FP8 matrix `weight_name` of rows x cols.
  std::string scale_name(const std::string& weight_name) const;
  std::vector<std::uint64_t> scale_shape(std::uint64_t rows, std::uint64_t cols) const;
  WeightType scale_type() const;  // BF16 per channel (as compressed-tensors writes them from a bf16 model), else F32
  std::uint64_t scale_bytes(std::uint64_t rows, std::uint64_t cols) const;
  // The bytes of t (and of its scales) in the files.
  std::uint64_t bytes(const TensorSpec& t) const;
};

// ---- scripted models (model_writer_script.cc) ------------------------------------------------------------

struct ScriptPlan {
  std::vector<std::int32_t> pieces;  // the reply's token ids, in order; empty: not a scripted model
  std::int32_t end_id = 0;           // the end of turn after the last piece
};

// The pieces' ids in `tokenizer` (generated with options.script as its last added tokens). Throws UsageError
// for a script the model cannot follow (an empty or repeated piece, one that is already a token, a tied
// lm_head, more pieces than hidden dimensions).
ScriptPlan plan_script(const ModelWriterOptions& options, const TokenizerSpec& tokenizer,
                       const model::ModelConfig& config);
// Rows [first_row, first_row + rows) of a Zero, ScriptEmbedding or ScriptHead tensor into `values`.
void fill_script_rows(Init init, const ScriptPlan& plan, std::uint64_t first_row, std::uint64_t rows,
                      std::uint64_t cols, std::span<float> values);

// ---- output files ---------------------------------------------------------------------------------------

// A file written front to back in 2 MiB writes at 2 MiB offsets (the last one shorter); errors are reported
// with the path. Why: Linux's page cache sizes a buffered write's folios by the write's length and alignment, and
// the large unaligned writes stdio made (a 4 MiB buffer, bigger pieces written past it) left the file in mixed
// folios that the engine then streamed BF16 weights from at half the speed: Qwen3-0.6B's batch-1 decode read
// 16.9-25.0 GB/s from such a file, 34.2-34.4 from the same bytes written in aligned 2 MiB runs, in alternating
// rounds on the AMD Zen 5 VM (docs/cpu-kernels.md). The benchmarks read what model-writer writes.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  void write(std::span<const std::byte> bytes);
  void pad_to(std::uint64_t alignment);
  std::uint64_t written() const { return written_; }
  // Writes what is buffered and closes the file.
  void close();

 private:
  static constexpr std::size_t kRunBytes = std::size_t{2} << 20;
  void flush();
  [[noreturn]] void fail(const char* what) const;

  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::byte> buffer_;  // the bytes after the last whole run written
  std::uint64_t written_ = 0;
};

// Writes `text` into a new file at `path`.
void write_text(const std::filesystem::path& path, std::string_view text);

// ---- JSON (model_writer_json.cc) ------------------------------------------------------------------------

// config.json of the model (with c.fp8's quantization_config).
std::string config_json(const model::ModelConfig& c, WeightType dtype);
// generation_config.json of the model.
std::string generation_config_json(const model::ModelConfig& c, const TokenizerSpec& tokenizer);
// model.safetensors.index.json: each tensor's shard file, and the bytes of all tensors.
std::string index_json(const std::map<std::string, std::string>& weight_map, std::uint64_t total_size);
// The safetensors header of one shard holding `tensors` stored as `storage` says (an FP8 matrix's scales right
// after it).
std::string safetensors_header(const std::vector<const TensorSpec*>& tensors, const SafetensorsStorage& storage);
// An embedding model's sentence-transformers files: modules.json (the Transformer, a Pooling module in
// 1_Pooling and a Normalize module, as Qwen3-Embedding's) and 1_Pooling/config.json, pooling by `pooling`.
std::string sentence_transformers_modules_json();
std::string pooling_config_json(model::PoolingType pooling, std::uint64_t hidden_size);

// ---- GGUF (model_writer_gguf.cc) ------------------------------------------------------------------------

struct GgufTensorPlan {
  const TensorSpec* spec;
  WeightType type;
  std::uint64_t offset;
  std::uint64_t bytes;
};

// One GGUF output: its tensors' types and offsets are fixed before any data is written.
struct GgufOutput {
  GgufFileType type;
  std::filesystem::path path;
  std::vector<GgufTensorPlan> tensors;  // in write order
  std::unique_ptr<OutputFile> file;
  std::uint64_t data_start = 0;
};

// Creates the GGUF file of `type` at `path` and writes its header (metadata and tensor infos), with every
// tensor's type and offset decided; the tensor data is written after it. Throws UsageError for a tensor
// whose rows are not whole blocks of its type.
// `pooling`: an embedding model's, written as {arch}.pooling_type.
GgufOutput open_gguf(GgufFileType type, std::filesystem::path path, const model::ModelConfig& config,
                     const TokenizerSpec& tokenizer, const std::vector<TensorSpec>& tensors,
                     std::optional<model::PoolingType> pooling);

}  // namespace engine::tools::detail
