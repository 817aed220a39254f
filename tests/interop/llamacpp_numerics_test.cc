// llama.cpp (node-llama-cpp's CPU backend, tests/interop/llamacpp_logprobs.mjs) beside the engine on
// model-writer's tiny GGUF files of each architecture, one file of every type the project writes:
// - llama.cpp loads every file;
// - teacher-forced on llama.cpp's own greedy path (a 7-token prompt and 24 greedy tokens), the engine's
//   log-probabilities at its int8 level and at its best float level are at least as close to the float64
//   reference (tests/reference/reference_model.py) as llama.cpp's, per file (issue 18's bar).
// Needs llama.cpp installed (scripts/install-llamacpp-peer.sh); CTest label `llamacpp`, which
// scripts/test.sh leaves out (docs/building.md).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/format/gguf.h"
#include "engine/model_writer/model_writer.h"
#include "engine/quant/ggml_blocks.h"
#include "engine/quant/quant.h"
#include "tests/support/child_process.h"
#include "tests/support/gguf_rewrite.h"
#include "tests/support/log_softmax.h"
#include "tests/support/reference_model.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using engine::model::Architecture;
using engine::quant::WeightType;
using testing_support::ChildProcess;
using testing_support::TempDir;

// A prompt of ids below every generated tokenizer's size (engine_reference_test's second sequence).
const std::vector<std::int32_t> kPrompt = {500, 2, 77, 12, 345, 6, 91};
constexpr int kGreedySteps = 24;
// The context llamacpp_logprobs.mjs gives llama.cpp for so short a path; the engine is loaded for as many
// positions, so that both pick the same LongRoPE factors (the long ones past Phi-3's original context).
constexpr std::size_t kLlamaCppContext = 256;

const std::vector<engine::tools::GgufFileType> kGgufTypes = {
    WeightType::F32,     WeightType::F16,   WeightType::BF16,    WeightType::Q8_0,        WeightType::Q4_0,
    WeightType::Q4_1,    WeightType::Q5_0,  WeightType::Q5_1,    WeightType::Q3_K,        WeightType::Q4_K,
    WeightType::Q5_K,    WeightType::Q6_K,  WeightType::IQ4_NL,  WeightType::IQ4_XS,      WeightType::Q2_K,
    WeightType::IQ3_XXS, WeightType::IQ3_S, WeightType::IQ2_XXS, WeightType::IQ2_XS,      WeightType::IQ2_S,
    WeightType::IQ1_S,   WeightType::IQ1_M, WeightType::MXFP4,   {WeightType::Q4_K, true}};

// Below this, a distance from the reference is the f32 rounding of an unquantized path (the reference
// tests hold float-activation logits to 1e-4 of their scale), not a difference between implementations.
constexpr double kRoundingFloor = 1e-3;

using LogprobRows = std::vector<std::vector<double>>;  // one log-softmax row per position

// llama.cpp's run on one file: its greedy path and every position's log-probabilities.
struct LlamaCppRun {
  std::vector<std::int32_t> path;
  LogprobRows logprobs;
};

