#include "fetchd/cache/cache_layout.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>

#include "fetchd/cache/file_ops.h"
#include "fetchd/request/fetch_error.h"
#include "tests/support/fetch_error.h"
#include "tests/support/temp_dir.h"

namespace fetchd::cache {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_support::TempDir;
using testing_support::write_file;

constexpr std::string_view kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr std::string_view kOtherCommit = "89abcdef0123456789abcdef0123456789abcdef";
constexpr std::string_view kLfsBlob = "a3f1c0de5b2e4d6f8a9b0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f7";  // sha256
constexpr std::string_view kGitBlob = "5d1ae0b6a07b4f6d7e8c9a0b1c2d3e4f50617283";                          // git sha1

std::string read_text(const fs::path& path) {
  const auto bytes = testing_support::read_file(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string link_text(const fs::path& path) {
  return fs::read_symlink(path).string();
}

// Every entry under `root` with its type, size, link text and mtime: equal listings mean nothing was written.
std::map<std::string, std::string> listing(const fs::path& root) {
  std::map<std::string, std::string> entries;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    EXPECT_EQ(::lstat(entry.path().c_str(), &st), 0);
    std::string description = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                              std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) description += " -> " + link_text(entry.path());
    entries[fs::relative(entry.path(), root).string()] = description;
  }
  return entries;
}

// Names anywhere under `root` that look like our temporaries: none may survive a finished write.
std::vector<std::string> temporaries(const fs::path& root) {
  std::vector<std::string> found;
  if (!fs::exists(root)) return found;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().filename().string().find("fetchd-tmp") != std::string::npos) {
      found.push_back(entry.path().string());
    }
  }
  return found;
}

void set_mtime(const fs::path& path, std::time_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
}

// Publishes `content` as blob `id` through the .incomplete path, as a download would.
void put_blob(const RepoCache& cache, std::string_view id, std::string_view content) {
  fs::create_directories(cache.blobs_dir());
  write_file(cache.incomplete_path(id), content);
  cache.publish_blob(cache.incomplete_path(id), id);
}

using testing_support::error_from;

class CacheLayout : public ::testing::Test {
 protected:
  TempDir dir_;
  fs::path hub_ = dir_ / "hub";
  RepoCache cache_{hub_, "org/repo"};
};

TEST(CacheFolderNames, FollowHuggingfaceHub) {
  EXPECT_EQ(repo_folder_name("org/repo"), "models--org--repo");
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-0.6B"), "models--Qwen--Qwen3-0.6B");
  EXPECT_EQ(repo_folder_name("gpt2"), "models--gpt2");
}

TEST_F(CacheLayout, PathsFollowHuggingfaceHub) {
  const auto repo = hub_ / "models--org--repo";
  EXPECT_EQ(cache_.repo_dir(), repo);
  EXPECT_EQ(cache_.blob_path(kLfsBlob), repo / "blobs" / kLfsBlob);
  EXPECT_EQ(cache_.incomplete_path(kLfsBlob), repo / "blobs" / (std::string(kLfsBlob) + ".incomplete"));
  EXPECT_EQ(cache_.snapshot_dir(kCommit), repo / "snapshots" / kCommit);
  EXPECT_EQ(cache_.snapshot_file(kCommit, "a/b/c.json"), repo / "snapshots" / kCommit / "a/b/c.json");
  EXPECT_EQ(cache_.ref_path("main"), repo / "refs/main");
  EXPECT_EQ(cache_.ref_path("refs/pr/1"), repo / "refs/refs/pr/1");  // huggingface_hub nests it so
  EXPECT_EQ(cache_.no_exist_path(kCommit, "sub/x.json"), repo / ".no_exist" / kCommit / "sub/x.json");
  EXPECT_EQ(cache_.locks_dir(), hub_ / ".locks/models--org--repo");
  EXPECT_EQ(cache_.blob_lock_path(kLfsBlob), hub_ / ".locks/models--org--repo" / (std::string(kLfsBlob) + ".lock"));
  EXPECT_EQ(RepoCache(hub_, "gpt2").repo_dir(), hub_ / "models--gpt2");
}

