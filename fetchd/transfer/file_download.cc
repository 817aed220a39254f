#include "fetchd/transfer/file_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <variant>

#include "fetchd/proof/content_hash.h"
#include "fetchd/transfer/decimal.h"
#include "fetchd/transfer/partial_file.h"

namespace fetchd::transfer {

namespace {

constexpr int kMaxRedirects = 10;

// Start offset of "bytes S-E/T".
std::optional<std::uint64_t> content_range_start(const HttpHeaders& headers) {
  const auto value = headers.get("Content-Range");
  if (!value || !value->starts_with("bytes ")) return std::nullopt;
  const std::string_view rest = std::string_view(*value).substr(6);
  return parse_u64(rest.substr(0, rest.find('-')));
}

class Hasher {
 public:
  Hasher(ContentHash kind, std::optional<std::uint64_t> size) { reset(kind, size); }
  void reset(ContentHash kind, std::optional<std::uint64_t> size) {
    state_ = std::monostate{};
    if (kind == ContentHash::Sha256) state_ = proof::Sha256();
    if (kind == ContentHash::GitBlobSha1) state_ = proof::GitBlobSha1(size.value_or(0));
  }
  void update(std::span<const std::byte> bytes) {
    std::visit(
        [&](auto& h) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(h)>, std::monostate>) h.update(bytes);
        },
        state_);
  }
  std::string hex() {
    return std::visit(
        [](auto& h) -> std::string {
          if constexpr (std::is_same_v<std::decay_t<decltype(h)>, std::monostate>) {
            return "";
          } else {
            return h.hex_digest();
          }
        },
        state_);
  }

 private:
  std::variant<std::monostate, proof::Sha256, proof::GitBlobSha1> state_;
};

// What one hop's response meant for the download.
enum class Refusal { None, RangeIgnored, WrongRangeStart, TooLong };

std::string delete_hint(const DownloadRequest& request) {
  return " Delete " + request.partial.string() + " and run again to start this file over.";
}

// One call's download: what it was asked for, and what it carries from attempt to attempt.
struct Download {
  // Opens the partial file to resume and hashes the bytes it already holds; refuses one longer than the file.
  Download(const DownloadRequest& asked, const DownloadProgress& report);
  bool complete() const { return size && file.size() == *size; }

  const DownloadRequest& request;
  const DownloadProgress& progress;
  PartialFile file;
  std::optional<std::uint64_t> size;  // the listing's, else X-Linked-Size's, else (at the end) the body's
  Hasher hasher;
  DownloadResult out;
};

Download::Download(const DownloadRequest& asked, const DownloadProgress& report)
    : request(asked), progress(report), file(asked.partial), size(asked.size), hasher(asked.hash, size) {
  out.resumed_from = file.size();
  if (size && file.size() > *size) {
    throw FetchError(ErrorKind::Integrity, "the partial download of '" + request.name + "' holds " +
                                               std::to_string(file.size()) + " bytes but the file has " +
                                               std::to_string(*size) + "." + delete_hint(request));
  }
  if (file.size() > 0) proof::hash_file_prefix(request.partial, file.size(), [&](auto bytes) { hasher.update(bytes); });
}

// What one response's status and headers allow, decided before any of its body is taken.
struct RangeVerdict {
  Refusal refusal = Refusal::None;
  bool restart = false;          // a 200 to a Range request from a source that ignores Range by design
  bool body_is_content = false;  // false for a redirect's or an error's own body
};

// The range/resume check of a response to a request for bytes `have`- (no Range was sent when `have` is 0).
RangeVerdict check_range(const HttpResponse& r, std::uint64_t have, bool restart_when_range_ignored) {
  if (r.status == 206 && content_range_start(r.headers) != have) return {.refusal = Refusal::WrongRangeStart};
  const bool range_ignored = r.status == 200 && have > 0;
  if (range_ignored && !restart_when_range_ignored) {
    return {.refusal = Refusal::RangeIgnored};  // appending a whole body to a partial file corrupts it
  }
  return {.restart = range_ignored, .body_is_content = r.status == 200 || r.status == 206};
}

// Takes one hop's response into the partial file: its range checked before the first byte, then each chunk
// of content appended, hashed and reported. A refused response or chunk is not written; refusal() says why.
class HopWriter {
 public:
  explicit HopWriter(Download& d) : d_(d) {
    sink_.on_headers = [this](const HttpResponse& r) { return on_headers(r); };
    sink_.on_data = [this](std::span<const std::byte> bytes) { return on_data(bytes); };
  }
  HopWriter(const HopWriter&) = delete;
  HopWriter& operator=(const HopWriter&) = delete;

