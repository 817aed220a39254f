#include "fetchd/resolve/file_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fetchd/request/fetch_error.h"

namespace fetchd::resolve {
namespace {

using ::testing::HasSubstr;

std::vector<hub::ListingEntry> listing(std::initializer_list<const char*> paths) {
  std::vector<hub::ListingEntry> out;
  for (const char* p : paths) {
    hub::ListingEntry e;
    e.path = p;
    e.size = 1;
    out.push_back(e);
  }
  return out;
}

std::vector<std::string> paths(const std::vector<const hub::ListingEntry*>& entries) {
  std::vector<std::string> out;
  for (const auto* e : entries) out.push_back(e->path);
  return out;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const FetchError& e) {
    return e.what();
  }
  return "";
}

TEST(FilePlan, MetadataFilesAreTheRootOnesPresent) {
  const auto files = listing({"config.json", "tokenizer.json", "README.md", "original/config.json",
                              "model.safetensors.index.json", "chat_template.jinja", "merges.txt"});
  EXPECT_EQ(paths(metadata_files(files)),
            (std::vector<std::string>{"config.json", "tokenizer.json", "merges.txt", "chat_template.jinja",
                                      "model.safetensors.index.json"}));
}

TEST(FilePlan, ASentenceTransformersModelBringsItsModulesConfigs) {
  const auto files = listing({"config.json", "modules.json", "1_Pooling/config.json", "2_Normalize/config.json",
                              "2_Dense/model.safetensors", "original/config.json", "_x/config.json", "1_/config.json",
                              "3_Deep/more/config.json"});
  EXPECT_EQ(
      paths(metadata_files(files)),
      (std::vector<std::string>{"config.json", "modules.json", "1_Pooling/config.json", "2_Normalize/config.json"}));
  // Without modules.json, folders are not sentence-transformers modules.
  EXPECT_EQ(paths(metadata_files(listing({"config.json", "1_Pooling/config.json"}))),
            (std::vector<std::string>{"config.json"}));
}

TEST(FilePlan, IndexDecidesTheShards) {
  const auto files = listing({"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                              "consolidated.safetensors", "original/model.safetensors", "pytorch_model.bin"});
  engine::format::SafetensorsIndex index;
  index.weight_map = {{"a", "model-00002-of-00002.safetensors"},
                      {"b", "model-00001-of-00002.safetensors"},
                      {"c", "model-00002-of-00002.safetensors"}};
  EXPECT_EQ(paths(weight_files(files, index, "o/r")),
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  index.weight_map["d"] = "model-00003-of-00002.safetensors";
  EXPECT_THAT(
      error_of([&] { weight_files(files, index, "o/r"); }),
      HasSubstr("names the shard 'model-00003-of-00002.safetensors', which the repository listing does not hold"));
}

TEST(FilePlan, WithoutAnIndexRootSafetensorsBeatBin) {
  const auto files = listing({"config.json", "model.safetensors", "pytorch_model.bin", "sub/x.safetensors"});
  EXPECT_EQ(paths(weight_files(files, std::nullopt, "o/r")), (std::vector<std::string>{"model.safetensors"}));
}

TEST(FilePlan, RefusesBinOnlyRepositoriesByName) {
  const auto files = listing({"config.json", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"});
  try {
    weight_files(files, std::nullopt, "o/r");
    FAIL();
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_THAT(e.what(), HasSubstr("pytorch_model-00001-of-00002.bin, pytorch_model-00002-of-00002.bin"));
    EXPECT_THAT(e.what(), HasSubstr("safetensors and GGUF"));
  }
}

TEST(FilePlan, QuantMatchesWholeTokensCaseInsensitively) {
  EXPECT_TRUE(gguf_name_has_quant("x-Q4_K_M.gguf", "Q4_K_M"));
  EXPECT_TRUE(gguf_name_has_quant("x-q4_k_m.gguf", "Q4_K_M"));
  EXPECT_TRUE(gguf_name_has_quant("dir/Model.Q8_0.gguf", "q8_0"));
  EXPECT_TRUE(gguf_name_has_quant("x-UD-Q4_K_XL.gguf", "Q4_K_XL"));
  EXPECT_FALSE(gguf_name_has_quant("x-Q4_K_S.gguf", "Q4_K_M"));
  EXPECT_FALSE(gguf_name_has_quant("x-Q4_K_M.gguf", "Q4_K"));
  EXPECT_FALSE(gguf_name_has_quant("x-IQ4_XS.gguf", "Q4_XS"));
  EXPECT_FALSE(gguf_name_has_quant("x-Q4_K_M.bin", "Q4_K_M"));
}

TEST(FilePlan, ChoosesExactlyOneGgufForTheQuant) {
  const auto files = listing({"m-Q4_K_S.gguf", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-Q4_K_M.gguf"});
  const auto choice = choose_gguf(files, "q4_k_m", "o/r");
  EXPECT_EQ(paths(choice.parts), (std::vector<std::string>{"m-Q4_K_M.gguf"}));
  EXPECT_THAT(error_of([&] { choose_gguf(files, "Q5_K_M", "o/r"); }),
              HasSubstr("has no GGUF for 'Q5_K_M'. It has: m-Q4_K_S.gguf, m-Q4_K_M.gguf, m-Q8_0.gguf"));
}

TEST(FilePlan, SplitGgufBringsEveryPart) {
  const auto files = listing({"big-Q8_0-00002-of-00003.gguf", "big-Q8_0-00001-of-00003.gguf",
                              "big-Q8_0-00003-of-00003.gguf", "big-Q4_K_M.gguf"});
  EXPECT_EQ(paths(choose_gguf(files, "Q8_0", "o/r").parts),
            (std::vector<std::string>{"big-Q8_0-00001-of-00003.gguf", "big-Q8_0-00002-of-00003.gguf",
                                      "big-Q8_0-00003-of-00003.gguf"}));
  const auto incomplete = listing({"big-Q8_0-00001-of-00003.gguf", "big-Q8_0-00003-of-00003.gguf"});
  EXPECT_THAT(error_of([&] { choose_gguf(incomplete, "Q8_0", "o/r"); }), HasSubstr("lists 2 of the 3 parts"));
}

TEST(FilePlan, RefusesSeveralUnrelatedMatches) {
  const auto files = listing({"a-Q4_K_M.gguf", "b-Q4_K_M.gguf"});
  EXPECT_THAT(error_of([&] { choose_gguf(files, "Q4_K_M", "o/r"); }),
              HasSubstr("several files for Q4_K_M: a-Q4_K_M.gguf, b-Q4_K_M.gguf"));
}

TEST(FilePlan, DefaultGgufPrefersQ4KMThenQ8ThenTheOnlyOne) {
  EXPECT_EQ(paths(choose_gguf(listing({"m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-F16.gguf"}), "", "o/r").parts),
            (std::vector<std::string>{"m-Q4_K_M.gguf"}));
  EXPECT_EQ(paths(choose_gguf(listing({"m-Q8_0.gguf", "m-F16.gguf"}), "", "o/r").parts),
            (std::vector<std::string>{"m-Q8_0.gguf"}));
  EXPECT_EQ(paths(choose_gguf(listing({"m-F16.gguf"}), "", "o/r").parts), (std::vector<std::string>{"m-F16.gguf"}));
  EXPECT_THAT(error_of([&] {
                choose_gguf(listing({"m-F16.gguf", "m-BF16.gguf"}), "", "o/r");
              }),
              HasSubstr("Name one with o/r:QUANT"));
  EXPECT_THAT(error_of([&] { choose_gguf(listing({"README.md"}), "", "o/r"); }), HasSubstr("holds no .gguf file"));
}

}  // namespace
}  // namespace fetchd::resolve