TEST_F(CacheLayout, NamesThatCouldEscapeAreRefused) {
  for (const auto* path : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", "."}) {
    EXPECT_EQ(error_from([&] { cache_.snapshot_file(kCommit, path); }).kind(), ErrorKind::Usage) << path;
    EXPECT_FALSE(engine::format::is_safe_relative_path(path)) << path;
  }
  EXPECT_TRUE(engine::format::is_safe_relative_path("a/b/c.json"));
  EXPECT_TRUE(engine::format::is_safe_relative_path(".gitattributes"));  // a leading dot is a name, not a component
  for (const auto* commit : {"main", "0123456789ABCDEF0123456789ABCDEF01234567", "0123", "../../../etc"}) {
    EXPECT_EQ(error_from([&] { cache_.snapshot_dir(commit); }).kind(), ErrorKind::Usage) << commit;
  }
  for (const auto* id : {"", "../x", "a/b", ".hidden", "abc.incomplete"}) {
    EXPECT_EQ(error_from([&] { cache_.blob_path(id); }).kind(), ErrorKind::Usage) << id;
  }
  for (const auto* repo : {"", "a/b/c", "../x", "org/", "org/re po"}) {
    EXPECT_EQ(error_from([&] { RepoCache(hub_, repo); }).kind(), ErrorKind::Usage) << repo;
  }
  EXPECT_THAT(error_from([&] { cache_.write_ref("../escape", kCommit); }).what(), HasSubstr("'../escape'"));
  EXPECT_FALSE(fs::exists(hub_));  // refused before anything was written
}

TEST_F(CacheLayout, RefIsWrittenWithoutNewlineAndReadBack) {
  EXPECT_EQ(cache_.read_ref("main"), std::nullopt);
  cache_.write_ref("main", kCommit);
  EXPECT_EQ(read_text(cache_.repo_dir() / "refs/main"), kCommit);  // 40 bytes, no trailing newline
  EXPECT_EQ(cache_.read_ref("main"), kCommit);

  cache_.write_ref("refs/pr/1", kOtherCommit);
  EXPECT_EQ(read_text(cache_.repo_dir() / "refs/refs/pr/1"), kOtherCommit);
  EXPECT_EQ(cache_.read_ref("refs/pr/1"), kOtherCommit);
  EXPECT_THAT(temporaries(cache_.refs_dir()), ::testing::IsEmpty());
}

TEST_F(CacheLayout, RefIsReplacedByRenameNotRewrittenInPlace) {
  cache_.write_ref("main", kCommit);
  struct stat before {};
  ASSERT_EQ(::stat(cache_.ref_path("main").c_str(), &before), 0);
  cache_.write_ref("main", kOtherCommit);
  struct stat after {};
  ASSERT_EQ(::stat(cache_.ref_path("main").c_str(), &after), 0);
  // A new inode: a reader holding the old file saw the whole old ref, never a truncated one.
  EXPECT_NE(before.st_ino, after.st_ino);
  EXPECT_EQ(cache_.read_ref("main"), kOtherCommit);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(cache_.refs_dir())) names.push_back(entry.path().filename());
  EXPECT_THAT(names, ::testing::ElementsAre("main"));
}

TEST_F(CacheLayout, MalformedRefIsReportedNotTrusted) {
  fs::create_directories(cache_.refs_dir());
  write_file(cache_.ref_path("main"), std::string(kCommit) + "\n");
  auto error = error_from([&] { cache_.read_ref("main"); });
  EXPECT_EQ(error.kind(), ErrorKind::Integrity);
  EXPECT_THAT(error.what(), HasSubstr(cache_.ref_path("main").string()));
  EXPECT_THAT(error.what(), HasSubstr("\\n'"));  // the stray newline is shown
  EXPECT_THAT(error.what(), HasSubstr("delete it"));

  write_file(cache_.ref_path("main"), "not a commit");
  EXPECT_EQ(error_from([&] { cache_.read_ref("main"); }).kind(), ErrorKind::Integrity);
  EXPECT_EQ(error_from([&] { cache_.find_commit("main"); }).kind(), ErrorKind::Integrity);
}

TEST_F(CacheLayout, PublishBlobRenamesTheProvenFile) {
  EXPECT_FALSE(cache_.has_blob(kLfsBlob));
  put_blob(cache_, kLfsBlob, "weights");
  EXPECT_TRUE(cache_.has_blob(kLfsBlob));
  EXPECT_EQ(read_text(cache_.blob_path(kLfsBlob)), "weights");
  EXPECT_FALSE(fs::exists(cache_.incomplete_path(kLfsBlob)));

  const auto error = error_from([&] { cache_.publish_blob(cache_.incomplete_path(kGitBlob), kGitBlob); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  EXPECT_THAT(error.what(), HasSubstr(cache_.incomplete_path(kGitBlob).string()));
  EXPECT_THAT(error.what(), HasSubstr("No such file or directory"));
}

TEST_F(CacheLayout, SymlinkIsRelativeForATopLevelFile) {
  put_blob(cache_, kGitBlob, "{}");
  EXPECT_EQ(cache_.link_snapshot_file(kCommit, "config.json", kGitBlob, true), LinkMode::Symlink);
  const auto entry = cache_.snapshot_file(kCommit, "config.json");
  EXPECT_EQ(link_text(entry), "../../blobs/" + std::string(kGitBlob));
  EXPECT_EQ(read_text(entry), "{}");
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "config.json"));
}

