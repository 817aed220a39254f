// Embeddings pooled from hidden states: the sentence-transformers files and GGUF keys that say how, each
// module or mode the engine does not apply refused by name, and the pooling itself (last, mean, first token)
// over chunks as a prefill delivers them, cut to `dimensions`, then normalised.
#include "engine/model/pooling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <numeric>

#include "engine/format/gguf_writer.h"
#include "engine/model/model_config.h"
#include "tests/support/temp_dir.h"

namespace engine::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Qwen3-Embedding's modules.json and pooling config.
constexpr const char* kModules = R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";

std::string pooling_json(std::string_view true_mode) {
  std::string json = R"({"word_embedding_dimension": 1024)";
  for (const char* mode :
       {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
        "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
    json += std::string(", \"") + mode + "\": " + (true_mode.find(mode) != std::string_view::npos ? "true" : "false");
  }
  return json + R"(, "include_prompt": true})";
}

PoolingConfig parse(std::string_view modules, const std::string& pooling) {
  return parse_sentence_transformers(modules, "modules.json", [&](const std::string& file) {
    if (file != "1_Pooling/config.json") throw ConfigError("unexpected file " + file);
    return pooling;
  });
}

std::string refusal(std::string_view modules, const std::string& pooling) {
  try {
    parse(modules, pooling);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SentenceTransformers, ReadsThePoolingModeAndNormalize) {
  const auto last = parse(kModules, pooling_json("pooling_mode_lasttoken"));
  EXPECT_EQ(last.type, PoolingType::Last);
  EXPECT_TRUE(last.normalize);
  EXPECT_EQ(parse(kModules, pooling_json("pooling_mode_mean_tokens")).type, PoolingType::Mean);
  EXPECT_EQ(parse(kModules, pooling_json("pooling_mode_cls_token")).type, PoolingType::Cls);

  const std::string without_normalize = R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  EXPECT_FALSE(parse(without_normalize, pooling_json("pooling_mode_mean_tokens")).normalize);
}

TEST(SentenceTransformers, RefusesWhatTheEngineDoesNotApplyByName) {
  EXPECT_THAT(refusal(kModules, pooling_json("pooling_mode_max_tokens")),
              HasSubstr("1_Pooling/config.json: pooling_mode_max_tokens is not supported"));
  EXPECT_THAT(refusal(kModules, pooling_json("pooling_mode_cls_token pooling_mode_mean_tokens")),
              HasSubstr("several pooling modes are set (pooling_mode_cls_token, pooling_mode_mean_tokens)"));
  EXPECT_THAT(refusal(kModules, pooling_json("")), HasSubstr("no pooling_mode_* is true"));
  std::string no_prompt = pooling_json("pooling_mode_lasttoken");
  no_prompt.replace(no_prompt.find("\"include_prompt\": true"), 22, "\"include_prompt\": false");
  EXPECT_THAT(refusal(kModules, no_prompt), HasSubstr("include_prompt false"));

  const std::string dense = R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])";
  EXPECT_THAT(refusal(dense, pooling_json("pooling_mode_mean_tokens")),
              HasSubstr("modules.json: the module sentence_transformers.models.Dense is not supported"));
  EXPECT_THAT(refusal("{}", ""), HasSubstr("modules.json: not a JSON array of modules"));
}

TEST(SentenceTransformers, ADirectoryWithoutModulesJsonHasNone) {
  const testing_support::TempDir dir;
  EXPECT_FALSE(read_sentence_transformers(dir.path()));
  std::ofstream(dir.path() / "modules.json") << kModules;
  std::filesystem::create_directory(dir.path() / "1_Pooling");
  std::ofstream(dir.path() / "1_Pooling" / "config.json") << pooling_json("pooling_mode_mean_tokens");
  const auto config = read_sentence_transformers(dir.path());
  ASSERT_TRUE(config);
  EXPECT_EQ(config->type, PoolingType::Mean);
}

