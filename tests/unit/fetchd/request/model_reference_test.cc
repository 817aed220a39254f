#include "fetchd/request/model_reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "fetchd/request/fetch_error.h"
#include "tests/support/temp_dir.h"

namespace fetchd::request {
namespace {

using ::testing::HasSubstr;
using Kind = ModelReference::Kind;

std::string error_of(std::string_view typed) {
  try {
    parse_model_reference(typed);
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    return e.what();
  }
  return "";
}

// Runs the test body from inside a directory, restoring the working directory afterwards.
class InDirectory {
 public:
  explicit InDirectory(const std::filesystem::path& dir) : previous_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~InDirectory() { std::filesystem::current_path(previous_); }

 private:
  std::filesystem::path previous_;
};

TEST(ModelReference, ExistingDirectoryIsLocal) {
  testing_support::TempDir dir;
  const auto ref = parse_model_reference(dir.path().string());
  EXPECT_EQ(ref.kind, Kind::LocalDirectory);
  EXPECT_EQ(ref.local_path, dir.path());
  EXPECT_TRUE(ref.is_local());
}

TEST(ModelReference, ExistingGgufFileIsLocal) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "m.gguf", std::string_view("GGUF"));
  const auto ref = parse_model_reference((dir / "m.gguf").string());
  EXPECT_EQ(ref.kind, Kind::LocalGguf);
}

TEST(ModelReference, OtherExistingFilesAreRefused) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "model.safetensors", std::string_view("x"));
  EXPECT_THAT(error_of((dir / "model.safetensors").string()), HasSubstr("only .gguf files are served directly"));
}

TEST(ModelReference, LocalPathsShadowRepositoryIds) {
  testing_support::TempDir dir;
  std::filesystem::create_directories(dir / "Qwen" / "Qwen3-0.6B");
  InDirectory in(dir.path());
  const auto ref = parse_model_reference("Qwen/Qwen3-0.6B");
  EXPECT_EQ(ref.kind, Kind::LocalDirectory);
}

TEST(ModelReference, RepositoryIds) {
  const auto ref = parse_model_reference("Qwen/Qwen3-0.6B");
  EXPECT_EQ(ref.kind, Kind::HubRepository);
  EXPECT_EQ(ref.repo_id, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(ref.quant, "");
  EXPECT_EQ(ref.typed, "Qwen/Qwen3-0.6B");
  EXPECT_FALSE(ref.is_local());
}

TEST(ModelReference, QuantTagSplitsAtTheLastColon) {
  const auto ref = parse_model_reference("unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
  EXPECT_EQ(ref.repo_id, "unsloth/Qwen3-0.6B-GGUF");
  EXPECT_EQ(ref.quant, "Q4_K_M");
  EXPECT_EQ(ref.typed, "unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
  EXPECT_THAT(error_of("a:b/c:Q8_0"), HasSubstr("the character ':'"));
  EXPECT_THAT(error_of("org/repo:"), HasSubstr("quantization tag"));
  EXPECT_THAT(error_of("org/repo:Q4/K"), HasSubstr("quantization tag"));
}

TEST(ModelReference, RefusesMalformedIds) {
  EXPECT_THAT(error_of(""), HasSubstr("--model is empty"));
  EXPECT_THAT(error_of("gpt2"), HasSubstr("no '/' between organisation and name"));
  EXPECT_THAT(error_of("a/b/c"), HasSubstr("more than one '/'"));
  EXPECT_THAT(error_of("/org"), HasSubstr("no such file or directory"));
  EXPECT_THAT(error_of("./missing/dir"), HasSubstr("no such file or directory"));
  EXPECT_THAT(error_of("org/missing.gguf"), HasSubstr("no such file or directory"));
  EXPECT_THAT(error_of("org/"), HasSubstr("repository name is empty"));
  EXPECT_THAT(error_of("-org/repo"), HasSubstr("organisation starts or ends with '-'"));
  EXPECT_THAT(error_of("org/repo."), HasSubstr("starts or ends with '.'"));
  EXPECT_THAT(error_of("org/re..po"), HasSubstr("'..'"));
  EXPECT_THAT(error_of("org/re--po"), HasSubstr("'--'"));
  EXPECT_THAT(error_of("org/re po"), HasSubstr("the character ' '"));
  EXPECT_THAT(error_of("org/repo@main"), HasSubstr("--revision"));
  EXPECT_THAT(error_of("org/" + std::string(253, 'a')), HasSubstr("257 characters, more than 256"));
  EXPECT_EQ(error_of("org/" + std::string(252, 'a')), "");
}

TEST(ModelReference, RepoIdProblemNamesTheReason) {
  EXPECT_FALSE(repo_id_problem("meta-llama/Llama-3.2-1B-Instruct"));
  EXPECT_FALSE(repo_id_problem("a/b"));
  EXPECT_TRUE(repo_id_problem("a/_b"));
}

}  // namespace
}  // namespace fetchd::request

namespace fetchd::request {
namespace {

TEST(CommitHash, IsFortyLowerCaseHexDigits) {
  EXPECT_TRUE(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("0123456789abcdef0123456789abcdef0123456"));
  EXPECT_FALSE(is_commit_hash("main"));
}

}  // namespace
}  // namespace fetchd::request
