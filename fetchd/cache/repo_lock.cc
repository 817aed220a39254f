#include "fetchd/cache/repo_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

#include "fetchd/cache/file_ops.h"
#include "fetchd/cache/lease_file.h"

namespace fetchd::cache {

namespace {

using detail::io_error;
using detail::UniqueFd;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kFlockFileName = "fetchd.lock";
constexpr std::string_view kLeaseFileName = "fetchd.lease";

// flock() errors that mean "no flock on this filesystem", not "held by someone".
bool flock_unsupported(int err) {
  return err == ENOSYS || err == ENOLCK || err == EOPNOTSUPP || err == EINVAL;
}

std::string format_duration(milliseconds duration) {
  const auto ms = duration.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms < 120'000) {
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), "%.1f s", static_cast<double>(ms) / 1000.0);
    return text.data();
  }
  return std::to_string(ms / 60'000) + " min";
}

// Who holds the lock, as far as the lease file tells, for the wait notice and the timeout error.
std::string describe_holder(const std::optional<LeaseRecord>& lease, const std::filesystem::path& lease_path,
                            const std::filesystem::path& flock_path) {
  if (!lease) return "it is held through " + flock_path.string() + " by a process that has not written a lease yet";
  if (!lease->holder) {
    return "it is held by a process whose lease " + lease_path.string() + " is unreadable or still being written";
  }
  const auto remaining = lease->expires_unix_ms - unix_now_ms();
  const auto expiry = remaining >= 0 ? "expires in " + format_duration(milliseconds(remaining))
                                     : "expired " + format_duration(milliseconds(-remaining)) + " ago";
  return "it is held by " + *lease->holder + " (host:pid:id; its lease " + lease_path.string() + " " + expiry + ")";
}

void check_options(const LockOptions& options) {
  const bool valid = options.lease_duration.count() > 0 && options.heartbeat.count() > 0 &&
                     options.heartbeat < options.lease_duration && options.poll.count() > 0 &&
                     options.max_wait.count() >= 0;
  if (!valid) {
    throw FetchError(ErrorKind::Usage, "lock options need 0 < heartbeat (" + format_duration(options.heartbeat) +
                                           ") < lease duration (" + format_duration(options.lease_duration) +
                                           "), a positive poll interval and a non-negative maximum wait");
  }
}

// now + max_wait, saturated: a caller may pass milliseconds::max() to mean "wait for ever".
SteadyClock::time_point deadline_after(milliseconds max_wait) {
  const auto now = SteadyClock::now();
  if (max_wait >= std::chrono::duration_cast<milliseconds>(SteadyClock::time_point::max() - now)) {
    return SteadyClock::time_point::max();
  }
  return now + max_wait;
}

// The waiting side of acquire(): announces the wait once, enforces max_wait, sleeps one poll interval.
class Waiter {
 public:
  Waiter(const RepoCache& cache, const LockOptions& options)
      : cache_(cache), options_(options), deadline_(deadline_after(options.max_wait)) {}

  void wait(const std::string& holder) {
    if (!announced_) {
      announced_ = true;
      if (options_.on_wait) {
        options_.on_wait("waiting for the lock on repository '" + cache_.repo_id() + "': " + holder +
                         "; waiting up to " + format_duration(options_.max_wait));
      }
    }
    const auto now = SteadyClock::now();
    if (now >= deadline_) {
      throw FetchError(ErrorKind::Internal,
                       "gave up after " + format_duration(options_.max_wait) + " waiting for the lock on repository '" +
                           cache_.repo_id() + "': " + holder +
                           ". Another fetchd (perhaps in another pod on this volume) is still fetching it: retry "
                           "later or allow a longer wait. If that process is gone, its lease expires by itself; "
                           "the lock files are in " +
                           cache_.locks_dir().string());
    }
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(options_.poll, deadline_ - now));
  }

 private:
  const RepoCache& cache_;
  const LockOptions& options_;
  SteadyClock::time_point deadline_;
  bool announced_ = false;
};

// Opens the flock file for writing where possible: NFS emulates flock with write locks, which need it.
UniqueFd open_flock_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (!fd && errno == EACCES) fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw io_error("open the lock file", path, errno);
  return fd;
}

}  // namespace

struct RepoLock::State {
  State(std::filesystem::path lease_path, std::string holder_id, const LockOptions& options)
      : lease(std::move(lease_path)),
        holder(std::move(holder_id)),
        lease_duration(options.lease_duration),
        heartbeat_period(options.heartbeat) {}

  LeaseFile lease;
  std::string holder;
  milliseconds lease_duration;
  milliseconds heartbeat_period;
  UniqueFd flock_fd;
  std::int64_t expires_unix_ms = 0;  // of the last lease we wrote; only the heartbeat thread updates it
  std::atomic<bool> lost{false};
  std::mutex mutex;
  std::condition_variable_any wake;
  std::jthread heartbeat;  // last: joined before the members it uses are destroyed

  void run_heartbeat(const std::stop_token& stop) {
    std::unique_lock lock(mutex);
    for (;;) {
      // Wakes early only when stop is requested (the stop token notifies the condition variable).
      wake.wait_for(lock, stop, heartbeat_period, [] { return false; });
      if (stop.stop_requested()) return;
      const auto expires = unix_now_ms() + lease_duration.count();
      switch (lease.renew(holder, expires)) {
        case LeaseFile::Renewal::Renewed: expires_unix_ms = expires; break;
        case LeaseFile::Renewal::NotOurs:
          // Taken over: writing it again would rob the new holder, so stop and report.
          lost = true;
          return;
        case LeaseFile::Renewal::Failed:
          if (unix_now_ms() >= expires_unix_ms) {  // a waiter may take it over from now on
            lost = true;
            return;
          }
          break;
      }
    }
  }
};

