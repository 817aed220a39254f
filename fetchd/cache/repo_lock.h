#pragma once

// One writer per repository across processes and hosts: two fetchd processes (two pods on one shared
// volume) never write one blob at the same time.
//
// Acquiring takes two things, in this order, in {cache_dir}/.locks/models--org--repo/:
//  1. flock(LOCK_EX) on fetchd.lock, where the filesystem has flock (polled with LOCK_NB so max_wait holds).
//     A filesystem without it (ENOSYS on CIFS, ENOLCK, EOPNOTSUPP, EINVAL) leaves the lease alone.
//  2. Always, the lease fetchd.lease (see lease_file.h), because flock can silently grant the lock twice on
//     NFS, Lustre or GPFS. A heartbeat thread renews it; an expired lease (its holder was killed) is taken
//     over, a renewed one never is.
// Neither name collides with huggingface_hub's per-blob {id}.lock files in the same directory.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "fetchd/cache/cache_layout.h"
#include "fetchd/cache/file_ops.h"
#include "fetchd/request/fetch_error.h"

namespace fetchd::cache {

struct LockOptions {
  std::chrono::milliseconds lease_duration{30'000};  // how long a lease lives without a heartbeat
  std::chrono::milliseconds heartbeat{5'000};        // renewal period; must be shorter than lease_duration
  std::chrono::milliseconds poll{250};               // how often a waiter looks again
  std::chrono::milliseconds max_wait{std::chrono::minutes(30)};
  // Called once, when acquire() starts waiting, with a sentence naming the holder from its lease.
  std::function<void(const std::string&)> on_wait;
  // False behaves as on a filesystem without flock (tests simulate CIFS with it).
  bool use_flock = true;
};

class RepoLock {
 public:
  // Blocks until the lock is held or max_wait passes. Throws FetchError: Internal when max_wait passes
  // (naming the holder) or the lock directory cannot be made (a read-only cache that is missing files),
  // Usage for inconsistent options.
  static RepoLock acquire(const RepoCache& cache, const LockOptions& options = {});

  RepoLock(RepoLock&& other) noexcept;
  RepoLock& operator=(RepoLock&& other) noexcept;
  RepoLock(const RepoLock&) = delete;
  RepoLock& operator=(const RepoLock&) = delete;
  ~RepoLock();

  // Stops the heartbeat, removes the lease if it still names us, and unlocks. Idempotent; never throws
  // (a lease left behind expires by itself).
  void release() noexcept;

  bool held() const { return state_ != nullptr; }
  // True once the heartbeat found the lease taken over, or could not renew it before it expired. A writer
  // checks this before publishing anything: another process may be writing the same files.
  bool lost() const;
  bool uses_flock() const;
  const std::string& holder_id() const;  // what our lease file names
  std::filesystem::path lease_path() const;

 private:
  struct State;
  explicit RepoLock(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// huggingface_hub's own lock for one blob ({locks_dir}/{blob_id}.lock), held while fetchd writes
// blobs/{blob_id}.incomplete: older Python processes append to that same partial file, so each waits for the
// other. Where flock is unsupported this holds nothing (the repository lease still orders fetchd processes).
class BlobFileLock {
 public:
  // Waits up to options.max_wait. Throws FetchError(Internal) naming the lock file on timeout.
  static BlobFileLock acquire(const RepoCache& cache, std::string_view blob_id, const LockOptions& options = {});
  BlobFileLock(BlobFileLock&&) noexcept = default;
  BlobFileLock& operator=(BlobFileLock&&) noexcept = default;
  ~BlobFileLock() = default;  // closing the descriptor releases the flock

 private:
  explicit BlobFileLock(detail::UniqueFd fd) : fd_(std::move(fd)) {}
  detail::UniqueFd fd_;
};

// Whether flock() works in `dir` (probed on a temporary file there, which is removed). Throws FetchError
// when the directory cannot hold the probe.
bool flock_supported(const std::filesystem::path& dir);

namespace detail {
// The error for a lock directory that cannot be made; read-only volumes get their own explanation.
FetchError lock_directory_error(const std::filesystem::path& dir, const std::filesystem::path& failed_at,
                                std::string_view repo_id, int err);
}  // namespace detail

}  // namespace fetchd::cache