TEST_F(CacheLayout, SymlinkClimbsOneLevelPerDirectoryInThePath) {
  put_blob(cache_, kLfsBlob, "nested");
  EXPECT_EQ(cache_.link_snapshot_file(kCommit, "a/b/c.json", kLfsBlob, true), LinkMode::Symlink);
  const auto entry = cache_.snapshot_file(kCommit, "a/b/c.json");
  EXPECT_EQ(link_text(entry), "../../../../blobs/" + std::string(kLfsBlob));
  EXPECT_EQ(fs::canonical(entry), fs::canonical(cache_.blob_path(kLfsBlob)));
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "a/b/c.json"));
  EXPECT_THAT(temporaries(cache_.repo_dir()), ::testing::IsEmpty());
}

TEST_F(CacheLayout, RealFileWhenSymlinksAreNotAllowed) {
  put_blob(cache_, kLfsBlob, "copied bytes");
  EXPECT_EQ(cache_.link_snapshot_file(kCommit, "dir/model.safetensors", kLfsBlob, false), LinkMode::Copy);
  const auto entry = cache_.snapshot_file(kCommit, "dir/model.safetensors");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(entry)));
  EXPECT_EQ(read_text(entry), "copied bytes");
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "dir/model.safetensors"));
  EXPECT_THAT(temporaries(cache_.repo_dir()), ::testing::IsEmpty());
}

TEST_F(CacheLayout, CopiesBytesWhenTheBlobIsOnAnotherFilesystem) {
  // blobs/ on another filesystem makes link() fail with EXDEV, which forces the byte copy.
  const fs::path other = "/dev/shm";
  struct stat here {
  }, there{};
  if (::stat(dir_.path().c_str(), &here) != 0 || ::stat(other.c_str(), &there) != 0 || here.st_dev == there.st_dev) {
    GTEST_SKIP() << "no second filesystem at /dev/shm";
  }
  struct RemovedAfterwards {
    fs::path path;
    ~RemovedAfterwards() { fs::remove_all(path); }
  } blobs{other / ("fetchd-cache-test-" + detail::random_token())};
  fs::create_directories(blobs.path);
  fs::create_directories(cache_.repo_dir());
  fs::create_directory_symlink(blobs.path, cache_.blobs_dir());
  std::string content(3 << 20, 'x');  // over one read/write buffer
  content[12345] = 'y';
  write_file(cache_.blob_path(kLfsBlob), content);
  EXPECT_EQ(cache_.link_snapshot_file(kCommit, "model.safetensors", kLfsBlob, false), LinkMode::Copy);
  EXPECT_EQ(read_text(cache_.snapshot_file(kCommit, "model.safetensors")), content);
  EXPECT_THAT(temporaries(cache_.snapshots_dir()), ::testing::IsEmpty());
}

TEST_F(CacheLayout, ExistingEntriesAreReplaced) {
  put_blob(cache_, kLfsBlob, "new");
  put_blob(cache_, kGitBlob, "old");
  const auto entry = cache_.snapshot_file(kCommit, "w/model.bin");

  fs::create_directories(entry.parent_path());
  write_file(entry, "stale regular file");
  EXPECT_EQ(cache_.link_snapshot_file(kCommit, "w/model.bin", kLfsBlob, true), LinkMode::Symlink);
  EXPECT_EQ(read_text(entry), "new");

  cache_.link_snapshot_file(kCommit, "w/model.bin", kGitBlob, true);  // symlink over symlink
  EXPECT_EQ(link_text(entry), "../../../blobs/" + std::string(kGitBlob));

  cache_.link_snapshot_file(kCommit, "w/model.bin", kLfsBlob, false);  // real file over symlink
  EXPECT_EQ(read_text(entry), "new");
  // Again: the entry already is a hard link to this blob, where rename() does nothing (POSIX); the
  // temporary must not be left behind.
  cache_.link_snapshot_file(kCommit, "w/model.bin", kLfsBlob, false);
  EXPECT_EQ(read_text(entry), "new");
  EXPECT_THAT(temporaries(cache_.repo_dir()), ::testing::IsEmpty());
}

