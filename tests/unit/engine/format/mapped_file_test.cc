#include "engine/format/mapped_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/format/format_error.h"
#include "tests/support/temp_dir.h"

namespace {

using engine::format::FormatError;
using engine::format::MappedFile;

std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 7 + 3) & 0xFF);
  return out;
}

TEST(MappedFile, MapsTheFilesBytes) {
  testing_support::TempDir dir;
  const auto bytes = pattern(10000);
  testing_support::write_file(dir / "w.bin", bytes);
  const auto file = MappedFile::open(dir / "w.bin");
  ASSERT_EQ(file.bytes().size(), bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), file.bytes().begin()));
}

TEST(MappedFile, AnEmptyFileMapsToNoBytesAndADirectoryIsRefusedByName) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "empty", std::string_view());
  EXPECT_TRUE(MappedFile::open(dir / "empty").bytes().empty());
  try {
    MappedFile::open(dir.path());
    FAIL() << "a directory was mapped";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
}

}  // namespace