std::string join_ids(const std::vector<std::int32_t>& ids) {
  std::string text;
  for (const auto id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

// One node process running `script` (a tests/interop/llamacpp_*.mjs) with `args`: the "models" array of the
// JSON it prints, or null after failing the test (llama.cpp refused a file, the script failed).
const rapidjson::Value* run_node(rapidjson::Document& json, const char* script, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {NODE_EXECUTABLE, script};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess node(argv);
  const int status = node.wait(std::chrono::minutes(5));
  EXPECT_EQ(status, 0) << "llama.cpp (node-llama-cpp, " << script << ") failed:\n" << node.err();
  if (status != 0) return nullptr;
  const std::string out = node.out();
  json.Parse(out.c_str());
  if (json.HasParseError() || !json.IsObject() || !json.HasMember("models") || !json["models"].IsArray()) {
    ADD_FAILURE() << script << " printed no JSON: " << out.substr(0, 500);
    return nullptr;
  }
  return &json["models"];
}

std::vector<std::string> model_flags(const std::vector<fs::path>& files) {
  std::vector<std::string> args;
  for (const auto& file : files) args.insert(args.end(), {"--model", file.string()});
  return args;
}

// One node process for all the files (llama.cpp starts once); fails the test when llama.cpp refuses a file.
std::map<fs::path, LlamaCppRun> run_llama_cpp(const std::vector<fs::path>& files) {
  auto args = model_flags(files);
  // One thread: the log-probabilities do not depend on it, and ggml's thread barriers crawl on a busy machine.
  args.insert(args.end(), {"--tokens", join_ids(kPrompt), "--greedy", std::to_string(kGreedySteps), "--full", "1",
                           "--threads", "1"});
  rapidjson::Document json;
  std::map<fs::path, LlamaCppRun> runs;
  const auto* models = run_node(json, LLAMACPP_LOGPROBS_SCRIPT, args);
  if (models == nullptr) return runs;
  for (const auto& model : models->GetArray()) {
    LlamaCppRun run;
    for (const auto& id : model["tokens"].GetArray()) run.path.push_back(id.GetInt());
    for (const auto& position : model["positions"].GetArray()) {
      auto& row = run.logprobs.emplace_back();
      for (const auto& v : position["logprobs"].GetArray()) row.push_back(v.GetDouble());
    }
    runs[fs::path(model["model"].GetString())] = std::move(run);
  }
  return runs;
}

// llama.cpp's normalised embedding of a file and the tokens it evaluated (its BOS and EOS added).
struct LlamaCppEmbedding {
  std::vector<std::int32_t> tokens;
  std::vector<double> embedding;
};

std::map<fs::path, LlamaCppEmbedding> run_llama_cpp_embeddings(const std::vector<fs::path>& files,
                                                               const std::vector<std::int32_t>& tokens) {
  auto args = model_flags(files);
  args.insert(args.end(), {"--tokens", join_ids(tokens), "--threads", "1"});
  rapidjson::Document json;
  std::map<fs::path, LlamaCppEmbedding> runs;
  const auto* models = run_node(json, LLAMACPP_EMBEDDINGS_SCRIPT, args);
  if (models == nullptr) return runs;
  for (const auto& model : models->GetArray()) {
    LlamaCppEmbedding run;
    for (const auto& id : model["tokens"].GetArray()) run.tokens.push_back(id.GetInt());
    for (const auto& v : model["embedding"].GetArray()) run.embedding.push_back(v.GetDouble());
    runs[fs::path(model["model"].GetString())] = std::move(run);
  }
  return runs;
}

// engine-logits' output on `file` for `tokens` at SIMD level `level` (a child process: the level is read once
// per process), with an f32 KV cache: what is compared is the weights' arithmetic (llama.cpp keeps its default
// f16 cache, which only adds to its distance). `extra`: more flags (--embedding). Empty when it fails.
std::vector<float> run_engine_logits(const fs::path& file, const std::vector<std::int32_t>& tokens,
                                     std::string_view level, const fs::path& scratch,
                                     const std::vector<std::string>& extra = {}) {
  const fs::path out = scratch / "logits.f32";
  std::vector<std::string> argv = {ENGINE_LOGITS,
                                   "--model",
                                   file.string(),
                                   "--device",
                                   "cpu",
                                   "--tokens",
                                   join_ids(tokens),
                                   "--out",
                                   out.string(),
                                   "--threads",
                                   "2",
                                   "--kv-cache-mib",
                                   "16",
                                   "--max-model-len",
                                   std::to_string(kLlamaCppContext),
                                   "--kv-cache-dtype",
                                   "float32"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ChildProcess run(argv, {{"ENGINE_SIMD", std::string(level)}});
  const int status = run.wait(std::chrono::minutes(2));
  EXPECT_EQ(status, 0) << "engine-logits at " << level << " on " << file << ":\n" << run.err();
  if (status != 0) return {};
  const auto bytes = testing_support::read_file(out);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// The engine's log-probabilities at every position of `tokens`, at SIMD level `level`.
LogprobRows engine_logprobs(const fs::path& file, const std::vector<std::int32_t>& tokens, std::string_view level,
                            const fs::path& scratch) {
  const auto logits = run_engine_logits(file, tokens, level, scratch);
  LogprobRows rows;
  if (logits.empty()) return rows;
  const std::size_t vocab = logits.size() / tokens.size();
  EXPECT_EQ(logits.size(), tokens.size() * vocab);
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const std::vector<double> row(logits.begin() + static_cast<std::ptrdiff_t>(p * vocab),
                                  logits.begin() + static_cast<std::ptrdiff_t>((p + 1) * vocab));
    rows.push_back(testing_support::log_softmax(row));
  }
  return rows;
}

// The float64 reference's log-probabilities at every position of `path` on `file`.
LogprobRows reference_logprobs(const fs::path& file, const std::vector<std::int32_t>& path) {
  const auto logits = testing_support::reference_logits(file, {path});
  LogprobRows rows;
  for (std::size_t p = 0; p < path.size(); ++p) rows.push_back(testing_support::log_softmax(logits.row(0, p)));
  return rows;
}

// |log p - log p_reference| over the positions that predict the greedy tokens: the largest and the mean of
// the path token each predicts, and the largest and the root mean square over the whole vocabulary. The
// largest is set by one position's unlikely token; the means weigh every position alike.
struct LogprobDistance {
  double path_max = 0;
  double path_mean = 0;
  double any_max = 0;
  double any_rms = 0;
};

LogprobDistance distance(const LogprobRows& got, const LogprobRows& reference, const std::vector<std::int32_t>& path) {
  LogprobDistance d;
  EXPECT_EQ(got.size(), path.size());
  std::size_t positions = 0, entries = 0;
  for (std::size_t p = kPrompt.size() - 1; p + 1 < path.size() && p < got.size(); ++p, ++positions) {
    EXPECT_EQ(got[p].size(), reference[p].size()) << "vocabulary sizes differ at position " << p;
    const auto next = static_cast<std::size_t>(path[p + 1]);
    const double path_delta = std::abs(got[p][next] - reference[p][next]);
    d.path_max = std::max(d.path_max, path_delta);
    d.path_mean += path_delta;
    for (std::size_t i = 0; i < std::min(got[p].size(), reference[p].size()); ++i, ++entries) {
      const double delta = std::abs(got[p][i] - reference[p][i]);
      d.any_max = std::max(d.any_max, delta);
      d.any_rms += delta * delta;
    }
  }
  d.path_mean /= static_cast<double>(std::max<std::size_t>(positions, 1));
  d.any_rms = std::sqrt(d.any_rms / static_cast<double>(std::max<std::size_t>(entries, 1)));
  return d;
}

std::string describe(const LogprobDistance& d) {
  char text[128];
  std::snprintf(text, sizeof text, "path max %.4f mean %.4f, vocabulary max %.4f rms %.4f", d.path_max, d.path_mean,
                d.any_max, d.any_rms);
  return text;
}

// The best level with int8 activations and the best without (empty when the CPU has none with them).
std::string_view int8_level() {
  for (const auto level : engine::cpu::supported_simd_levels()) {
    if (engine::cpu::quantizes_activations(level, WeightType::Q8_0)) return level;
  }
  return {};
}

std::string_view float_level() {
  for (const auto level : engine::cpu::supported_simd_levels()) {
    if (!engine::cpu::quantizes_activations(level, WeightType::Q8_0)) return level;
  }
  return {};
}

class LlamaCppNumerics : public testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(LLAMACPP_NODE_MODULES) / "node-llama-cpp" / "package.json"))
        << "llama.cpp is not installed in " << LLAMACPP_NODE_MODULES << ": run scripts/install-llamacpp-peer.sh";
  }
};