TEST_F(CacheLayout, LinkingRequiresAPublishedBlob) {
  const auto error = error_from([&] { cache_.link_snapshot_file(kCommit, "config.json", kGitBlob, true); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  EXPECT_THAT(error.what(), HasSubstr("publish the blob"));
}

TEST_F(CacheLayout, SnapshotHasNeedsTheTargetOfASymlink) {
  EXPECT_FALSE(cache_.snapshot_has(kCommit, "config.json"));
  const auto dir = cache_.snapshot_dir(kCommit);
  fs::create_directories(dir);
  fs::create_symlink("../../blobs/" + std::string(kGitBlob), dir / "config.json");  // dangling
  EXPECT_FALSE(cache_.snapshot_has(kCommit, "config.json"));
  // A real file with no blob behind it (a cache made without symlinks) counts.
  write_file(dir / "tokenizer.json", "{}");
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "tokenizer.json"));
}

TEST_F(CacheLayout, NoExistMarkers) {
  EXPECT_FALSE(cache_.is_known_missing(kCommit, "generation_config.json"));
  cache_.write_no_exist(kCommit, "generation_config.json");
  cache_.write_no_exist(kCommit, "sub/dir/absent.json");
  EXPECT_TRUE(cache_.is_known_missing(kCommit, "generation_config.json"));
  EXPECT_TRUE(cache_.is_known_missing(kCommit, "sub/dir/absent.json"));
  EXPECT_EQ(fs::file_size(cache_.repo_dir() / ".no_exist" / kCommit / "generation_config.json"), 0u);
  cache_.write_no_exist(kCommit, "generation_config.json");  // idempotent
  EXPECT_FALSE(cache_.is_known_missing(kOtherCommit, "generation_config.json"));
}

TEST_F(CacheLayout, FindCommitByHashAndByRef) {
  EXPECT_EQ(cache_.find_commit("main"), std::nullopt);  // empty cache
  EXPECT_EQ(cache_.find_commit(kCommit), std::nullopt);
  fs::create_directories(cache_.snapshot_dir(kCommit));
  EXPECT_EQ(cache_.find_commit(kCommit), kCommit);
  EXPECT_EQ(cache_.find_commit(kOtherCommit), std::nullopt);  // a hash asks for that commit only

  cache_.write_ref("main", kCommit);
  cache_.write_ref("refs/pr/1", kOtherCommit);
  EXPECT_EQ(cache_.find_commit("main"), kCommit);
  EXPECT_EQ(cache_.find_commit("refs/pr/1"), std::nullopt);  // its snapshot is missing
  fs::create_directories(cache_.snapshot_dir(kOtherCommit));
  EXPECT_EQ(cache_.find_commit("refs/pr/1"), kOtherCommit);
  EXPECT_EQ(error_from([&] { cache_.find_commit("../../x"); }).kind(), ErrorKind::Usage);
}

TEST_F(CacheLayout, RefToAMissingSnapshotFindsNothing) {
  put_blob(cache_, kGitBlob, "{}");
  cache_.link_snapshot_file(kOtherCommit, "config.json", kGitBlob, true);
  cache_.write_ref("main", kCommit);  // points at a snapshot that is not here
  EXPECT_EQ(cache_.find_commit("main"), std::nullopt);
  EXPECT_EQ(cache_.find_commit("v1.0"), std::nullopt);  // refs exist, so no guessing from snapshots
}

