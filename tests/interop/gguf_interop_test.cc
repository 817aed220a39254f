// Cross-checks the GGUF reader against the @huggingface/gguf npm package on files the test generates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/format/gguf_writer.h"
#include "tests/support/sample_models.h"
#include "tests/support/temp_dir.h"

namespace {

using engine::format::GgufValue;
using engine::format::GgufWriter;

class GgufInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(TEST_NODE_MODULES) / "@huggingface" / "gguf"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
  }

  // Writes the file, describes it with model-file-inspect and has the npm reader compare.
  void cross_check(const GgufWriter& writer, const std::string& name) {
    const auto gguf = dir_ / (name + ".gguf");
    const auto json = dir_ / (name + ".json");
    writer.write(gguf);
    std::string output;
    ASSERT_EQ(
        testing_support::run_command(
            std::string(MODEL_FILE_INSPECT) + " --json '" + gguf.string() + "' > '" + json.string() + "'", output),
        0)
        << output;
    const int status =
        testing_support::run_command(std::string("'") + NODE_EXECUTABLE + "' '" + GGUF_CROSSCHECK_SCRIPT + "' '" +
                                         gguf.string() + "' '" + json.string() + "'",
                                     output);
    EXPECT_EQ(status, 0) << output;
    EXPECT_THAT(output, ::testing::HasSubstr("agree with @huggingface/gguf"));
  }

  testing_support::TempDir dir_;
};

TEST_F(GgufInterop, EveryValueTypeVersion3) {
  cross_check(testing_support::sample_gguf(3, 32), "v3");
}

TEST_F(GgufInterop, Version2WithAlignment64) {
  cross_check(testing_support::sample_gguf(2, 64), "v2");
}

TEST_F(GgufInterop, OneTensorOfEveryKnownType) {
  GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::string("llama"));
  int count = 0;
  for (std::uint32_t id = 0; id < 64; ++id) {
    const auto* type = engine::format::ggml_type_info(id);
    if (type == nullptr) continue;
    // Two rows of two blocks, so sizes multiply through both dimensions.
    const std::uint64_t row = 2ull * type->block_size;
    writer.add_tensor("t." + std::string(type->name), {row, 2}, *type,
                      std::vector<std::byte>(*engine::format::ggml_byte_size(*type, row * 2)));
    ++count;
  }
  EXPECT_GE(count, 35);
  cross_check(writer, "all-types");
}

TEST_F(GgufInterop, MetadataOnly) {
  GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::string("qwen3"));
  cross_check(writer, "no-tensors");
}

}  // namespace