std::string arch_name(const testing::TestParamInfo<Architecture>& info) {
  return std::string(engine::model::architecture_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppNumerics,
                         testing::Values(Architecture::Qwen3, Architecture::Qwen2, Architecture::Llama,
                                         Architecture::Gemma3, Architecture::Gemma2, Architecture::SmolLM3,
                                         Architecture::Phi3, Architecture::Mistral, Architecture::Qwen3Moe,
                                         Architecture::Qwen2Moe, Architecture::Mixtral, Architecture::GptOss),
                         arch_name);

TEST_P(LlamaCppNumerics, EngineIsAtLeastAsCloseToTheReferenceAsLlamaCppOnEveryFile) {
  TempDir dir;
  engine::tools::ModelWriterOptions options;
  options.arch = GetParam();
  options.out_dir = dir.path();
  options.seed = 5;
  options.safetensors = false;
  options.gguf_types = kGgufTypes;
  engine::tools::write_model(options);
  std::vector<fs::path> files;
  for (const auto type : kGgufTypes) files.push_back(dir / engine::tools::gguf_file_name(type));

  const auto llama_cpp = run_llama_cpp(files);
  ASSERT_EQ(llama_cpp.size(), files.size()) << "llama.cpp did not load every file";
  const std::string int8(int8_level()), floats(float_level());
  ASSERT_FALSE(floats.empty());
  if (int8.empty()) {
    std::printf("[ llama.cpp ] no int8 level on this CPU: the engine compared at %s only\n", floats.c_str());
  }

  for (std::size_t f = 0; f < files.size(); ++f) {
    const auto type = kGgufTypes[f];
    const std::string name = engine::tools::gguf_type_name(type);
    SCOPED_TRACE(name);
    const auto& run = llama_cpp.at(files[f]);
    ASSERT_EQ(run.path.size(), kPrompt.size() + kGreedySteps);
    const LogprobRows reference = reference_logprobs(files[f], run.path);
    const auto theirs = distance(run.logprobs, reference, run.path);
    const auto ours_float = distance(engine_logprobs(files[f], run.path, floats, dir.path()), reference, run.path);
    const std::string arch = arch_name({GetParam(), 0});
    std::printf("[ llama.cpp ] %s %s llama.cpp:  %s\n", arch.c_str(), name.c_str(), describe(theirs).c_str());
    std::printf("[ llama.cpp ] %s %s %-10s  %s\n", arch.c_str(), name.c_str(), floats.c_str(),
                describe(ours_float).c_str());
    const double bar = std::max(theirs.path_max, kRoundingFloor);
    EXPECT_LE(ours_float.path_max, bar) << files[f] << " at " << floats;
    if (!int8.empty()) {
      const auto ours_int8 = distance(engine_logprobs(files[f], run.path, int8, dir.path()), reference, run.path);
      std::printf("[ llama.cpp ] %s %s %-10s  %s\n", arch.c_str(), name.c_str(), int8.c_str(),
                  describe(ours_int8).c_str());
      EXPECT_LE(ours_int8.path_max, bar) << files[f] << " at " << int8;
      if (engine::cpu::quantizes_activations(int8, type.type)) {
        EXPECT_GT(ours_int8.any_max, 1e-4) << files[f] << ": the activations were not quantized";
      }
    }
  }
}

// The codebook types on every index and sign a block can hold, not only those the quantizers write:
// model-writer's Qwen3 F32 file with its matrices re-stored as random blocks of each (engine_reference_test.cc
// does the same against the reference alone). llama.cpp loads them, and the engine is at least as close to the
// float64 reference as it is.
TEST(LlamaCppRandomBlocks, CodebookTypesLoadAndTheEngineIsAtLeastAsClose) {
  ASSERT_TRUE(fs::exists(fs::path(LLAMACPP_NODE_MODULES) / "node-llama-cpp" / "package.json"));
  TempDir dir;
  engine::tools::ModelWriterOptions options;
  options.arch = Architecture::Qwen3;
  options.out_dir = dir.path();
  options.seed = 5;
  options.safetensors = false;
  options.gguf_types = {WeightType::F32};
  engine::tools::write_model(options);
  std::vector<WeightType> types;
  std::vector<fs::path> files;
  for (std::size_t i = 0; i < engine::quant::kWeightTypeCount; ++i) {
    const auto type = static_cast<WeightType>(i);
    if (!engine::quant::ggml_blocks::is_codebook_type(static_cast<int>(type))) continue;
    files.push_back(dir / ("random-" + std::string(engine::quant::weight_type_name(type)) + ".gguf"));
    types.push_back(type);
    ASSERT_GT(testing_support::write_random_block_copy(dir / engine::tools::gguf_file_name(WeightType::F32),
                                                       files.back(), type, 11),
              0);
  }
  ASSERT_FALSE(files.empty());
  const auto llama_cpp = run_llama_cpp(files);
  ASSERT_EQ(llama_cpp.size(), files.size()) << "llama.cpp did not load every file";
  const std::string floats(float_level());
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string name(engine::quant::weight_type_name(types[f]));
    const auto& run = llama_cpp.at(files[f]);
    const LogprobRows reference = reference_logprobs(files[f], run.path);
    const auto theirs = distance(run.logprobs, reference, run.path);
    const auto ours = distance(engine_logprobs(files[f], run.path, floats, dir.path()), reference, run.path);
    std::printf("[ llama.cpp ] random %s llama.cpp:  %s\n", name.c_str(), describe(theirs).c_str());
    std::printf("[ llama.cpp ] random %s %-10s  %s\n", name.c_str(), floats.c_str(), describe(ours).c_str());
    EXPECT_LE(ours.path_max, std::max(theirs.path_max, kRoundingFloor)) << files[f];
  }
}