TEST_F(CacheLayout, WithoutRefsTheNewestSnapshotWithTheMarkerIsUsed) {
  put_blob(cache_, kGitBlob, "{}");
  constexpr std::string_view kNewestWithoutConfig = "ffffffffffffffffffffffffffffffffffffffff";
  cache_.link_snapshot_file(kCommit, "config.json", kGitBlob, true);
  cache_.link_snapshot_file(kOtherCommit, "config.json", kGitBlob, true);
  fs::create_directories(cache_.snapshot_dir(kNewestWithoutConfig) / "other");
  fs::create_directories(cache_.snapshots_dir() / "not-a-commit");
  write_file(cache_.snapshots_dir() / "not-a-commit" / "config.json", "{}");
  set_mtime(cache_.snapshot_dir(kCommit), 2'000'000'000);
  set_mtime(cache_.snapshot_dir(kOtherCommit), 1'000'000'000);
  set_mtime(cache_.snapshot_dir(kNewestWithoutConfig), 2'100'000'000);
  set_mtime(cache_.snapshots_dir() / "not-a-commit", 2'100'000'000);

  EXPECT_EQ(cache_.find_commit("main"), kCommit);
  set_mtime(cache_.snapshot_dir(kOtherCommit), 2'050'000'000);
  EXPECT_EQ(cache_.find_commit("main"), kOtherCommit);

  // A GGUF-only repository names its own marker.
  put_blob(cache_, kLfsBlob, "GGUF");
  cache_.link_snapshot_file(kNewestWithoutConfig, "model-Q4_K_M.gguf", kLfsBlob, true);
  set_mtime(cache_.snapshot_dir(kNewestWithoutConfig), 2'100'000'000);
  EXPECT_EQ(cache_.find_commit("main", "model-Q4_K_M.gguf"), kNewestWithoutConfig);
  EXPECT_EQ(cache_.find_commit("main", "absent.gguf"), std::nullopt);

  // An empty refs/ folder is still "no refs"; one ref file anywhere under it ends the guessing.
  fs::create_directories(cache_.refs_dir() / "refs/pr");
  EXPECT_EQ(cache_.find_commit("main"), kOtherCommit);
  cache_.write_ref("refs/pr/7", kCommit);
  EXPECT_EQ(cache_.find_commit("main"), std::nullopt);
}

// The cache exactly as Python huggingface_hub leaves it, built by hand; fetchd must read it, and what
// fetchd writes must be the same bytes.
TEST_F(CacheLayout, ReadsAndWritesHuggingfaceHubsLayout) {
  const auto repo = hub_ / "models--org--repo";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs/refs/pr");
  fs::create_directories(repo / "snapshots" / kCommit / "sub");
  fs::create_directories(repo / ".no_exist" / kCommit);
  write_file(repo / "blobs" / kGitBlob, "{\"model_type\": \"llama\"}");
  write_file(repo / "blobs" / kLfsBlob, "weights");
  write_file(repo / "refs/main", kCommit);
  write_file(repo / "refs/refs/pr/1", kCommit);
  fs::create_symlink("../../blobs/" + std::string(kGitBlob), repo / "snapshots" / kCommit / "config.json");
  fs::create_symlink("../../../blobs/" + std::string(kLfsBlob), repo / "snapshots" / kCommit / "sub/model.safetensors");
  write_file(repo / ".no_exist" / kCommit / "generation_config.json", "");

  EXPECT_EQ(cache_.find_commit("main"), kCommit);
  EXPECT_EQ(cache_.find_commit("refs/pr/1"), kCommit);
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "config.json"));
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "sub/model.safetensors"));
  EXPECT_FALSE(cache_.snapshot_has(kCommit, "tokenizer.json"));
  EXPECT_TRUE(cache_.is_known_missing(kCommit, "generation_config.json"));
  EXPECT_TRUE(cache_.has_blob(kLfsBlob));

  // The same repository written by fetchd into a second cache: identical names, link texts and ref bytes.
  const RepoCache ours(dir_ / "ours", "org/repo");
  put_blob(ours, kGitBlob, "{\"model_type\": \"llama\"}");
  put_blob(ours, kLfsBlob, "weights");
  ours.write_ref("main", kCommit);
  ours.write_ref("refs/pr/1", kCommit);
  ours.link_snapshot_file(kCommit, "config.json", kGitBlob, true);
  ours.link_snapshot_file(kCommit, "sub/model.safetensors", kLfsBlob, true);
  ours.write_no_exist(kCommit, "generation_config.json");
  const auto strip_times = [](std::map<std::string, std::string> entries) {
    std::map<std::string, std::string> shapes;
    for (auto& [name, description] : entries) {
      const auto first = description.find(' ');
      const auto size_end = description.find(' ', first + 1);
      const auto link = description.find(" -> ");
      shapes[name] = description.substr(0, size_end) + (link == std::string::npos ? "" : description.substr(link));
    }
    return shapes;
  };
  auto theirs_shape = strip_times(listing(repo));
  auto ours_shape = strip_times(listing(ours.repo_dir()));
  // Directory sizes depend on the filesystem's history, not on the layout.
  for (auto* shapes : {&theirs_shape, &ours_shape}) {
    for (auto& [name, shape] : *shapes) {
      if (fs::is_directory(fs::symlink_status(repo / name))) shape = "dir";
    }
  }
  EXPECT_EQ(theirs_shape, ours_shape);
}

// Resolving a complete cache must never write: the volume may be read-only.
TEST_F(CacheLayout, ReadsNeverWrite) {
  put_blob(cache_, kGitBlob, "{}");
  put_blob(cache_, kLfsBlob, "weights");
  cache_.write_ref("main", kCommit);
  cache_.link_snapshot_file(kCommit, "config.json", kGitBlob, true);
  cache_.link_snapshot_file(kCommit, "a/b/model.safetensors", kLfsBlob, false);
  cache_.write_no_exist(kCommit, "generation_config.json");
  const RepoCache refless(hub_, "org/refless");
  put_blob(refless, kGitBlob, "{}");
  refless.link_snapshot_file(kOtherCommit, "config.json", kGitBlob, true);

  // Read-only for a non-root run; as root (permissions ignored) the listing comparison is the proof.
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::recursive_directory_iterator(hub_)) {
    if (entry.is_directory() && !entry.is_symlink()) dirs.push_back(entry.path());
  }
  dirs.push_back(hub_);
  for (const auto& d : dirs) fs::permissions(d, fs::perms(0555));
  const auto before = listing(hub_);

  EXPECT_EQ(cache_.find_commit("main"), kCommit);
  EXPECT_EQ(cache_.find_commit(kCommit), kCommit);
  EXPECT_EQ(cache_.find_commit("absent"), std::nullopt);
  EXPECT_EQ(cache_.read_ref("main"), kCommit);
  EXPECT_EQ(cache_.read_ref("refs/pr/9"), std::nullopt);
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "config.json"));
  EXPECT_TRUE(cache_.snapshot_has(kCommit, "a/b/model.safetensors"));
  EXPECT_FALSE(cache_.snapshot_has(kCommit, "missing.json"));
  EXPECT_TRUE(cache_.is_known_missing(kCommit, "generation_config.json"));
  EXPECT_FALSE(cache_.is_known_missing(kCommit, "config.json"));
  EXPECT_TRUE(cache_.has_blob(kLfsBlob));
  EXPECT_EQ(refless.find_commit("main"), kOtherCommit);
  const RepoCache absent(hub_, "org/absent");
  EXPECT_EQ(absent.find_commit("main"), std::nullopt);

  EXPECT_EQ(listing(hub_), before);
  EXPECT_FALSE(fs::exists(hub_ / ".locks"));
  EXPECT_FALSE(fs::exists(absent.repo_dir()));
  for (const auto& d : dirs) fs::permissions(d, fs::perms::owner_all, fs::perm_options::add);
}

