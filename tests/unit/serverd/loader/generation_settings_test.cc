#include "serverd/loader/generation_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/flags.h"
#include "tests/support/temp_dir.h"

namespace serverd {
namespace {

using ::testing::HasSubstr;

engine::model::GenerationDefaults model_defaults() {
  engine::model::GenerationDefaults g;
  g.temperature = 0.6;
  g.top_p = 0.95;
  g.top_k = 20;
  return g;
}

TEST(GenerationSettings, AutoTakesTheModelsDefaults) {
  const auto g = resolve_generation_defaults(ServerOptions{}, model_defaults());
  EXPECT_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_k, 20);
}

TEST(GenerationSettings, VllmTakesNone) {
  ServerOptions o;
  o.generation_config = "vllm";
  const auto g = resolve_generation_defaults(o, model_defaults());
  EXPECT_FALSE(g.temperature);
  EXPECT_FALSE(g.top_p);
  EXPECT_FALSE(g.top_k);
}

TEST(GenerationSettings, ADirectoryGivesItsFile) {
  testing_support::TempDir dir;
  std::ofstream(dir / "generation_config.json") << R"({"temperature": 0.3, "max_new_tokens": 64, "eos_token_id": 7})";
  ServerOptions o;
  o.generation_config = dir.path().string();
  const auto g = resolve_generation_defaults(o, model_defaults());
  EXPECT_EQ(g.temperature, 0.3);
  EXPECT_EQ(g.max_new_tokens, 64u);
  EXPECT_FALSE(g.top_k);
  EXPECT_EQ(g.eos_token_ids, std::vector<std::int64_t>{7});
  o.generation_config = (dir / "missing").string();
  EXPECT_THROW(resolve_generation_defaults(o, model_defaults()), base::UsageError);
}

TEST(GenerationSettings, OverridesSetAndDropValues) {
  ServerOptions o;
  o.override_generation_config = R"({"temperature": 0.1, "top_k": null, "max_new_tokens": 5})";
  const auto g = resolve_generation_defaults(o, model_defaults());
  EXPECT_EQ(g.temperature, 0.1);
  EXPECT_FALSE(g.top_k);  // null drops the model's value, as vLLM's dict update does
  EXPECT_EQ(g.top_p, 0.95);
  EXPECT_EQ(g.max_new_tokens, 5u);
  o.override_generation_config = R"({"max_new_tokens": 0})";
  try {
    resolve_generation_defaults(o, model_defaults());
    FAIL();
  } catch (const base::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--override-generation-config: 'max_new_tokens' must be at least 1, not 0"));
  }
}

}  // namespace
}  // namespace serverd
