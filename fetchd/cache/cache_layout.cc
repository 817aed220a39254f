#include "fetchd/cache/cache_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>
#include <vector>

#include "fetchd/cache/file_ops.h"
#include "fetchd/request/fetch_error.h"

namespace fetchd::cache {

using request::is_commit_hash;
using engine::format::is_safe_relative_path;

namespace {

using detail::io_error;
using detail::UniqueFd;

// Quotes text for a message: control bytes escaped (a ref's stray "\n" must be visible), long text cut.
std::string shown(std::string_view text) {
  static constexpr std::size_t kMaxShown = 80;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out + "'";
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

void check_commit(std::string_view commit) {
  if (!is_commit_hash(commit)) {
    throw FetchError(ErrorKind::Usage, shown(commit) +
                                           " is not a 40-character lowercase commit hash; snapshots are named by "
                                           "the full commit the hub reports");
  }
}

void check_relative_path(std::string_view what, std::string_view path, const std::filesystem::path& base) {
  if (!is_safe_relative_path(path)) {
    throw FetchError(ErrorKind::Usage, std::string(what) + " " + shown(path) +
                                           " is not a safe relative path (empty, absolute, or with an empty, '.' "
                                           "or '..' component); it is refused so nothing lands outside " +
                                           base.string());
  }
}

void check_blob_id(std::string_view id) {
  if (!is_safe_blob_id(id)) {
    throw FetchError(ErrorKind::Usage, "blob id " + shown(id) +
                                           " cannot name a file in blobs/: use the hex etag, or another name of "
                                           "[A-Za-z0-9._-] that does not start with '.' or end in '.incomplete'");
  }
}

// ../ per directory between the entry and the repository folder: snapshots/{commit}/ is two, and each
// '/' in the relative path adds one, exactly as os.path.relpath gives huggingface_hub.
std::string relative_blob_target(std::string_view relpath, std::string_view blob_id) {
  std::string target;
  const auto depth = 2 + static_cast<std::size_t>(std::count(relpath.begin(), relpath.end(), '/'));
  for (std::size_t i = 0; i < depth; ++i) target += "../";
  return target + "blobs/" + std::string(blob_id);
}

// symlink() refusals that mean "this filesystem has no symlinks here" rather than a real failure.
bool symlinks_unsupported(int err) {
  return err == EPERM || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

void rename_or_throw(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    ::unlink(from.c_str());
    throw io_error("replace", to, err);
  }
}

// Creates a symlink at a fresh temporary name and renames it over the entry, so a reader sees the old
// entry or the new link and never a missing file. Returns 0, or the errno symlink() refused with.
int try_place_symlink(const std::filesystem::path& entry, const std::string& target) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto temp = detail::temp_sibling(entry);
    if (::symlink(target.c_str(), temp.c_str()) != 0) {
      if (errno == EEXIST) continue;
      return errno;
    }
    rename_or_throw(temp, entry);
    return 0;
  }
  return EEXIST;
}

int copy_bytes(int in, int out) {
  bool copied_any = false;
  for (;;) {
    // copy_file_range lets the filesystem share extents or copy server-side (NFS 4.2); read/write is the
    // fallback where the kernel or filesystem does not offer it.
    const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, std::size_t{1} << 30, 0);
    if (n > 0) {
      copied_any = true;
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (copied_any || (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)) return errno;
    break;
  }
  std::vector<char> buffer(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    for (ssize_t written = 0; written < n;) {
      const ssize_t w = ::write(out, buffer.data() + written, static_cast<std::size_t>(n - written));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      written += w;
    }
  }
}

// Copies `blob` to `temp` (which must not exist) and flushes it.
void copy_blob(const std::filesystem::path& blob, const std::filesystem::path& temp) {
  UniqueFd in(::open(blob.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) throw io_error("open", blob, errno);
  UniqueFd out(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!out) throw io_error("create", temp, errno);
  int err = copy_bytes(in.get(), out.get());
  if (err == 0 && ::fsync(out.get()) != 0) err = errno;
  if (err == 0 && ::close(out.release()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    throw io_error("copy " + blob.string() + " to", temp, err);
  }
}

// A real file at the entry: a hard link to the blob where the filesystem allows it (no bytes copied),
// otherwise a copy. Placed by rename, like the symlink.
void place_real_file(const std::filesystem::path& blob, const std::filesystem::path& entry) {
  auto temp = detail::temp_sibling(entry);
  bool linked = false;
  for (int attempt = 0; attempt < 8 && !linked; ++attempt) {
    if (::link(blob.c_str(), temp.c_str()) == 0) {
      linked = true;
    } else if (errno == EEXIST) {
      temp = detail::temp_sibling(entry);
    } else {
      break;
    }
  }
  if (!linked) copy_blob(blob, temp);
  rename_or_throw(temp, entry);
  // When the entry already was a hard link to this blob, rename() of two names of one inode succeeds
  // without doing anything (POSIX), leaving the temporary behind: remove it.
  ::unlink(temp.c_str());
}

struct SnapshotCandidate {
  struct timespec mtime {};
  std::string commit;

  bool newer_than(const SnapshotCandidate& other) const {
    if (mtime.tv_sec != other.mtime.tv_sec) return mtime.tv_sec > other.mtime.tv_sec;
    if (mtime.tv_nsec != other.mtime.tv_nsec) return mtime.tv_nsec > other.mtime.tv_nsec;
    return commit > other.commit;  // a deterministic answer when two directories share an mtime
  }
};

bool ignorable_for_tag(int err) {
  return err == EROFS || err == EACCES || err == EPERM;
}

}  // namespace

std::string repo_folder_name(std::string_view repo_id) {
  std::string name = "models--";
  for (const char c : repo_id) {
    if (c == '/') {
      name += "--";
    } else {
      name += c;
    }
  }
  return name;
}

bool is_safe_blob_id(std::string_view id) {
  if (id.empty() || id.size() > 200 || id.front() == '.' || id.ends_with(".incomplete")) return false;
  for (const char c : id) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

void ensure_cachedir_tag(const std::filesystem::path& cache_dir) {
  const auto tag = cache_dir / "CACHEDIR.TAG";
  struct stat st {};
  if (::lstat(tag.c_str(), &st) == 0) return;
  std::filesystem::path failed_dir;
  if (const int err = detail::try_make_directories(cache_dir, &failed_dir); err != 0) {
    if (ignorable_for_tag(err)) return;
    throw io_error("create directory", failed_dir, err);
  }
  const std::string content = std::string(kCachedirTagSignature) +
                              "\n# This file is a cache directory tag created by fetchd (Hugging Face hub cache).\n"
                              "# For information about cache directory tags, see https://bford.info/cachedir/\n";
  if (const int err = detail::try_write_file_atomically(tag, content, false); err != 0 && !ignorable_for_tag(err)) {
    throw io_error("write", tag, err);
  }
}

RepoCache::RepoCache(std::filesystem::path cache_dir, std::string repo_id)
    : cache_dir_(std::move(cache_dir)), repo_id_(std::move(repo_id)) {
  const auto slash = repo_id_.find('/');
  const bool two_parts_at_most = slash == std::string::npos || repo_id_.find('/', slash + 1) == std::string::npos;
  bool valid = two_parts_at_most && is_safe_relative_path(repo_id_);
  for (const char c : repo_id_) valid = valid && (c == '/' || is_name_char(c));
  if (!valid) {
    throw FetchError(ErrorKind::Usage, "repository id " + shown(repo_id_) +
                                           " is not of the form 'org/name' or 'name' with characters "
                                           "[A-Za-z0-9._-]; it cannot name a cache folder");
  }
  repo_dir_ = cache_dir_ / repo_folder_name(repo_id_);
}

std::filesystem::path RepoCache::blob_path(std::string_view blob_id) const {
  check_blob_id(blob_id);
  return blobs_dir() / blob_id;
}

std::filesystem::path RepoCache::incomplete_path(std::string_view blob_id) const {
  check_blob_id(blob_id);
  return blobs_dir() / (std::string(blob_id) + ".incomplete");
}

std::filesystem::path RepoCache::snapshot_dir(std::string_view commit) const {
  check_commit(commit);
  return snapshots_dir() / commit;
}

std::filesystem::path RepoCache::snapshot_file(std::string_view commit, std::string_view relpath) const {
  const auto dir = snapshot_dir(commit);
  check_relative_path("repository path", relpath, dir);
  return dir / relpath;
}

std::filesystem::path RepoCache::ref_path(std::string_view name) const {
  check_relative_path("ref name", name, refs_dir());
  return refs_dir() / name;
}

std::filesystem::path RepoCache::no_exist_path(std::string_view commit, std::string_view relpath) const {
  check_commit(commit);
  const auto dir = repo_dir_ / ".no_exist" / commit;
  check_relative_path("repository path", relpath, dir);
  return dir / relpath;
}

std::filesystem::path RepoCache::locks_dir() const {
  return cache_dir_ / ".locks" / repo_folder_name(repo_id_);
}

std::filesystem::path RepoCache::listing_path(std::string_view commit) const {
  check_commit(commit);
  return repo_dir_ / ".fetchd-listings" / (std::string(commit) + ".json");
}

// A listing of a million files is some hundreds of megabytes; real ones are far smaller.
constexpr std::size_t kMaxListingBytes = 256u << 20;

std::optional<std::string> RepoCache::read_listing(std::string_view commit) const {
  return detail::read_small_file(listing_path(commit), kMaxListingBytes);
}

void RepoCache::write_listing(std::string_view commit, std::string_view json) const {
  const auto path = listing_path(commit);
  detail::make_directories(path.parent_path());
  detail::write_file_atomically(path, json, /*durable=*/true);
}

std::filesystem::path RepoCache::blob_lock_path(std::string_view blob_id) const {
  check_blob_id(blob_id);
  return locks_dir() / (std::string(blob_id) + ".lock");
}

std::optional<std::string> RepoCache::read_ref(std::string_view name) const {
  const auto path = ref_path(name);
  auto content = detail::read_small_file(path, 64);
  if (!content) return std::nullopt;
  if (!is_commit_hash(*content)) {
    throw FetchError(ErrorKind::Integrity,
                     "the ref file " + path.string() + " holds " + shown(*content) +
                         ", not a bare 40-character lowercase commit hash (huggingface_hub writes no newline), so "
                         "it is not trusted: delete it and fetch the repository once online to write it again");
  }
  return content;
}

bool RepoCache::has_blob(std::string_view blob_id) const {
  return detail::is_regular_file_at(blob_path(blob_id));
}

bool RepoCache::snapshot_has(std::string_view commit, std::string_view relpath) const {
  return detail::is_regular_file_at(snapshot_file(commit, relpath));
}

bool RepoCache::is_known_missing(std::string_view commit, std::string_view relpath) const {
  return detail::is_regular_file_at(no_exist_path(commit, relpath));
}

std::optional<std::string> RepoCache::find_commit(std::string_view revision) const {
  return find_commit(revision, "config.json");
}

std::optional<std::string> RepoCache::find_commit(std::string_view revision, std::string_view marker_file) const {
  check_relative_path("marker file", marker_file, snapshots_dir());
  if (is_commit_hash(revision)) {
    if (detail::is_directory_at(snapshot_dir(revision))) return std::string(revision);
    return std::nullopt;
  }
  if (!is_safe_relative_path(revision)) {
    throw FetchError(ErrorKind::Usage, "revision " + shown(revision) +
                                           " is neither a commit hash nor a branch, tag or ref name (it has an "
                                           "empty, '.' or '..' component)");
  }
  if (auto commit = read_ref(revision)) {
    if (detail::is_directory_at(snapshot_dir(*commit))) return commit;
    return std::nullopt;
  }

  // Any file under refs/ means refs are kept here, so a missing one is a real miss, not a tool that skips
  // refs; guessing a snapshot then could serve another revision's files.
  std::error_code ec;
  std::filesystem::recursive_directory_iterator refs(refs_dir(), ec);
  if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR) throw io_error("list", refs_dir(), ec.value());
  for (; !ec && refs != std::filesystem::recursive_directory_iterator(); refs.increment(ec)) {
    if (!refs->is_directory(ec)) return std::nullopt;
  }
  if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR) throw io_error("list", refs_dir(), ec.value());

  std::optional<SnapshotCandidate> newest;
  std::filesystem::directory_iterator snapshots(snapshots_dir(), ec);
  if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR) throw io_error("list", snapshots_dir(), ec.value());
  for (; !ec && snapshots != std::filesystem::directory_iterator(); snapshots.increment(ec)) {
    const auto name = snapshots->path().filename().string();
    if (!is_commit_hash(name) || !snapshot_has(name, marker_file)) continue;
    struct stat st {};
    if (::stat(snapshots->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    SnapshotCandidate candidate{st.st_mtim, name};
    if (!newest || candidate.newer_than(*newest)) newest = std::move(candidate);
  }
  if (ec && ec.value() != ENOENT) throw io_error("list", snapshots_dir(), ec.value());
  if (!newest) return std::nullopt;
  return newest->commit;
}

void RepoCache::write_ref(std::string_view name, std::string_view commit) const {
  check_commit(commit);
  const auto path = ref_path(name);
  detail::make_directories(path.parent_path());
  detail::write_file_atomically(path, commit, /*durable=*/true);
}

void RepoCache::publish_blob(const std::filesystem::path& proven_incomplete, std::string_view blob_id) const {
  const auto blob = blob_path(blob_id);
  struct stat st {};
  if (::lstat(proven_incomplete.c_str(), &st) != 0) throw io_error("publish", proven_incomplete, errno);
  if (!S_ISREG(st.st_mode)) {
    throw FetchError(ErrorKind::Internal, "cannot publish " + proven_incomplete.string() + " as " + blob.string() +
                                              ": it is not a regular file; nothing was published");
  }
  detail::make_directories(blobs_dir());
  {
    // Flush the data before the rename gives it its final name: after a crash a blob name must never
    // point at a file whose bytes were still in the page cache.
    UniqueFd fd(::open(proven_incomplete.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw io_error("open", proven_incomplete, errno);
    if (::fsync(fd.get()) != 0) throw io_error("flush", proven_incomplete, errno);
  }
  if (::rename(proven_incomplete.c_str(), blob.c_str()) != 0) {
    throw io_error("rename " + proven_incomplete.string() + " to", blob, errno);
  }
  detail::sync_directory(blobs_dir());
}

LinkMode RepoCache::link_snapshot_file(std::string_view commit, std::string_view relpath, std::string_view blob_id,
                                       bool allow_symlinks) const {
  const auto entry = snapshot_file(commit, relpath);
  const auto blob = blob_path(blob_id);
  if (!detail::is_regular_file_at(blob)) {
    throw FetchError(ErrorKind::Internal, "cannot make snapshot entry " + entry.string() + ": its blob " +
                                              blob.string() + " is missing; publish the blob before linking it");
  }
  detail::make_directories(entry.parent_path());
  if (allow_symlinks) {
    const int err = try_place_symlink(entry, relative_blob_target(relpath, blob_id));
    if (err == 0) return LinkMode::Symlink;
    if (!symlinks_unsupported(err)) throw io_error("create symlink", entry, err);
  }
  place_real_file(blob, entry);
  return LinkMode::Copy;
}

void RepoCache::write_no_exist(std::string_view commit, std::string_view relpath) const {
  const auto marker = no_exist_path(commit, relpath);
  detail::make_directories(marker.parent_path());
  UniqueFd fd(::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666));
  if (!fd) throw io_error("create", marker, errno);
}

}  // namespace fetchd::cache