TEST_F(CacheLayout, WriteErrorsNameThePathTheOperationAndTheRemedy) {
  fs::create_directories(cache_.repo_dir());
  write_file(cache_.blobs_dir(), "a file where blobs/ should be");
  write_file(dir_ / "incomplete", "x");
  const auto error = error_from([&] { cache_.publish_blob(dir_ / "incomplete", kLfsBlob); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  EXPECT_THAT(error.what(), HasSubstr("cannot create directory " + cache_.blobs_dir().string()));
  EXPECT_THAT(error.what(), HasSubstr("Not a directory (ENOTDIR)"));
  EXPECT_THAT(error.what(), HasSubstr("remove the stray file"));

  const std::string read_only = detail::io_error("write", "/cache/x", EROFS).what();
  EXPECT_THAT(read_only, HasSubstr("cannot write /cache/x: Read-only file system (EROFS)"));
  EXPECT_THAT(read_only, HasSubstr("mount it read-write"));
  EXPECT_THAT(detail::io_error("create", "/cache/y", EACCES).what(), HasSubstr("permissions of the cache"));
}

TEST_F(CacheLayout, CachedirTagIsWrittenOnce) {
  ensure_cachedir_tag(hub_);  // creates the cache directory too
  const auto tag = hub_ / "CACHEDIR.TAG";
  const auto content = read_text(tag);
  EXPECT_TRUE(content.starts_with(std::string(kCachedirTagSignature) + "\n")) << content;
  write_file(tag, std::string(kCachedirTagSignature) + "\n# someone else's\n");
  ensure_cachedir_tag(hub_);
  EXPECT_EQ(read_text(tag), std::string(kCachedirTagSignature) + "\n# someone else's\n");
  EXPECT_THAT(temporaries(hub_), ::testing::IsEmpty());
}

}  // namespace
}  // namespace fetchd::cache
