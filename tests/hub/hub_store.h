#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tests/hub/hub_xet_store.h"
#include "tests/hub/test_hub.h"

namespace testing_support::hub {

// One file of one commit, with the ids the hub announces for it.
struct StoredFile {
  std::string path;
  std::shared_ptr<const std::string> content;  // shared: commits and the LFS store hold one copy
  bool lfs = false;
  std::string oid;                     // git blob SHA-1 of the content, or of the pointer text for an LFS file
  std::string lfs_sha256;              // LFS files: SHA-256 of the content
  std::size_t pointer_size = 0;        // LFS files: size of the git-lfs pointer text
  std::shared_ptr<const XetFile> xet;  // Xet files (which are LFS files too): how Xet stores the content

  std::size_t size() const { return content->size(); }
};

struct Commit {
  std::string id;
  std::string parent;                       // empty for a root commit
  std::map<std::string, StoredFile> files;  // by path, so listings come out sorted
};

// A repository as it stood at one moment. Published copies are never modified (a change publishes a new
// copy), so a request keeps a consistent view while the test goes on committing.
struct Repository {
  std::string id;
  bool gated = false;
  std::map<std::string, std::string> branches;  // name -> commit id
  std::map<std::string, std::string> tags;      // name -> commit id
  std::map<std::string, std::shared_ptr<const Commit>> commits;

  // `revision` is a branch, a tag or a full commit id; null when it names nothing here.
  std::shared_ptr<const Commit> find_commit(std::string_view revision) const;
};

// Everything the hub serves: repositories, the LFS objects and Xet xorbs behind them, and the accepted token.
class HubStore {
 public:
  // Adds a commit whose tree is exactly `files` on `branch` (created from main's head when absent, as the
  // hub creates branches) and returns its id. Throws std::invalid_argument for unusable paths.
  std::string commit(const std::string& repo_id, const std::string& branch, std::vector<HubFile> files);
  // `revision` is a commit id, branch or tag of the repository.
  void tag(const std::string& repo_id, const std::string& tag, const std::string& revision);
  void set_gated(const std::string& repo_id, bool gated);
  void set_token(std::string token);
  // LFS files committed afterwards are stored as Xet.
  void set_store_lfs_as_xet(bool on);
  void set_xet_options(const XetStoreOptions& options);

  std::shared_ptr<const Repository> repository(std::string_view repo_id) const;
  const XetStore& xet() const { return xet_; }
  std::shared_ptr<const std::string> lfs_object(std::string_view sha256) const;
  std::string token() const;

 private:
  std::shared_ptr<Repository> copy_for_update(const std::string& repo_id);  // caller holds mutex_

  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Repository>, std::less<>> repositories_;
  std::map<std::string, std::shared_ptr<const std::string>, std::less<>> lfs_objects_;
  std::string token_;
  bool lfs_as_xet_ = false;
  XetStore xet_;  // locks itself
};

}  // namespace testing_support::hub
