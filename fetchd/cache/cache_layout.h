#pragma once

// The standard Hugging Face hub cache, byte-compatible with Python huggingface_hub in both directions:
//
//   {cache_dir}/models--{org}--{name}/
//     refs/{revision}                 40-hex commit, no trailing newline (refs/pr/1 is nested)
//     blobs/{id}                      file content; blobs/{id}.incomplete while it downloads
//     snapshots/{commit}/{path}       relative symlink ../../blobs/{id}, or a real file without symlinks
//     .no_exist/{commit}/{path}       empty marker: the file does not exist at that commit
//   {cache_dir}/.locks/models--{org}--{name}/
//
// Reading never writes: a complete cache on a read-only volume resolves. Every write is atomic (temporary
// sibling + rename), so a concurrent reader, or a process killed mid-write, never leaves a torn entry.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "engine/format/safetensors_index.h"  // is_safe_relative_path
#include "fetchd/request/model_reference.h"    // is_commit_hash

namespace fetchd::cache {

// "org/repo" -> "models--org--repo"; "gpt2" -> "models--gpt2".
std::string repo_folder_name(std::string_view repo_id);

// A blob id usable as one file name: [A-Za-z0-9._-], not starting with '.', not ending in ".incomplete"
// (which would alias another blob's partial file), at most 200 characters.
bool is_safe_blob_id(std::string_view id);

// How a snapshot entry was made.
enum class LinkMode {
  Symlink,  // relative symlink into blobs/, as huggingface_hub makes it
  Copy,     // a real file (hard link or copy of the blob): symlinks disallowed or unsupported here
};

// The CACHEDIR.TAG signature line (https://bford.info/cachedir/): backup tools skip a tagged directory.
inline constexpr std::string_view kCachedirTagSignature = "Signature: 8a477f597d28d172789f06886806bc55";

// Writes {cache_dir}/CACHEDIR.TAG when absent, creating cache_dir if needed. The tag is a courtesy: a
// read-only or foreign-owned cache (EROFS, EACCES, EPERM) is left untagged without an error.
void ensure_cachedir_tag(const std::filesystem::path& cache_dir);

// One model repository inside one cache root. Names passed in (commits, paths, ref names, blob ids) are
// checked, and a name that could escape its folder throws FetchError(Usage); I/O failures throw
// FetchError(Internal) naming the path, the operation, errno and the remedy.
class RepoCache {
 public:
  RepoCache(std::filesystem::path cache_dir, std::string repo_id);

  const std::filesystem::path& cache_dir() const { return cache_dir_; }
  const std::string& repo_id() const { return repo_id_; }

  // ---- Paths (pure: nothing is read or written) ----
  const std::filesystem::path& repo_dir() const { return repo_dir_; }
  std::filesystem::path blobs_dir() const { return repo_dir_ / "blobs"; }
  std::filesystem::path blob_path(std::string_view blob_id) const;
  std::filesystem::path incomplete_path(std::string_view blob_id) const;  // blobs/{id}.incomplete
  std::filesystem::path snapshots_dir() const { return repo_dir_ / "snapshots"; }
  std::filesystem::path snapshot_dir(std::string_view commit) const;
  std::filesystem::path snapshot_file(std::string_view commit, std::string_view relpath) const;
  std::filesystem::path refs_dir() const { return repo_dir_ / "refs"; }
  std::filesystem::path ref_path(std::string_view name) const;  // refs/main, refs/pr/1
  std::filesystem::path no_exist_path(std::string_view commit, std::string_view relpath) const;
  std::filesystem::path locks_dir() const;
  // fetchd's record of a commit's whole file listing, in a folder of the repository that cache scanners
  // (huggingface_hub, huggingface.js) ignore: with it, a later run tells a complete snapshot from one that
  // only looks complete.
  std::filesystem::path listing_path(std::string_view commit) const;  // {cache_dir}/.locks/models--org--repo
  // huggingface_hub's per-blob flock file; a writer of blobs/{id}.incomplete should hold it too so an
  // older Python process (which appends to the same .incomplete name) never writes it at the same time.
  std::filesystem::path blob_lock_path(std::string_view blob_id) const;

  // ---- Reads (never write) ----
  // The commit a ref names; nullopt when the ref does not exist. A ref whose content is not exactly 40
  // lowercase hex digits (a trailing newline included) throws FetchError(Integrity) naming the file.
  std::optional<std::string> read_ref(std::string_view name) const;
  bool has_blob(std::string_view blob_id) const;
  // The entry exists and, when it is a symlink, what it points at exists (a real file counts by itself).
  bool snapshot_has(std::string_view commit, std::string_view relpath) const;
  bool is_known_missing(std::string_view commit, std::string_view relpath) const;
  // The recorded listing of `commit` (JSON, as write_listing stored it), or nullopt.
  std::optional<std::string> read_listing(std::string_view commit) const;

  // Offline lookup of the commit to serve for `revision`, in this order:
  //  1. a 40-hex revision whose snapshot directory exists: itself (and nothing else for a 40-hex revision);
  //  2. refs/{revision}, when its commit's snapshot directory exists (a ref to a missing snapshot: nothing);
  //  3. only when the repository has no refs at all (tools that write snapshots but skip refs), for any
  //     named revision: the most recently modified snapshot directory holding `marker_file` (config.json,
  //     or a GGUF file's name).
  std::optional<std::string> find_commit(std::string_view revision) const;
  std::optional<std::string> find_commit(std::string_view revision, std::string_view marker_file) const;

  // ---- Writes (atomic) ----
  // Writes the commit with no trailing newline: temporary file in refs/, fsync, rename.
  void write_ref(std::string_view name, std::string_view commit) const;
  // Renames a finished, proven download into blobs/{id} (after fsync, so the name never precedes the data).
  void publish_blob(const std::filesystem::path& proven_incomplete, std::string_view blob_id) const;
  // Makes snapshots/{commit}/{relpath} point at blobs/{id}, replacing any entry there atomically. With
  // allow_symlinks false, or where symlink() is refused (EPERM, EOPNOTSUPP, ENOSYS, EINVAL: CIFS, some
  // container volumes), the entry is a real file (hard link, else copy) and LinkMode::Copy is returned so
  // the caller can log the switch once per cache directory. The blob must already be published.
  LinkMode link_snapshot_file(std::string_view commit, std::string_view relpath, std::string_view blob_id,
                              bool allow_symlinks) const;
  // The empty .no_exist marker huggingface_hub uses to remember a file that a commit does not have.
  void write_no_exist(std::string_view commit, std::string_view relpath) const;
  // Records the listing of `commit`, atomically.
  void write_listing(std::string_view commit, std::string_view json) const;

 private:
  std::filesystem::path cache_dir_;
  std::string repo_id_;
  std::filesystem::path repo_dir_;
};

}  // namespace fetchd::cache
