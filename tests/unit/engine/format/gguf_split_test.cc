#include "engine/format/gguf_split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/format/format_error.h"
#include "engine/format/gguf_writer.h"
#include "tests/support/sample_models.h"
#include "tests/support/temp_dir.h"

namespace engine::format {
namespace {

using ::testing::HasSubstr;

std::string error_opening(const std::filesystem::path& path) {
  try {
    GgufParts::open(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

class GgufSplit : public testing::Test {
 protected:
  void SetUp() override {
    testing_support::sample_gguf().write(dir_ / "whole.gguf");
    whole_.emplace(GgufFile::open(dir_ / "whole.gguf"));
  }
  // The sample's 8 tensors in parts of 3: 3 + 3 + 2.
  std::vector<std::filesystem::path> split() const { return write_gguf_split(*whole_, dir_ / "m", 3); }

  testing_support::TempDir dir_;
  std::optional<GgufFile> whole_;
};

TEST_F(GgufSplit, PartsServeEveryTensorByteForByteWithTheFirstPartsMetadata) {
  const auto paths = split();
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[0].filename(), "m-00001-of-00003.gguf");
  EXPECT_EQ(paths[2].filename(), "m-00003-of-00003.gguf");
  const auto parts = GgufParts::open(paths[0]);
  EXPECT_EQ(parts.part_count(), 3u);
  EXPECT_EQ(parts.layout().tensors.size(), 3u);  // the first part's own
  for (const auto& [key, value] : whole_->layout().metadata) EXPECT_NE(parts.layout().find(key), nullptr) << key;
  for (const auto& tensor : whole_->layout().tensors) {
    const auto found = parts.find_tensor(tensor.name);
    ASSERT_TRUE(found) << tensor.name;
    EXPECT_EQ(found->info->dims, tensor.dims);
    EXPECT_EQ(found->info->type, tensor.type);
    const auto want = whole_->data(tensor);
    EXPECT_TRUE(std::ranges::equal(found->data, want)) << tensor.name;
  }
  EXPECT_EQ(parts.find_tensor("blk.0.ffn_down.weight")->file->filename(), "m-00001-of-00003.gguf");
  EXPECT_FALSE(parts.find_tensor("no.such.tensor"));
  // An unsplit file is one part of itself.
  EXPECT_EQ(GgufParts::open(dir_ / "whole.gguf").part_count(), 1u);
}

TEST_F(GgufSplit, AMissingPartIsNamedWithWhatToDo) {
  const auto paths = split();
  std::filesystem::remove(paths[1]);
  const auto error = error_opening(paths[0]);
  EXPECT_THAT(error, HasSubstr("part 2, " + paths[1].string() + ", is missing"));
  EXPECT_THAT(error, HasSubstr("fetch every part"));
}

TEST_F(GgufSplit, OpeningALaterPartNamesTheFirst) {
  const auto paths = split();
  EXPECT_THAT(error_opening(paths[2]),
              HasSubstr("is part 3 of a GGUF split into 3: open the first part, " + paths[0].string()));
}

TEST_F(GgufSplit, PartsOfAnotherSplitAreRefused) {
  const auto paths = split();
  // A part of a two-way split of the same file, renamed into this split's place.
  const auto other = write_gguf_split(*whole_, dir_ / "other", 4);
  std::filesystem::rename(other[1], paths[1]);
  EXPECT_THAT(error_opening(paths[0]), HasSubstr("says it is part 2 of 2, not part 2 of 3"));
}

TEST_F(GgufSplit, ATensorHeldTwiceOrATensorCountThatDisagreesIsRefused) {
  const auto& tensors = whole_->layout().tensors;
  const auto write_part = [&](std::uint16_t no, std::int32_t total, std::vector<std::size_t> which) {
    GgufWriter w;
    w.add_metadata("split.no", GgufValue::scalar<std::uint16_t>(no));
    w.add_metadata("split.count", GgufValue::scalar<std::uint16_t>(2));
    w.add_metadata("split.tensors.count", GgufValue::scalar<std::int32_t>(total));
    for (const auto i : which) {
      const auto bytes = whole_->data(tensors[i]);
      w.add_tensor(tensors[i].name, tensors[i].dims, *tensors[i].type,
                   std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
    w.write(dir_ / gguf_split_part_name("t", no + 1u, 2));
  };
  write_part(0, 3, {0, 1});
  write_part(1, 3, {1, 2});
  EXPECT_THAT(error_opening(dir_ / "t-00001-of-00002.gguf"), HasSubstr("tensor " + tensors[1].name + " is in both"));
  write_part(1, 3, {2, 3});
  EXPECT_THAT(error_opening(dir_ / "t-00001-of-00002.gguf"),
              HasSubstr("split.tensors.count is 3 but the 2 parts hold 4 tensors"));
}

TEST_F(GgufSplit, AFirstPartWhoseNameHidesItsSiblingsIsRefused) {
  const auto paths = split();
  std::filesystem::rename(paths[0], dir_ / "renamed.gguf");
  EXPECT_THAT(error_opening(dir_ / "renamed.gguf"),
              HasSubstr("split.count is 3 but the file is not named {prefix}-00001-of-00003.gguf"));
}

}  // namespace
}  // namespace engine::format