// model-writer's RoPE-scaled GGUF files (linear and yarn, as llama.cpp's converter writes their keys) load in
// llama.cpp, and it computes what the engine computes from them: the two implementations of each scaling
// agree within 0.1 in log-probability (both unquantized, F32), each is within that of the reference, and
// the engine at least as close to it as llama.cpp.
TEST(LlamaCppRopeScaling, LinearAndYarnFilesAgreeWithTheEngine) {
  ASSERT_TRUE(fs::exists(fs::path(LLAMACPP_NODE_MODULES) / "node-llama-cpp" / "package.json"))
      << "llama.cpp is not installed in " << LLAMACPP_NODE_MODULES << ": run scripts/install-llamacpp-peer.sh";
  TempDir dir;
  const std::pair<Architecture, engine::model::RopeType> cases[] = {
      {Architecture::Qwen2, engine::model::RopeType::Linear},
      {Architecture::Qwen3, engine::model::RopeType::Yarn},
      {Architecture::Llama, engine::model::RopeType::Yarn}};
  std::vector<fs::path> files;
  for (const auto& [arch, type] : cases) {
    engine::tools::ModelWriterOptions options;
    options.arch = arch;
    options.out_dir = dir / (std::string(engine::model::architecture_name(arch)) + "-" +
                             std::string(engine::model::rope_type_name(type)));
    options.seed = 5;
    options.safetensors = false;
    options.gguf_types = {WeightType::F32};
    options.rope_scaling = std::optional<engine::model::RopeType>(type);
    engine::tools::write_model(options);
    files.push_back(options.out_dir / engine::tools::gguf_file_name(WeightType::F32));
  }
  const auto llama_cpp = run_llama_cpp(files);
  ASSERT_EQ(llama_cpp.size(), files.size()) << "llama.cpp did not load every file";
  const std::string floats(float_level());
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    const auto& run = llama_cpp.at(file);
    const LogprobRows reference = reference_logprobs(file, run.path);
    const auto ours = engine_logprobs(file, run.path, floats, dir.path());
    const auto between = distance(ours, run.logprobs, run.path);
    std::printf("[ llama.cpp ] %s engine against llama.cpp: %s\n", file.parent_path().filename().c_str(),
                describe(between).c_str());
    EXPECT_LE(between.any_max, 0.1);
    const auto theirs = distance(run.logprobs, reference, run.path);
    EXPECT_LE(theirs.any_max, 0.1);
    EXPECT_LE(distance(ours, reference, run.path).path_max, std::max(theirs.path_max, kRoundingFloor));
  }
}