RepoLock::RepoLock(std::unique_ptr<State> state) : state_(std::move(state)) {}
RepoLock::RepoLock(RepoLock&& other) noexcept = default;

RepoLock& RepoLock::operator=(RepoLock&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

RepoLock::~RepoLock() {
  release();
}

bool RepoLock::lost() const {
  return state_ != nullptr && state_->lost.load();
}
bool RepoLock::uses_flock() const {
  return state_ != nullptr && static_cast<bool>(state_->flock_fd);
}

const std::string& RepoLock::holder_id() const {
  static const std::string kNone;
  return state_ ? state_->holder : kNone;
}

std::filesystem::path RepoLock::lease_path() const {
  return state_ ? state_->lease.path() : std::filesystem::path();
}

RepoLock RepoLock::acquire(const RepoCache& cache, const LockOptions& options) {
  check_options(options);
  const auto dir = cache.locks_dir();
  std::filesystem::path failed_at;
  if (const int err = detail::try_make_directories(dir, &failed_at); err != 0) {
    throw detail::lock_directory_error(dir, failed_at, cache.repo_id(), err);
  }
  const auto flock_path = dir / kFlockFileName;
  auto state = std::make_unique<State>(dir / kLeaseFileName, make_lease_holder_id(), options);
  Waiter waiter(cache, options);
  const auto holder_now = [&] {
    return describe_holder(state->lease.read(options.lease_duration), state->lease.path(), flock_path);
  };

  if (options.use_flock) {
    UniqueFd fd = open_flock_file(flock_path);
    for (;;) {
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
        state->flock_fd = std::move(fd);
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK) {
        waiter.wait(holder_now());
        continue;
      }
      if (flock_unsupported(errno)) break;  // the lease alone guards this filesystem
      throw io_error("lock", flock_path, errno);
    }
  }

  for (;;) {
    const auto expires = unix_now_ms() + options.lease_duration.count();
    if (state->lease.try_create(state->holder, expires)) {
      state->expires_unix_ms = expires;
      break;
    }
    const auto seen = state->lease.read(options.lease_duration);
    if (!seen) continue;  // released between our create and our read: try again at once
    if (seen->expires_unix_ms <= unix_now_ms()) {
      // Its holder stopped renewing (killed, or its host is gone): take it over, unless it changes first.
      state->lease.remove_if_unchanged(*seen);
      continue;
    }
    waiter.wait(describe_holder(seen, state->lease.path(), flock_path));
  }

  State& running = *state;
  state->heartbeat = std::jthread([&running](const std::stop_token& stop) { running.run_heartbeat(stop); });
  return RepoLock(std::move(state));
}

void RepoLock::release() noexcept {
  if (!state_) return;
  state_->heartbeat.request_stop();
  if (state_->heartbeat.joinable()) state_->heartbeat.join();
  try {
    state_->lease.remove_if_held_by(state_->holder);
  } catch (const FetchError&) {
    // Left behind, the lease expires by itself after lease_duration.
  }
  if (state_->flock_fd) ::flock(state_->flock_fd.get(), LOCK_UN);
  state_.reset();
}

BlobFileLock BlobFileLock::acquire(const RepoCache& cache, std::string_view blob_id, const LockOptions& options) {
  const auto path = cache.blob_lock_path(blob_id);
  std::filesystem::path failed_at;
  if (const int err = detail::try_make_directories(path.parent_path(), &failed_at); err != 0) {
    throw detail::lock_directory_error(path.parent_path(), failed_at, cache.repo_id(), err);
  }
  UniqueFd fd = open_flock_file(path);
  const auto deadline = deadline_after(options.max_wait);
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return BlobFileLock(std::move(fd));
    if (errno == EINTR) continue;
    if (flock_unsupported(errno)) return BlobFileLock(UniqueFd());
    if (errno != EWOULDBLOCK) throw io_error("lock", path, errno);
    if (SteadyClock::now() >= deadline) {
      throw FetchError(ErrorKind::Internal, "gave up after " + format_duration(options.max_wait) + " waiting for " +
                                                path.string() +
                                                ": another program (huggingface_hub?) is writing the same file");
    }
    std::this_thread::sleep_for(options.poll);
  }
}

bool flock_supported(const std::filesystem::path& dir) {
  const auto probe = dir / (".fetchd-flock-probe-" + detail::random_token());
  UniqueFd fd(::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd) throw io_error("create a flock probe file", probe, errno);
  const bool supported = ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
  ::unlink(probe.c_str());
  return supported;
}

namespace detail {

FetchError lock_directory_error(const std::filesystem::path& dir, const std::filesystem::path& failed_at,
                                std::string_view repo_id, int err) {
  std::string message = "cannot create the lock directory " + dir.string();
  if (!failed_at.empty() && failed_at != dir) message += " (at " + failed_at.string() + ")";
  message += std::string(": ") + std::strerror(err) + " (" + errno_name(err) + "). ";
  if (err == EROFS || err == EACCES || err == EPERM) {
    message += "The cache volume is read-only" +
               std::string(err == EROFS ? "" : " for this user (uid " + std::to_string(::getuid()) + ")") +
               " but files of '" + std::string(repo_id) +
               "' are missing from it, so they must be fetched: fetch them once where the volume is writable, "
               "mount it read-write, or point HF_HUB_CACHE at a writable cache.";
  } else {
    message += errno_advice(err);
  }
  return FetchError(ErrorKind::Internal, message);
}

}  // namespace detail

}  // namespace fetchd::cache
