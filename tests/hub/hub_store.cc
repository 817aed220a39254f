#include "tests/hub/hub_store.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "tests/hub/hub_hashing.h"

namespace testing_support::hub {
namespace {

bool is_commit_id(std::string_view text) {
  return text.size() == 40 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Paths are repository-relative with '/' separators, as the hub lists them.
void check_path(const std::string& path) {
  const auto refuse = [&](const char* why) {
    throw std::invalid_argument("test hub: file path '" + path + "' " + why);
  };
  if (path.empty()) refuse("is empty");
  if (path.front() == '/' || path.back() == '/') refuse("must not start or end with '/'");
  if (path.find('\0') != std::string::npos) refuse("contains a NUL byte");
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view segment(path.data() + start, end - start);
    if (segment.empty() || segment == "." || segment == "..") refuse("has an empty, '.' or '..' segment");
    start = end + 1;
  }
}

// `xet_store` is non-null when the file is to be stored as Xet.
StoredFile store_file(HubFile file, XetStore* xet_store) {
  check_path(file.path);
  StoredFile stored;
  stored.path = std::move(file.path);
  stored.lfs = file.lfs || xet_store != nullptr;
  stored.content = std::make_shared<const std::string>(std::move(file.content));
  if (stored.lfs) {
    stored.lfs_sha256 = sha256_hex(*stored.content);
    const std::string pointer = lfs_pointer_text(stored.lfs_sha256, stored.content->size());
    stored.pointer_size = pointer.size();
    stored.oid = git_blob_oid(pointer);
    if (xet_store != nullptr) stored.xet = xet_store->add(*stored.content);
  } else {
    stored.oid = git_blob_oid(*stored.content);
  }
  return stored;
}

// Deterministic, like git's: the same parent and tree always give the same id.
std::string commit_id(const std::string& parent, const std::map<std::string, StoredFile>& files) {
  std::string description = "parent " + parent + "\n";
  for (const auto& [path, file] : files) description += file.oid + " " + path + "\n";
  return sha1_hex(description);
}

}  // namespace

std::shared_ptr<const Commit> Repository::find_commit(std::string_view revision) const {
  // HEAD names the default branch, as the hub's revision endpoint accepts it.
  const std::string name = revision == "HEAD" ? std::string("main") : std::string(revision);
  if (const auto branch = branches.find(name); branch != branches.end()) return commits.at(branch->second);
  if (const auto tag = tags.find(name); tag != tags.end()) return commits.at(tag->second);
  if (is_commit_id(name)) {
    if (const auto commit = commits.find(name); commit != commits.end()) return commit->second;
  }
  return nullptr;
}

std::shared_ptr<Repository> HubStore::copy_for_update(const std::string& repo_id) {
  if (repo_id.empty()) throw std::invalid_argument("test hub: empty repository id");
  const auto found = repositories_.find(repo_id);
  if (found == repositories_.end()) {
    auto created = std::make_shared<Repository>();
    created->id = repo_id;
    return created;
  }
  return std::make_shared<Repository>(*found->second);
}

std::string HubStore::commit(const std::string& repo_id, const std::string& branch, std::vector<HubFile> files) {
  if (branch.empty()) throw std::invalid_argument("test hub: empty branch name");
  // Hash outside the lock: large files take a while and requests should keep flowing.
  const bool lfs_as_xet = [&] {
    std::lock_guard lock(mutex_);
    return lfs_as_xet_;
  }();
  auto commit = std::make_shared<Commit>();
  for (HubFile& file : files) {
    const bool as_xet = file.xet || (file.lfs && lfs_as_xet);
    StoredFile stored = store_file(std::move(file), as_xet ? &xet_ : nullptr);
    const std::string path = stored.path;
    if (!commit->files.emplace(path, std::move(stored)).second) {
      throw std::invalid_argument("test hub: file path '" + path + "' appears twice in one commit");
    }
  }
  // A path cannot be a file and a directory at once ("a" and "a/b"); sorted order puts "a/..." after "a",
  // though other names ("a.txt") may sit between them.
  for (const auto& [path, file] : commit->files) {
    const auto first_inside = commit->files.lower_bound(path + "/");
    if (first_inside != commit->files.end() && first_inside->first.starts_with(path + "/")) {
      throw std::invalid_argument("test hub: '" + path + "' is both a file and a directory");
    }
  }

  std::lock_guard lock(mutex_);
  std::shared_ptr<Repository> repository = copy_for_update(repo_id);
  if (const auto head = repository->branches.find(branch); head != repository->branches.end()) {
    commit->parent = head->second;
  } else if (const auto main = repository->branches.find("main"); main != repository->branches.end()) {
    commit->parent = main->second;
  }
  commit->id = commit_id(commit->parent, commit->files);
  for (const auto& [path, file] : commit->files) {
    if (file.lfs) lfs_objects_.try_emplace(file.lfs_sha256, file.content);
  }
  repository->branches[branch] = commit->id;
  repository->commits.try_emplace(commit->id, commit);
  repositories_[repo_id] = std::move(repository);
  return commit->id;
}

void HubStore::tag(const std::string& repo_id, const std::string& tag, const std::string& revision) {
  if (tag.empty()) throw std::invalid_argument("test hub: empty tag name");
  std::lock_guard lock(mutex_);
  if (!repositories_.contains(repo_id)) throw std::invalid_argument("test hub: no repository '" + repo_id + "'");
  std::shared_ptr<Repository> repository = copy_for_update(repo_id);
  const std::shared_ptr<const Commit> target = repository->find_commit(revision);
  if (target == nullptr) {
    throw std::invalid_argument("test hub: repository '" + repo_id + "' has no revision '" + revision + "'");
  }
  repository->tags[tag] = target->id;
  repositories_[repo_id] = std::move(repository);
}

void HubStore::set_gated(const std::string& repo_id, bool gated) {
  std::lock_guard lock(mutex_);
  std::shared_ptr<Repository> repository = copy_for_update(repo_id);
  repository->gated = gated;
  repositories_[repo_id] = std::move(repository);
}

void HubStore::set_token(std::string token) {
  std::lock_guard lock(mutex_);
  token_ = std::move(token);
}

void HubStore::set_store_lfs_as_xet(bool on) {
  std::lock_guard lock(mutex_);
  lfs_as_xet_ = on;
}

void HubStore::set_xet_options(const XetStoreOptions& options) {
  xet_.set_options(options);
}

std::shared_ptr<const Repository> HubStore::repository(std::string_view repo_id) const {
  std::lock_guard lock(mutex_);
  const auto found = repositories_.find(repo_id);
  return found == repositories_.end() ? nullptr : found->second;
}

std::shared_ptr<const std::string> HubStore::lfs_object(std::string_view sha256) const {
  std::lock_guard lock(mutex_);
  const auto found = lfs_objects_.find(sha256);
  return found == lfs_objects_.end() ? nullptr : found->second;
}

std::string HubStore::token() const {
  std::lock_guard lock(mutex_);
  return token_;
}

}  // namespace testing_support::hub