// A split as model-writer's --split-max-tensors writes it (gguf-split's layout) loads in llama.cpp from its
// first part and gives the whole file's log-probabilities exactly: the split keys and the parts' layout are
// llama.cpp's.
TEST(LlamaCppSplit, LoadsTheWrittenPartsAsTheWholeFile) {
  ASSERT_TRUE(fs::exists(fs::path(LLAMACPP_NODE_MODULES) / "node-llama-cpp" / "package.json"))
      << "llama.cpp is not installed in " << LLAMACPP_NODE_MODULES << ": run scripts/install-llamacpp-peer.sh";
  TempDir dir;
  engine::tools::ModelWriterOptions options;
  options.arch = Architecture::Qwen3;
  options.out_dir = dir / "whole";
  options.safetensors = false;
  options.gguf_types = {WeightType::Q8_0};
  const fs::path whole = engine::tools::write_model(options).files.back();
  options.out_dir = dir / "split";
  options.split_max_tensors = 4;
  const auto written = engine::tools::write_model(options).files;
  const std::vector<fs::path> parts(
      std::find_if(written.begin(), written.end(), [](const fs::path& p) { return p.extension() == ".gguf"; }),
      written.end());
  ASSERT_GT(parts.size(), 2u);
  const auto runs = run_llama_cpp({whole, parts.front()});
  ASSERT_EQ(runs.size(), 2u) << "llama.cpp did not load both";
  EXPECT_EQ(runs.at(parts.front()).path, runs.at(whole).path);
  EXPECT_EQ(runs.at(parts.front()).logprobs, runs.at(whole).logprobs);
}

