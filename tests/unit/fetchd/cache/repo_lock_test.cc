#include "fetchd/cache/repo_lock.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <string>
#include <thread>

#include "fetchd/cache/file_ops.h"
#include "fetchd/cache/lease_file.h"
#include "fetchd/request/fetch_error.h"
#include "tests/support/fetch_error.h"
#include "tests/support/temp_dir.h"

namespace fetchd::cache {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing_support::TempDir;

// Short durations keep the suite fast; the heartbeat is six times faster than the lease expires.
LockOptions fast_options(bool use_flock) {
  LockOptions options;
  options.lease_duration = milliseconds(300);
  options.heartbeat = milliseconds(50);
  options.poll = milliseconds(10);
  options.max_wait = milliseconds(5000);
  options.use_flock = use_flock;
  return options;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// Waits for a condition another thread makes true, failing after `limit` instead of hanging.
template <typename Condition>
bool eventually(Condition condition, milliseconds limit = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

void write_lease_by_hand(const fs::path& path, std::string_view holder, std::int64_t expires_unix_ms) {
  fs::create_directories(path.parent_path());
  testing_support::write_file(path, LeaseFile::format(holder, expires_unix_ms));
}

using testing_support::error_from;

class CacheRepoLock : public ::testing::Test {
 protected:
  TempDir dir_;
  RepoCache cache_{dir_ / "hub", "org/repo"};
  fs::path lease_ = cache_.locks_dir() / "fetchd.lease";
};

// Run with real flock and with flock emulated as missing (CIFS): the lease alone must also exclude.
class CacheRepoLockModes : public CacheRepoLock, public ::testing::WithParamInterface<bool> {};
std::string flock_mode_name(const ::testing::TestParamInfo<bool>& mode) {
  return mode.param ? "WithFlock" : "LeaseOnly";
}
INSTANTIATE_TEST_SUITE_P(Cache, CacheRepoLockModes, ::testing::Values(true, false), flock_mode_name);

TEST_F(CacheRepoLock, LeaseNamesTheHolderAndIsRemovedOnRelease) {
  auto lock = RepoLock::acquire(cache_, fast_options(true));
  EXPECT_TRUE(lock.held());
  EXPECT_TRUE(lock.uses_flock());
  EXPECT_EQ(lock.lease_path(), lease_);
  EXPECT_THAT(lock.holder_id(), ::testing::MatchesRegex(".+:" + std::to_string(::getpid()) + ":[0-9a-f]{16}"));
  const auto lease = LeaseFile(lease_).read(milliseconds(0));
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->holder, lock.holder_id());
  EXPECT_GT(lease->expires_unix_ms, unix_now_ms());
  EXPECT_THAT(lease->raw, ::testing::MatchesRegex("holder=[^\n]+\nexpires=[0-9]+\n"));

  lock.release();
  EXPECT_FALSE(lock.held());
  lock.release();  // idempotent
  // Only the flock file stays (removing it would race with a process about to lock it).
  EXPECT_THAT(names_in(cache_.locks_dir()), ::testing::ElementsAre("fetchd.lock"));
}

TEST_F(CacheRepoLock, HeartbeatKeepsPushingTheExpiry) {
  auto lock = RepoLock::acquire(cache_, fast_options(false));
  const auto first = LeaseFile(lease_).read(milliseconds(0))->expires_unix_ms;
  EXPECT_TRUE(eventually([&] { return LeaseFile(lease_).read(milliseconds(0))->expires_unix_ms > first; }));
  EXPECT_FALSE(lock.lost());
}

TEST_P(CacheRepoLockModes, SecondAcquirerWaitsUntilTheFirstReleases) {
  auto first = RepoLock::acquire(cache_, fast_options(GetParam()));
  std::promise<std::string> waiting;
  std::atomic<int> wait_notices{0};
  auto options = fast_options(GetParam());
  options.on_wait = [&](const std::string& message) {
    if (wait_notices++ == 0) waiting.set_value(message);
  };
  auto second = std::async(std::launch::async, [&] { return RepoLock::acquire(cache_, options); });

  auto notice = waiting.get_future();
  ASSERT_EQ(notice.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto message = notice.get();
  EXPECT_THAT(message, HasSubstr("'org/repo'"));
  EXPECT_THAT(message, HasSubstr(first.holder_id()));
  // It announced that it waits, so it found the lock held, and it cannot be done while we hold it.
  EXPECT_EQ(second.wait_for(milliseconds(0)), std::future_status::timeout);

  first.release();
  ASSERT_EQ(second.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto lock = second.get();
  EXPECT_EQ(wait_notices.load(), 1);
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, lock.holder_id());
  EXPECT_NE(lock.holder_id(), first.holder_id());
}

TEST_F(CacheRepoLock, ExpiredLeaseOfADeadHolderIsTakenOver) {
  write_lease_by_hand(lease_, "ghost-host:4242:0123456789abcdef", unix_now_ms() - 60'000);
  auto options = fast_options(true);
  int wait_notices = 0;
  options.on_wait = [&](const std::string&) { ++wait_notices; };
  auto lock = RepoLock::acquire(cache_, options);
  EXPECT_EQ(wait_notices, 0);  // an expired lease is not worth waiting for
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, lock.holder_id());
  EXPECT_THAT(names_in(cache_.locks_dir()), ::testing::ElementsAre("fetchd.lease", "fetchd.lock"));  // no .stale-
}

TEST_F(CacheRepoLock, LeaseIsWaitedForUntilItExpiresAndOnWaitNamesItsHolder) {
  const auto expires = unix_now_ms() + 200;
  write_lease_by_hand(lease_, "ghost-host:4242:cafecafecafecafe", expires);
  auto options = fast_options(true);
  std::vector<std::string> notices;
  options.on_wait = [&](const std::string& message) { notices.push_back(message); };
  auto lock = RepoLock::acquire(cache_, options);
  EXPECT_GE(unix_now_ms(), expires);  // not taken before its expiry
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_THAT(notices[0], HasSubstr("held by ghost-host:4242:cafecafecafecafe"));
  EXPECT_THAT(notices[0], HasSubstr(lease_.string()));
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, lock.holder_id());
}

TEST_F(CacheRepoLock, LiveHolderIsNotRobbedPastItsLeaseDuration) {
  auto holder = RepoLock::acquire(cache_, fast_options(false));
  auto options = fast_options(false);
  options.max_wait = milliseconds(1000);  // over three lease durations: only heartbeats keep it alive
  const auto error = error_from([&] { RepoLock::acquire(cache_, options); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  EXPECT_THAT(error.what(), HasSubstr(holder.holder_id()));
  EXPECT_FALSE(holder.lost());
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, holder.holder_id());
}

TEST_P(CacheRepoLockModes, MaxWaitEndsInAClearError) {
  auto holder = RepoLock::acquire(cache_, fast_options(GetParam()));
  auto options = fast_options(GetParam());
  options.max_wait = milliseconds(50);
  const auto error = error_from([&] { RepoLock::acquire(cache_, options); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  const std::string message = error.what();
  EXPECT_THAT(message, HasSubstr("gave up after 50 ms waiting for the lock on repository 'org/repo'"));
  EXPECT_THAT(message, HasSubstr(holder.holder_id()));
  EXPECT_THAT(message, HasSubstr(cache_.locks_dir().string()));
  EXPECT_THAT(message, HasSubstr("retry later"));
}

TEST_F(CacheRepoLock, UnparsableLeaseExpiresAGracePeriodAfterItWasWritten) {
  fs::create_directories(cache_.locks_dir());
  testing_support::write_file(lease_, "");  // as a creator killed between O_EXCL and write() leaves it
  auto options = fast_options(false);
  options.lease_duration = milliseconds(10'000);
  options.max_wait = milliseconds(30);
  EXPECT_THAT(error_from([&] { RepoLock::acquire(cache_, options); }).what(), HasSubstr("still being written"));

  const struct timespec long_ago[2] = {{unix_now_ms() / 1000 - 60, 0}, {unix_now_ms() / 1000 - 60, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, lease_.c_str(), long_ago, 0), 0);
  auto lock = RepoLock::acquire(cache_, options);
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, lock.holder_id());
}

TEST_F(CacheRepoLock, HolderNoticesWhenItsLeaseWasTakenOver) {
  auto lock = RepoLock::acquire(cache_, fast_options(false));
  // What a waiter on a host whose clock ran far ahead would do.
  ASSERT_EQ(detail::try_write_file_atomically(lease_, LeaseFile::format("thief:1:x", unix_now_ms() + 60'000), false),
            0);
  EXPECT_TRUE(eventually([&] { return lock.lost(); }));
  lock.release();
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, "thief:1:x");  // not ours: left alone
}

TEST_F(CacheRepoLock, TakeoverPutsBackALeaseThatChangedSinceItWasJudged) {
  const LeaseFile lease(lease_);
  write_lease_by_hand(lease_, "a:1:x", 1000);
  const auto seen = lease.read(milliseconds(0));
  ASSERT_TRUE(seen);
  // Its holder renewed it after we read it: the renewed lease must survive our takeover attempt.
  write_lease_by_hand(lease_, "a:1:x", unix_now_ms() + 60'000);
  EXPECT_FALSE(lease.remove_if_unchanged(*seen));
  EXPECT_EQ(lease.read(milliseconds(0))->expires_unix_ms > 1000, true);
  EXPECT_THAT(names_in(cache_.locks_dir()), ::testing::ElementsAre("fetchd.lease"));

  const auto current = lease.read(milliseconds(0));
  EXPECT_TRUE(lease.remove_if_unchanged(*current));
  EXPECT_THAT(names_in(cache_.locks_dir()), ::testing::IsEmpty());
  EXPECT_FALSE(lease.remove_if_unchanged(*current));  // already gone: another waiter was first
}

TEST_F(CacheRepoLock, MovingTransfersTheLock) {
  auto first = RepoLock::acquire(cache_, fast_options(true));
  const auto holder = first.holder_id();
  RepoLock moved = std::move(first);
  EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): moved-from is documented as empty
  EXPECT_TRUE(moved.held());
  EXPECT_EQ(moved.holder_id(), holder);
  first.release();  // releasing the moved-from handle does nothing
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, holder);

  const RepoCache other_repo(dir_ / "hub", "org/other");
  auto other = RepoLock::acquire(other_repo, fast_options(true));
  moved = std::move(other);  // releases org/repo, takes over org/other
  EXPECT_FALSE(fs::exists(lease_));
  EXPECT_TRUE(fs::exists(other_repo.locks_dir() / "fetchd.lease"));
}

TEST_F(CacheRepoLock, LocksOfDifferentRepositoriesAreIndependent) {
  auto a = RepoLock::acquire(cache_, fast_options(true));
  auto options = fast_options(true);
  options.max_wait = milliseconds(0);
  auto b = RepoLock::acquire(RepoCache(dir_ / "hub", "org/other"), options);
  EXPECT_TRUE(a.held() && b.held());
}

// A holder in another process is killed (as by the OOM killer) while holding the lock; the next process
// gets it once the lease expires, whether or not flock released it.
TEST_P(CacheRepoLockModes, KilledHolderInAnotherProcessDoesNotBlockForever) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(pipe_fds[0]);
    try {
      auto lock = RepoLock::acquire(cache_, fast_options(GetParam()));
      const std::string holder = lock.holder_id() + "\n";
      if (::write(pipe_fds[1], holder.data(), holder.size()) != static_cast<ssize_t>(holder.size())) ::_exit(2);
      for (;;) ::pause();  // hold it, heartbeating, until killed
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(pipe_fds[1]);
  std::string child_holder;
  char c = 0;
  while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') child_holder += c;
  ::close(pipe_fds[0]);
  ASSERT_FALSE(child_holder.empty()) << "the child could not take the lock";
  EXPECT_THAT(child_holder, HasSubstr(":" + std::to_string(child) + ":"));

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  // The dead holder's last expiry: the lease must outlive the process, and only then be taken.
  const auto stale = LeaseFile(lease_).read(milliseconds(0));
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->holder, child_holder);
  auto options = fast_options(GetParam());
  std::vector<std::string> notices;
  options.on_wait = [&](const std::string& message) { notices.push_back(message); };
  auto lock = RepoLock::acquire(cache_, options);
  EXPECT_GE(unix_now_ms(), stale->expires_unix_ms);
  EXPECT_EQ(LeaseFile(lease_).read(milliseconds(0))->holder, lock.holder_id());
  EXPECT_LE(notices.size(), 1u);  // none when it had already expired by the time we looked
  if (!notices.empty()) {
    EXPECT_THAT(notices[0], HasSubstr(child_holder));
  }
}

TEST_F(CacheRepoLock, UnwritableLockDirectoryIsExplained) {
  fs::create_directories(cache_.cache_dir());
  testing_support::write_file(cache_.cache_dir() / ".locks", "a file where the lock directory should be");
  const auto error = error_from([&] { RepoLock::acquire(cache_, fast_options(true)); });
  EXPECT_EQ(error.kind(), ErrorKind::Internal);
  EXPECT_THAT(error.what(), HasSubstr("cannot create the lock directory " + cache_.locks_dir().string()));
  EXPECT_THAT(error.what(), HasSubstr("(ENOTDIR)"));

  const std::string read_only =
      detail::lock_directory_error(cache_.locks_dir(), cache_.locks_dir(), "org/repo", EROFS).what();
  EXPECT_THAT(read_only, HasSubstr(cache_.locks_dir().string()));
  EXPECT_THAT(read_only, HasSubstr("read-only but files of 'org/repo' are missing"));
}

TEST_F(CacheRepoLock, InconsistentOptionsAreRefused) {
  auto options = fast_options(true);
  options.heartbeat = options.lease_duration;
  EXPECT_EQ(error_from([&] { RepoLock::acquire(cache_, options); }).kind(), ErrorKind::Usage);
  EXPECT_FALSE(fs::exists(cache_.locks_dir()));
}

TEST_F(CacheRepoLock, FlockProbe) {
  EXPECT_TRUE(flock_supported(dir_.path()));  // local disks and tmpfs have it
  EXPECT_THAT(names_in(dir_.path()), ::testing::IsEmpty());
  EXPECT_EQ(error_from([&] { flock_supported(dir_ / "absent"); }).kind(), ErrorKind::Internal);
}

TEST(CacheLeaseFile, RoundTrips) {
  TempDir dir;
  const LeaseFile lease(dir / "fetchd.lease");
  EXPECT_FALSE(lease.read(milliseconds(0)));
  EXPECT_TRUE(lease.try_create("host:7:abc", 1'700'000'000'123));
  EXPECT_FALSE(lease.try_create("host:8:def", 1'700'000'000'123));  // exclusive
  const auto record = lease.read(milliseconds(0));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->raw, "holder=host:7:abc\nexpires=1700000000123\n");
  EXPECT_EQ(record->holder, "host:7:abc");
  EXPECT_EQ(record->expires_unix_ms, 1'700'000'000'123);
  EXPECT_EQ(lease.renew("host:8:def", 1), LeaseFile::Renewal::NotOurs);
  EXPECT_EQ(lease.renew("host:7:abc", 1'800'000'000'000), LeaseFile::Renewal::Renewed);
  EXPECT_EQ(lease.read(milliseconds(0))->expires_unix_ms, 1'800'000'000'000);
  EXPECT_FALSE(lease.remove_if_held_by("host:8:def"));
  EXPECT_TRUE(lease.remove_if_held_by("host:7:abc"));
  EXPECT_FALSE(lease.read(milliseconds(0)));
}

}  // namespace
}  // namespace fetchd::cache
