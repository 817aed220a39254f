#include "fetchd/cache/lease_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>

#include "fetchd/cache/file_ops.h"

namespace fetchd::cache {

namespace {

using detail::io_error;

// Parses "holder=...\nexpires=...\n"; nullopt unless both fields are present and well formed.
std::optional<std::pair<std::string, std::int64_t>> parse_lease(std::string_view text) {
  std::optional<std::string> holder;
  std::optional<std::int64_t> expires;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    if (newline == std::string_view::npos) return std::nullopt;  // a torn or foreign file
    const auto line = text.substr(0, newline);
    text.remove_prefix(newline + 1);
    if (line.starts_with("holder=") && line.size() > 7) {
      holder = std::string(line.substr(7));
    } else if (line.starts_with("expires=")) {
      std::int64_t value = 0;
      const auto digits = line.substr(8);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
      expires = value;
    }
  }
  if (!holder || !expires) return std::nullopt;
  return std::make_pair(*holder, *expires);
}

}  // namespace

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string make_lease_holder_id() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string name = host.data();
  if (name.empty()) name = "unknown-host";
  for (auto& c : name) {
    if (c == '\n' || c == ':') c = '_';  // keep the file format and the three fields unambiguous
  }
  return name + ":" + std::to_string(::getpid()) + ":" + detail::random_token();
}

std::string LeaseFile::format(std::string_view holder, std::int64_t expires_unix_ms) {
  return "holder=" + std::string(holder) + "\nexpires=" + std::to_string(expires_unix_ms) + "\n";
}

std::optional<LeaseRecord> LeaseFile::read(std::chrono::milliseconds grace) const {
  auto raw = detail::read_small_file(path_);
  if (!raw) return std::nullopt;
  LeaseRecord record;
  record.raw = std::move(*raw);
  if (auto parsed = parse_lease(record.raw)) {
    record.holder = std::move(parsed->first);
    record.expires_unix_ms = parsed->second;
    return record;
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw io_error("inspect", path_, errno);
  }
  record.expires_unix_ms =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000 + grace.count();
  return record;
}

bool LeaseFile::try_create(std::string_view holder, std::int64_t expires_unix_ms) const {
  detail::UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd) {
    if (errno == EEXIST) return false;
    throw io_error("create the lease file", path_, errno);
  }
  const auto content = format(holder, expires_unix_ms);
  std::string_view rest = content;
  int err = 0;
  while (!rest.empty() && err == 0) {
    const ssize_t n = ::write(fd.get(), rest.data(), rest.size());
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (err == 0 && ::close(fd.release()) != 0) err = errno;
  if (err != 0) {
    ::unlink(path_.c_str());
    throw io_error("write the lease file", path_, err);
  }
  return true;
}

LeaseFile::Renewal LeaseFile::renew(std::string_view holder, std::int64_t expires_unix_ms) const {
  try {
    const auto before = read(std::chrono::milliseconds(0));
    if (!before || before->holder != holder) return Renewal::NotOurs;
    // Not durable: after a crash the lease is stale anyway, and fsync every heartbeat is costly on NFS.
    if (detail::try_write_file_atomically(path_, format(holder, expires_unix_ms), false) != 0) {
      return Renewal::Failed;
    }
    // A waiter may have judged the lease stale and replaced it between the check and the rename; the one
    // that reads back its own name is the holder, the other sees NotOurs at its next heartbeat.
    const auto after = read(std::chrono::milliseconds(0));
    if (!after || after->holder != holder) return Renewal::NotOurs;
    return Renewal::Renewed;
  } catch (const FetchError&) {
    return Renewal::Failed;
  }
}

bool LeaseFile::remove_if_unchanged(const LeaseRecord& seen) const {
  const auto aside = path_.parent_path() / (path_.filename().string() + ".stale-" + detail::random_token());
  if (::rename(path_.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return false;  // another waiter took it first
    throw io_error("move the stale lease aside to " + aside.string() + " from", path_, errno);
  }
  const auto moved = detail::read_small_file(aside);
  if (moved && *moved == seen.raw) {
    ::unlink(aside.c_str());
    return true;
  }
  // We moved a lease other than the one judged stale. Put it back with link(), which never replaces a
  // lease created in the meantime; rename() is the fallback where hard links are refused.
  if (::link(aside.c_str(), path_.c_str()) == 0 || errno == EEXIST) {
    ::unlink(aside.c_str());
  } else {
    ::rename(aside.c_str(), path_.c_str());
  }
  return false;
}

bool LeaseFile::remove_if_held_by(std::string_view holder) const {
  const auto current = read(std::chrono::milliseconds(0));
  if (!current || current->holder != holder) return false;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) throw io_error("remove", path_, errno);
  return true;
}

}  // namespace fetchd::cache
