#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/http_client.h"
#include "fetchd/transfer/retry_policy.h"

namespace fetchd::transfer {

// The content id the listing gave, computed over the bytes as they arrive.
enum class ContentHash { None, Sha256, GitBlobSha1 };

struct DownloadRequest {
  std::string url;                    // first hop, usually {endpoint}/{repo}/resolve/{commit}/{path}
  std::string credential_origin;      // the only origin that may see `authorization`
  std::string authorization;          // "Authorization: Bearer …", or empty
  std::filesystem::path partial;      // blobs/{id}.incomplete; kept across runs and resumed
  std::optional<std::uint64_t> size;  // from the listing
  ContentHash hash = ContentHash::None;
  std::string name;  // repository path, for messages
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds stall_timeout{10'000};
  // Some sources ignore Range by design (a Xet store's plain /xet/files path): then a 200 answer to a
  // Range request restarts the file from byte 0 instead of being refused.
  bool restart_when_range_ignored = false;
};

struct DownloadResult {
  std::uint64_t size = 0;
  std::string digest;              // lower-case hex of the requested hash; empty for ContentHash::None
  std::uint64_t resumed_from = 0;  // bytes already in the partial file when this call began
  std::uint64_t transferred = 0;   // body bytes received by this call
  HttpHeaders first_hop_headers;   // X-Repo-Commit, X-Linked-Size, X-Linked-Etag, X-Xet-Hash, …
};

// Turns a final, non-retryable answer (404, 401, …) into the error the user sees.
using ResponseErrorMapper = std::function<FetchError(const HttpResult&)>;
using DownloadProgress = std::function<void(std::uint64_t done, std::optional<std::uint64_t> total)>;

// Streams one file into `partial`, resuming from its current length with `Range: bytes=N-`, following
// redirects hop by hop (Authorization only ever sent to `credential_origin`), retrying per `policy`, and
// hashing every byte. Refuses, keeping the partial file untouched: a 200 answer to a Range request, a
// Content-Range that starts elsewhere, a body longer than the listed size, an X-Linked-Size that
// disagrees with the listing. The caller proves the digest and publishes the file.
DownloadResult download_file(HttpClient& client, const DownloadRequest& request, const RetryPolicy& policy,
                             const CancelToken* cancel, const ResponseErrorMapper& map_error,
                             const DownloadProgress& progress = {});

}  // namespace fetchd::transfer
