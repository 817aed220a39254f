#include "fetchd/transfer/file_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <variant>

#include "fetchd/proof/content_hash.h"
#include "fetchd/transfer/partial_file.h"

namespace fetchd::transfer {

namespace {

constexpr int kMaxRedirects = 10;

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

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

}  // namespace

DownloadResult download_file(HttpClient& client, const DownloadRequest& request, const RetryPolicy& policy,
                             const CancelToken* cancel, const ResponseErrorMapper& map_error,
                             const DownloadProgress& progress) {
  PartialFile file(request.partial);
  DownloadResult out;
  out.resumed_from = file.size();
  std::optional<std::uint64_t> size = request.size;
  const std::string delete_hint = " Delete " + request.partial.string() + " and run again to start this file over.";
  if (size && file.size() > *size) {
    throw FetchError(ErrorKind::Integrity, "the partial download of '" + request.name + "' holds " +
                                               std::to_string(file.size()) + " bytes but the file has " +
                                               std::to_string(*size) + "." + delete_hint);
  }

  Hasher hasher(request.hash, size);
  if (file.size() > 0) proof::hash_file_prefix(request.partial, file.size(), [&](auto bytes) { hasher.update(bytes); });

  for (int attempt = 1;; ++attempt) {
    if (size && file.size() == *size) break;  // complete (possibly from an earlier run)

    std::string url = request.url;
    HttpResult result;
    Refusal refusal = Refusal::None;
    for (int hop = 0; hop <= kMaxRedirects; ++hop) {
      HttpRequest http;
      http.url = url;
      http.connect_timeout = request.connect_timeout;
      http.stall_timeout = request.stall_timeout;
      if (file.size() > 0) http.headers.push_back("Range: bytes=" + std::to_string(file.size()) + "-");
      if (!request.authorization.empty() && url_origin(url) == request.credential_origin) {
        http.headers.push_back(request.authorization);
      }
      bool body_is_content = false;
      refusal = Refusal::None;
      BodySink sink;
      sink.on_headers = [&](const HttpResponse& r) {
        if (r.status == 206) {
          if (content_range_start(r.headers) != file.size()) {
            refusal = Refusal::WrongRangeStart;
            return false;
          }
        } else if (r.status == 200 && file.size() > 0) {
          if (!request.restart_when_range_ignored) {
            refusal = Refusal::RangeIgnored;  // appending a whole body to a partial file corrupts it
            return false;
          }
          file.resize(0);  // this source ignores Range: take its whole body from byte 0
          hasher.reset(request.hash, size);
        }
        body_is_content = r.status == 200 || r.status == 206;
        return true;
      };
      sink.on_data = [&](std::span<const std::byte> bytes) {
        if (!body_is_content) return true;  // a redirect's or an error's own body
        if (size && file.size() + bytes.size() > *size) {
          refusal = Refusal::TooLong;
          return false;
        }
        file.append(bytes);
        hasher.update(bytes);
        out.transferred += bytes.size();
        if (progress) progress(file.size(), size);
        return true;
      };
      result = client.perform(http, &sink);
      if (hop == 0 && result.failure == TransferFailure::None) {
        out.first_hop_headers = result.response.headers;
        if (auto linked = result.response.headers.get("X-Linked-Size")) {
          const auto linked_size = parse_u64(*linked);
          if (size && linked_size && *linked_size != *size) {
            throw FetchError(ErrorKind::Integrity, "the hub announces '" + request.name + "' at " + *linked +
                                                       " bytes (X-Linked-Size) but its listing says " +
                                                       std::to_string(*size) + " bytes; refusing both");
          }
          if (!size) size = linked_size;
        }
      }
      const long status = result.response.status;
      if (result.failure == TransferFailure::None && status >= 300 && status < 400) {
        const auto location = result.response.headers.get("Location");
        if (!location) break;
        url = resolve_url(url, *location);
        continue;
      }
      break;
    }
    switch (refusal) {
      case Refusal::RangeIgnored:
        throw FetchError(ErrorKind::Integrity, "the server answered a request for bytes " +
                                                   std::to_string(file.size()) + "- of '" + request.name +
                                                   "' with the whole file (200, not 206); nothing was appended." +
                                                   delete_hint);
      case Refusal::WrongRangeStart:
        throw FetchError(ErrorKind::Integrity, "the server answered a request for bytes " +
                                                   std::to_string(file.size()) + "- of '" + request.name +
                                                   "' with a range starting elsewhere (" +
                                                   result.response.headers.get("Content-Range").value_or("?") +
                                                   "); nothing was appended." + delete_hint);
      case Refusal::TooLong:
        throw FetchError(ErrorKind::Integrity, "the server sent more than the " + std::to_string(*size) +
                                                   " bytes the listing gives '" + request.name + "'." + delete_hint);
      case Refusal::None: break;
    }
    if (result.failure == TransferFailure::Cancelled) {
      file.sync();
      throw FetchError(ErrorKind::Network, "cancelled while fetching '" + request.name + "'; the " +
                                               std::to_string(file.size()) + " bytes received are kept in " +
                                               request.partial.string() + " and the next run resumes from there");
    }
    const long status = result.response.status;
    if (result.failure == TransferFailure::None && (status == 200 || status == 206)) {
      if (!size) {
        size = file.size();  // nothing announced a size: the body as received is the file
        break;
      }
      if (file.size() == *size) break;
      // Fewer bytes than the listing: a silently truncated body. Resume it.
      result.failure = TransferFailure::Network;
      result.error = "body ended at byte " + std::to_string(file.size()) + " of " + std::to_string(*size);
    }
    if (result.failure == TransferFailure::None && status == 416) {
      throw FetchError(ErrorKind::Integrity, "the server has no bytes " + std::to_string(file.size()) + "- of '" +
                                                 request.name + "' (416): the partial file does not match." +
                                                 delete_hint);
    }
    const auto delay = retry_delay(result, attempt, policy);
    if (!delay) {
      file.sync();
      if (result.failure == TransferFailure::None && status >= 400 && status < 500) throw map_error(result);
      throw FetchError(ErrorKind::Network, "giving up on '" + request.name + "' after " + std::to_string(attempt) +
                                               " attempt(s): " + describe_failure(result) + "; the " +
                                               std::to_string(file.size()) + " bytes received are kept in " +
                                               request.partial.string() + " for the next run");
    }
    if (!wait_unless_cancelled(cancel, *delay)) {
      file.sync();
      throw FetchError(ErrorKind::Network, "cancelled while waiting to retry '" + request.name + "'");
    }
  }

  file.sync();
  out.size = file.size();
  out.digest = hasher.hex();
  return out;
}

}  // namespace fetchd::transfer