  const BodySink& sink() const { return sink_; }
  Refusal refusal() const { return refusal_; }

 private:
  bool on_headers(const HttpResponse& r) {
    const RangeVerdict verdict = check_range(r, d_.file.size(), d_.request.restart_when_range_ignored);
    refusal_ = verdict.refusal;
    if (refusal_ != Refusal::None) return false;
    if (verdict.restart) {
      d_.file.resize(0);  // this source ignores Range: take its whole body from byte 0
      d_.hasher.reset(d_.request.hash, d_.size);
    }
    body_is_content_ = verdict.body_is_content;
    return true;
  }
  bool on_data(std::span<const std::byte> bytes) {
    if (!body_is_content_) return true;  // a redirect's or an error's own body
    if (d_.size && d_.file.size() + bytes.size() > *d_.size) {
      refusal_ = Refusal::TooLong;
      return false;
    }
    d_.file.append(bytes);
    d_.hasher.update(bytes);
    d_.out.transferred += bytes.size();
    if (d_.progress) d_.progress(d_.file.size(), d_.size);
    return true;
  }

  Download& d_;
  BodySink sink_;
  bool body_is_content_ = false;
  Refusal refusal_ = Refusal::None;
};

// One hop's request: resuming from `have`, and carrying Authorization only to the credential origin.
HttpRequest hop_request(const DownloadRequest& request, const std::string& url, std::uint64_t have) {
  HttpRequest http;
  http.url = url;
  http.connect_timeout = request.connect_timeout;
  http.stall_timeout = request.stall_timeout;
  if (have > 0) http.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
  if (!request.authorization.empty() && url_origin(url) == request.credential_origin) {
    http.headers.push_back(request.authorization);
  }
  return http;
}

// Keeps the first hop's headers and takes the size its X-Linked-Size announces when the listing gave none;
// refuses both when they disagree.
void note_first_hop(const HttpHeaders& headers, Download& d) {
  d.out.first_hop_headers = headers;
  const auto linked = headers.get("X-Linked-Size");
  if (!linked) return;
  const auto linked_size = parse_u64(*linked);
  if (d.size && linked_size && *linked_size != *d.size) {
    throw FetchError(ErrorKind::Integrity, "the hub announces '" + d.request.name + "' at " + *linked +
                                               " bytes (X-Linked-Size) but its listing says " +
                                               std::to_string(*d.size) + " bytes; refusing both");
  }
  if (!d.size) d.size = linked_size;
}

// Where a redirect points, resolved against `url` by resolve_url (which drops userinfo, so no redirect
// carries credentials to another host); nullopt for any other result, or a redirect without Location.
std::optional<std::string> redirect_target(const HttpResult& result, const std::string& url) {
  const long status = result.response.status;
  if (result.failure != TransferFailure::None || status < 300 || status >= 400) return std::nullopt;
  const auto location = result.response.headers.get("Location");
  if (!location) return std::nullopt;
  return resolve_url(url, *location);
}

// How one attempt ended: its last hop's result, and why that hop's body was refused, if it was.
struct Attempt {
  HttpResult result;
  Refusal refusal = Refusal::None;
};

// One attempt: follows up to kMaxRedirects hops from request.url, one request each.
Attempt follow_redirects(HttpClient& client, Download& d) {
  Attempt attempt;
  std::string url = d.request.url;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    HopWriter writer(d);
    attempt.result = client.perform(hop_request(d.request, url, d.file.size()), &writer.sink());
    attempt.refusal = writer.refusal();
    if (hop == 0 && attempt.result.failure == TransferFailure::None) note_first_hop(attempt.result.response.headers, d);
    const auto next = redirect_target(attempt.result, url);
    if (!next) break;
    url = *next;
  }
  return attempt;
}

// Throws the error a refused response or chunk becomes.
void throw_if_refused(const Attempt& attempt, const Download& d) {
  const std::string& name = d.request.name;
  switch (attempt.refusal) {
    case Refusal::RangeIgnored:
      throw FetchError(ErrorKind::Integrity,
                       "the server answered a request for bytes " + std::to_string(d.file.size()) + "- of '" + name +
                           "' with the whole file (200, not 206); nothing was appended." + delete_hint(d.request));
    case Refusal::WrongRangeStart:
      throw FetchError(ErrorKind::Integrity, "the server answered a request for bytes " +
                                                 std::to_string(d.file.size()) + "- of '" + name +
                                                 "' with a range starting elsewhere (" +
                                                 attempt.result.response.headers.get("Content-Range").value_or("?") +
                                                 "); nothing was appended." + delete_hint(d.request));
    case Refusal::TooLong:
      throw FetchError(ErrorKind::Integrity, "the server sent more than the " + std::to_string(*d.size) +
                                                 " bytes the listing gives '" + name + "'." + delete_hint(d.request));
    case Refusal::None: break;
  }
}

