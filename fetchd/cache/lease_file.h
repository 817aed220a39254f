#pragma once

// The lease half of the repository lock: a small file that names its holder and an expiry, renewed by a
// heartbeat. flock() alone is not enough on a shared volume: NFS, Lustre and GPFS can grant it to two
// hosts at once, CIFS refuses it (ENOSYS), and a holder killed by the OOM killer on another node may leave
// it held until that node notices. A lease that expires needs no such help, and rename() is atomic on all
// of them.
//
// File content: "holder=<hostname>:<pid>:<random>\nexpires=<unix milliseconds>\n". Expiries are wall-clock
// times compared across hosts, so hosts sharing a volume must agree on the time to within
// (lease duration - heartbeat); NTP keeps them far closer than the default 25 s.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fetchd::cache {

// What a lease file said when it was read.
struct LeaseRecord {
  std::string raw;                    // the exact bytes: the identity a takeover compares against
  std::optional<std::string> holder;  // absent when the file could not be parsed
  std::int64_t expires_unix_ms = 0;   // from the file; for an unparsable file, its mtime + grace
};

// Milliseconds since the Unix epoch, the clock lease expiries are written in.
std::int64_t unix_now_ms();

// "<hostname>:<pid>:<random>": unique even for two pods that both run as pid 1.
std::string make_lease_holder_id();

class LeaseFile {
 public:
  explicit LeaseFile(std::filesystem::path path) : path_(std::move(path)) {}
  const std::filesystem::path& path() const { return path_; }

  static std::string format(std::string_view holder, std::int64_t expires_unix_ms);

  // nullopt when there is no lease. A file that does not parse (its creator was killed between creating
  // and writing it, or another tool wrote it) expires `grace` after its last modification, so it is
  // neither trusted forever nor taken from a creator that is writing it right now.
  std::optional<LeaseRecord> read(std::chrono::milliseconds grace) const;

  // Creates the lease with O_CREAT|O_EXCL: true when we now hold it, false when a lease already exists.
  bool try_create(std::string_view holder, std::int64_t expires_unix_ms) const;

  enum class Renewal { Renewed, NotOurs, Failed };
  // Heartbeat: checks the file still names `holder`, rewrites it (temporary + rename) with the new expiry,
  // then checks again. NotOurs means the lease was taken over: the caller has lost the lock and must not
  // write it again. Failed is an I/O error worth retrying until the old expiry passes.
  Renewal renew(std::string_view holder, std::int64_t expires_unix_ms) const;

  // Takeover of an expired lease: renames the file aside to a unique name, and removes it only when it is
  // byte-for-byte the lease judged stale; a lease that changed meanwhile (renewed, or replaced by another
  // waiter) is put back. True when the stale lease was removed and the caller may try_create.
  bool remove_if_unchanged(const LeaseRecord& seen) const;

  // Release: removes the lease only when it still names `holder`.
  bool remove_if_held_by(std::string_view holder) const;

 private:
  std::filesystem::path path_;
};

}  // namespace fetchd::cache