TEST(GgufPooling, ReadsLlamaCppsPoolingType) {
  const auto pooling_of = [](std::optional<std::uint32_t> type) {
    format::GgufWriter w;
    w.add_metadata("general.architecture", format::GgufValue::string("qwen3"));
    if (type) w.add_metadata("qwen3.pooling_type", format::GgufValue::scalar<std::uint32_t>(*type));
    const auto bytes = w.serialize();
    return gguf_pooling(format::parse_gguf(bytes, "m.gguf"), "m.gguf");
  };
  EXPECT_FALSE(pooling_of(std::nullopt));
  EXPECT_FALSE(pooling_of(0));
  EXPECT_EQ(pooling_of(1)->type, PoolingType::Mean);
  EXPECT_EQ(pooling_of(2)->type, PoolingType::Cls);
  EXPECT_EQ(pooling_of(3)->type, PoolingType::Last);
  EXPECT_TRUE(pooling_of(3)->normalize);
  try {
    pooling_of(4);
    ADD_FAILURE() << "rank pooling was taken";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("m.gguf: qwen3.pooling_type 4 is not supported"));
  }
}

TEST(Matryoshka, ReadsTheFlagAndTheLengths) {
  EXPECT_FALSE(parse_matryoshka(R"({"hidden_size": 8})", "c").enabled);
  EXPECT_TRUE(parse_matryoshka(R"({"is_matryoshka": true})", "c").enabled);
  const auto m = parse_matryoshka(R"({"matryoshka_dimensions": [32, 64]})", "c");
  EXPECT_TRUE(m.enabled);
  EXPECT_THAT(m.dimensions, ElementsAre(32, 64));
  EXPECT_THROW(parse_matryoshka(R"({"matryoshka_dimensions": [0]})", "c"), ConfigError);
}

// Four positions of three values each.
const std::vector<float> kRows = {1, 2, 3, 4, 5, 6, -7, 8, 9, 10, 11, -12};

std::vector<float> pool(PoolingType type, std::span<const std::size_t> chunks, std::size_t dimensions = 0,
                        bool normalize = false) {
  PooledState state(type, 3);
  std::size_t first = 0;
  for (const std::size_t n : chunks) {
    state.add(first, std::span(kRows).subspan(first * 3, n * 3));
    first += n;
  }
  return state.finish(first, dimensions, normalize);
}

TEST(PooledState, PoolsTheLastTheMeanOrTheFirstPositionWhateverTheChunks) {
  const std::size_t whole[] = {4}, pieces[] = {1, 2, 1};
  for (const auto& chunks : {std::span<const std::size_t>(whole), std::span<const std::size_t>(pieces)}) {
    EXPECT_THAT(pool(PoolingType::Last, chunks), ElementsAre(10, 11, -12));
    EXPECT_THAT(pool(PoolingType::Cls, chunks), ElementsAre(1, 2, 3));
    EXPECT_THAT(pool(PoolingType::Mean, chunks), ElementsAre(2.0f, 6.5f, 1.5f));
  }
}

TEST(PooledState, CutsToTheDimensionsThenNormalises) {
  const std::size_t whole[] = {4};
  const auto v = pool(PoolingType::Last, whole, 2, true);
  ASSERT_EQ(v.size(), 2u);
  const double norm = std::sqrt(10.0 * 10 + 11 * 11);
  EXPECT_NEAR(v[0], 10 / norm, 1e-7);
  EXPECT_NEAR(v[1], 11 / norm, 1e-7);
}

TEST(PooledState, ARecomputeStartsOverAndAGapIsRefused) {
  PooledState state(PoolingType::Mean, 3);
  state.add(0, std::span(kRows).subspan(0, 6));
  state.add(0, std::span(kRows).subspan(0, 3));  // preempted and recomputed from the start
  state.add(1, std::span(kRows).subspan(3, 9));
  EXPECT_THAT(state.finish(4, 0, false), ElementsAre(2.0f, 6.5f, 1.5f));
  EXPECT_THROW(state.add(6, std::span(kRows).subspan(0, 3)), std::invalid_argument);
  EXPECT_THROW(state.finish(5, 0, false), std::invalid_argument);

  PooledState last(PoolingType::Last, 3);
  last.add(2, std::span(kRows).subspan(6, 6));  // positions 0 and 1 came from the prefix cache
  EXPECT_THAT(last.finish(4, 0, false), ElementsAre(10, 11, -12));
}

}  // namespace
}  // namespace engine::model