// The size check at the end of an attempt: true when its body completed the file. A body that ended short
// becomes a Network failure, so that it is retried and resumed.
bool body_completes_file(HttpResult& result, Download& d) {
  const long status = result.response.status;
  if (result.failure != TransferFailure::None || (status != 200 && status != 206)) return false;
  if (!d.size) {
    d.size = d.file.size();  // nothing announced a size: the body as received is the file
    return true;
  }
  if (d.file.size() == *d.size) return true;
  // Fewer bytes than the listing: a silently truncated body. Resume it.
  result.failure = TransferFailure::Network;
  result.error = "body ended at byte " + std::to_string(d.file.size()) + " of " + std::to_string(*d.size);
  return false;
}

// Whether the attempt completed the file; throws for what no retry can fix: a refused body, a cancel, a 416.
bool attempt_completes_file(Attempt& attempt, Download& d) {
  throw_if_refused(attempt, d);
  HttpResult& result = attempt.result;
  if (result.failure == TransferFailure::Cancelled) {
    d.file.sync();
    throw FetchError(ErrorKind::Network, "cancelled while fetching '" + d.request.name + "'; the " +
                                             std::to_string(d.file.size()) + " bytes received are kept in " +
                                             d.request.partial.string() + " and the next run resumes from there");
  }
  if (body_completes_file(result, d)) return true;
  if (result.failure == TransferFailure::None && result.response.status == 416) {
    throw FetchError(ErrorKind::Integrity, "the server has no bytes " + std::to_string(d.file.size()) + "- of '" +
                                               d.request.name + "' (416): the partial file does not match." +
                                               delete_hint(d.request));
  }
  return false;
}

// Waits as `policy` says before attempt `attempt` + 1; throws when the result is final, the attempts are
// used up, or `cancel` fires first. The bytes received stay in the partial file for the next run.
void wait_before_retry(const HttpResult& result, int attempt, const RetryPolicy& policy, const CancelToken* cancel,
                       const ResponseErrorMapper& map_error, const Download& d) {
  const auto delay = retry_delay(result, attempt, policy);
  if (!delay) {
    d.file.sync();
    const long status = result.response.status;
    if (result.failure == TransferFailure::None && status >= 400 && status < 500) throw map_error(result);
    throw FetchError(ErrorKind::Network, "giving up on '" + d.request.name + "' after " + std::to_string(attempt) +
                                             " attempt(s): " + describe_failure(result) + "; the " +
                                             std::to_string(d.file.size()) + " bytes received are kept in " +
                                             d.request.partial.string() + " for the next run");
  }
  if (!wait_unless_cancelled(cancel, *delay)) {
    d.file.sync();
    throw FetchError(ErrorKind::Network, "cancelled while waiting to retry '" + d.request.name + "'");
  }
}

// The retry loop: attempts until the file is complete, waiting between attempts as `policy` says.
void retry_until_complete(HttpClient& client, Download& d, const RetryPolicy& policy, const CancelToken* cancel,
                          const ResponseErrorMapper& map_error) {
  for (int attempt = 1;; ++attempt) {
    if (d.complete()) return;  // complete (possibly from an earlier run)
    Attempt outcome = follow_redirects(client, d);
    if (attempt_completes_file(outcome, d)) return;
    wait_before_retry(outcome.result, attempt, policy, cancel, map_error, d);
  }
}

// What the caller proves and publishes: the partial file synced, its size, and the digest over every byte.
DownloadResult finish(Download& d) {
  d.file.sync();
  d.out.size = d.file.size();
  d.out.digest = d.hasher.hex();
  return std::move(d.out);
}

}  // namespace

DownloadResult download_file(HttpClient& client, const DownloadRequest& request, const RetryPolicy& policy,
                             const CancelToken* cancel, const ResponseErrorMapper& map_error,
                             const DownloadProgress& progress) {
  Download d(request, progress);
  retry_until_complete(client, d, policy, cancel, map_error);
  return finish(d);
}

}  // namespace fetchd::transfer