// The largest |a[i] - b[i]|; infinity when the sizes differ (one failed).
double largest_difference(std::span<const float> a, std::span<const double> b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// An embedding model as model-writer writes one (--pooling: {arch}.pooling_type in the GGUF) pools in
// llama.cpp as in the engine. For each pooling type, on Qwen3 (no BOS) and Llama (llama.cpp prepends BOS), the
// engine's embedding (engine-logits --embedding, what /v1/embeddings serves) of the tokens llama.cpp evaluated
// agrees with llama.cpp's within 0.01 in every component of the unit vector on the F32 file, and on the F32 and
// Q8_0 files the engine, at its float and its int8 level, is at least as close to the float64 reference as
// llama.cpp is.
TEST(LlamaCppEmbeddings, PoolLikeTheEngineAndTheEngineIsAtLeastAsClose) {
  using engine::model::PoolingType;
  ASSERT_TRUE(fs::exists(fs::path(LLAMACPP_NODE_MODULES) / "node-llama-cpp" / "package.json"))
      << "llama.cpp is not installed in " << LLAMACPP_NODE_MODULES << ": run scripts/install-llamacpp-peer.sh";
  TempDir dir;
  const std::pair<PoolingType, std::string_view> poolings[] = {
      {PoolingType::Last, "last"}, {PoolingType::Mean, "mean"}, {PoolingType::Cls, "cls"}};
  const engine::tools::GgufFileType types[] = {WeightType::F32, WeightType::Q8_0};
  std::vector<fs::path> files;
  std::vector<PoolingType> file_pooling;
  for (const auto arch : {Architecture::Qwen3, Architecture::Llama}) {
    for (const auto& [pooling, name] : poolings) {
      engine::tools::ModelWriterOptions options;
      options.arch = arch;
      options.out_dir = dir / (std::string(engine::model::architecture_name(arch)) + "-" + std::string(name));
      options.seed = 7;
      options.safetensors = false;
      options.gguf_types.assign(std::begin(types), std::end(types));
      options.pooling = pooling;
      engine::tools::write_model(options);
      for (const auto type : types) {
        files.push_back(options.out_dir / engine::tools::gguf_file_name(type));
        file_pooling.push_back(pooling);
      }
    }
  }
  const auto llama_cpp = run_llama_cpp_embeddings(files, kPrompt);
  ASSERT_EQ(llama_cpp.size(), files.size()) << "llama.cpp did not embed with every file";
  const std::string int8(int8_level()), floats(float_level());
  for (std::size_t f = 0; f < files.size(); ++f) {
    const auto& run = llama_cpp.at(files[f]);
    const std::string label = files[f].parent_path().filename().string() + "/" + files[f].filename().string();
    SCOPED_TRACE(label);
    const bool llama = label.starts_with("Llama");
    EXPECT_EQ(run.tokens.size(), kPrompt.size() + (llama ? 1 : 0)) << "llama.cpp's BOS is llama's only";
    const auto reference = testing_support::reference_embedding(files[f], run.tokens, file_pooling[f]);
    const double theirs = largest_difference(std::vector<float>(run.embedding.begin(), run.embedding.end()), reference);
    const double bar = std::max(theirs, kRoundingFloor);
    const bool f32 = files[f].filename() == engine::tools::gguf_file_name(WeightType::F32);
    for (const auto& level : {floats, int8}) {
      if (level.empty()) continue;
      const auto ours = run_engine_logits(files[f], run.tokens, level, dir.path(), {"--embedding"});
      const double from_reference = largest_difference(ours, reference);
      std::printf("[ llama.cpp ] embedding %s: llama.cpp %.5f, engine at %s %.5f from the reference\n", label.c_str(),
                  theirs, level.c_str(), from_reference);
      EXPECT_LE(from_reference, bar) << level;
      if (f32) {
        EXPECT_LE(largest_difference(ours, run.embedding), 0.01) << level << ": the engine against llama.cpp";
      }
    }
  }
}

}  // namespace
