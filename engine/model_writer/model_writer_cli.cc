// model-writer's command line: the flags, --help and the checks of what is required.

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "base/flags.h"
#include "engine/model_writer/model_writer.h"
#include "engine/model_writer/model_writer_internal.h"

namespace engine::tools {

namespace {

using quant::WeightType;

using detail::kArchs;

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
      "--preset tiny is hidden 256, 2 layers (3 for llama, 4 for gemma2, 6 for gemma3), with a generated\n"
      "byte-level BPE tokenizer;\n"
      "--preset qwen3-0.6b is Qwen3-0.6B's exact shape (--arch qwen3; bf16 by default).");
  std::string arch_names;
  for (const auto& a : kArchs) arch_names += (arch_names.empty() ? "" : "|") + std::string(a.flag);
  flags.add_value("arch", arch_names, "Architecture (required)", [&options, &seen](std::string_view v) {
    const auto it = std::find_if(kArchs.begin(), kArchs.end(), [&](const auto& a) { return a.flag == v; });
    if (it == kArchs.end())
      throw bad_value("arch", v, "unknown architecture (expected " + detail::arch_flag_list() + ")");
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
      "gguf", "TYPE[,TYPE...]", "Also write model-TYPE.gguf; TYPE: " + quant::weight_type_names(),
      [&options](std::string_view v) {
        std::size_t start = 0;
        while (start <= v.size()) {
          const auto comma = std::min(v.find(',', start), v.size());
          const auto name = v.substr(start, comma - start);
          const auto type = quant::weight_type_from_name(name);
          if (!type) {
            throw bad_value(
                "gguf", v,
                "unknown GGUF type \"" + std::string(name) + "\" (expected one of " + quant::weight_type_names() + ")");
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
  flags.add_value(
      "rope-scaling", "none|linear|dynamic|yarn|llama3",
      "RoPE scaling, factor 4 (llama3: Llama 3.1's; default llama3 for llama, none otherwise)",
      [&options](std::string_view v) {
        if (v == "none") {
          options.rope_scaling = std::optional<model::RopeType>();
          return;
        }
        for (const auto type :
             {model::RopeType::Linear, model::RopeType::Dynamic, model::RopeType::Yarn, model::RopeType::Llama3}) {
          if (model::rope_type_name(type) == v) {
            options.rope_scaling = std::optional<model::RopeType>(type);
            return;
          }
        }
        throw bad_value("rope-scaling", v, "unknown scaling (expected none, linear, dynamic, yarn or llama3)");
      });
  flags.add_switch("no-safetensors", "Write no .safetensors files (nor index), only the GGUF ones",
                   &seen.no_safetensors);
  return flags;
}

}  // namespace

// ---- public -------------------------------------------------------------------------------------------

std::string model_writer_usage() {
  ModelWriterOptions options;
  FlagsSeen seen;
  return model_writer_flags(options, seen).help();
}

std::optional<ModelWriterOptions> parse_model_writer_command_line(std::span<const std::string> args) {
  ModelWriterOptions options;
  FlagsSeen seen;
  if (!model_writer_flags(options, seen).parse(args)) return std::nullopt;
  if (!seen.arch) throw UsageError("--arch is required (" + detail::arch_flag_list() + ")");
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

}  // namespace engine::tools
