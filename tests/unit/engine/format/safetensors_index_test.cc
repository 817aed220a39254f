#include "engine/format/safetensors_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/format/format_error.h"
#include "tests/support/temp_dir.h"

namespace engine::format {
namespace {

using ::testing::HasSubstr;

std::string error_of(std::string_view json) {
  try {
    parse_safetensors_index(json, "model.safetensors.index.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsIndex, ParsesWeightMapAndTotalSize) {
  const auto index = parse_safetensors_index(R"({
    "metadata": {"total_size": 16060522496},
    "weight_map": {
      "lm_head.weight": "model-00002-of-00002.safetensors",
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.norm.weight": "model-00002-of-00002.safetensors"
    }})",
                                             "x");
  EXPECT_EQ(index.total_size, 16060522496u);
  EXPECT_EQ(index.weight_map.at("model.norm.weight"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(index.shard_files(),
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
}

TEST(SafetensorsIndex, AcceptsIntegralFloatSizeAndMissingMetadata) {
  EXPECT_EQ(parse_safetensors_index(R"({"metadata":{"total_size":1024.0},"weight_map":{}})", "x").total_size, 1024u);
  EXPECT_FALSE(parse_safetensors_index(R"({"weight_map":{"a":"sub/a.safetensors"}})", "x").total_size);
}

TEST(SafetensorsIndex, RefusesBadShapes) {
  EXPECT_THAT(error_of("{"), HasSubstr("invalid JSON"));
  EXPECT_THAT(error_of("[]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(error_of("{}"), HasSubstr("no 'weight_map' object"));
  EXPECT_THAT(error_of(R"({"weight_map":{"a":1}})"), HasSubstr("weight_map['a'] is not a string"));
  EXPECT_THAT(error_of(R"({"weight_map":{}} x)"), HasSubstr("text follows the JSON value"));
  EXPECT_THAT(error_of(R"({"metadata":{"total_size":-5},"weight_map":{}})"), HasSubstr("not a non-negative integer"));
  EXPECT_THAT(error_of(R"({"metadata":{"total_size":1.5},"weight_map":{}})"), HasSubstr("not a non-negative integer"));
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"x.safetensors","a":"y.safetensors"}})"), HasSubstr("names 'a' twice"));
  // At any depth: a reader that took the first 'weight_map' would load other shards than Python does.
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"x.safetensors"},"weight_map":{"a":"y.safetensors"}})"),
              HasSubstr("names 'weight_map' twice"));
}

TEST(SafetensorsIndex, RefusesUnsafeOrForeignShardPaths) {
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"../x.safetensors"}})"), HasSubstr("not a safe relative path"));
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"/etc/x.safetensors"}})"), HasSubstr("not a safe relative path"));
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"a\\b.safetensors"}})"), HasSubstr("not a safe relative path"));
  EXPECT_THAT(error_of(R"({"weight_map":{"a":"pytorch_model.bin"}})"), HasSubstr("not a .safetensors file"));
}

TEST(SafetensorsIndex, RefusesHostileSizes) {
  const std::string huge(kMaxSafetensorsIndexBytes + 1, ' ');
  EXPECT_THAT(error_of(huge), HasSubstr("over the limit"));
}

TEST(SafetensorsIndex, ReadsFromDisk) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "i.json", std::string_view(R"({"weight_map":{"w":"m.safetensors"}})"));
  EXPECT_EQ(read_safetensors_index(dir / "i.json").weight_map.size(), 1u);
}

TEST(SafePath, AcceptsPlainRelativePathsOnly) {
  EXPECT_TRUE(is_safe_relative_path("config.json"));
  EXPECT_TRUE(is_safe_relative_path("sub/dir/model.safetensors"));
  EXPECT_TRUE(is_safe_relative_path("..hidden"));
  for (const char* bad : {"", "/abs", "a/../b", "..", "a/./b", "a//b", "a/", "a\\b", "./a"}) {
    EXPECT_FALSE(is_safe_relative_path(bad)) << bad;
  }
  EXPECT_FALSE(is_safe_relative_path(std::string_view("a\0b", 3)));
}

}  // namespace
}  // namespace engine::format
