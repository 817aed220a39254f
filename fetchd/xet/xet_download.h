#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "fetchd/transfer/file_download.h"
#include "fetchd/transfer/http_client.h"
#include "fetchd/transfer/retry_policy.h"

namespace fetchd::xet {

// What a resolve answer says about a Xet file.
struct XetFileInfo {
  std::string file_hash;  // X-Xet-Hash, Xet hex form
  std::uint64_t size = 0;
  std::string token_url;  // absolute: the xet-auth link, or the older X-Xet-Refresh-Route
};

// Reads the Xet headers of a resolve answer (X-Xet-Hash with a Link rel="xet-auth", or X-Xet-Refresh-Route,
// which is relative to the hub endpoint). nullopt when the answer does not describe a Xet file.
std::optional<XetFileInfo> xet_info_from_headers(const transfer::HttpHeaders& headers, std::string_view endpoint,
                                                 std::optional<std::uint64_t> listed_size);

struct XetToken {
  std::string access_token;
  std::string cas_url;  // without a trailing '/'
  std::chrono::system_clock::time_point expires;
};

// Read tokens for one repository, fetched with the hub's own credentials and reused until a minute before
// they expire. A 401 from the token route means "this client may not use Xet here": callers fall back to
// the plain transfer.
class XetTokenCache {
 public:
  XetTokenCache(std::string hub_authorization, transfer::RetryPolicy policy, const transfer::CancelToken* cancel,
                std::chrono::milliseconds timeout);

  // Throws FetchError(Auth) for 401/403, Network when the hub cannot be reached.
  XetToken get(const std::string& token_url, bool refresh = false);

 private:
  std::string hub_authorization_;
  transfer::RetryPolicy policy_;
  const transfer::CancelToken* cancel_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::optional<XetToken> token_;
  std::string token_url_;
};

struct XetDownloadRequest {
  XetFileInfo file;
  std::filesystem::path partial;               // blobs/{id}.incomplete; its resume state sits beside it (.xet-state)
  std::string name;                            // repository path, for messages
  std::optional<std::string> expected_sha256;  // also checked, when the listing gave a real SHA-256
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds stall_timeout{10'000};
  std::uint64_t block_size = 256u << 20;     // the reconstruction is asked for this much of the file at a time
  int max_parallel = 8;                      // concurrent xorb fetches, at most
  std::uint64_t memory_budget = 512u << 20;  // bytes of fetched and decoded data held at once, at most
};

struct XetDownloadResult {
  std::uint64_t size = 0;
  std::uint64_t transferred = 0;    // xorb bytes received by this call
  std::uint64_t resumed_bytes = 0;  // file bytes already written and recorded by an earlier run
  std::string sha256;               // of the whole file, lower-case hex
  int reconstruction_version = 2;   // 1 when the store only speaks V1
  double fetch_seconds = 0;         // reconstructions, transfers, decoding and writing
  double prove_seconds = 0;         // reading the file back: Xet hash and SHA-256
};

// Rebuilds a Xet file into `partial`: reconstruction (V2, else V1), signed byte ranges fetched concurrently
// without Authorization and decoded in place at their file offsets, then proof: the whole file is chunked
// and hashed again and its Xet hash must equal X-Xet-Hash (and its SHA-256 the listing's, when given).
// An interrupted download keeps what it wrote and proved; the next call fetches only the missing terms.
// On a hash mismatch the partial file is deleted and FetchError(Integrity) names both hashes.
XetDownloadResult download_xet_file(XetTokenCache& tokens, const XetDownloadRequest& request,
                                    const transfer::RetryPolicy& policy, const transfer::CancelToken* cancel,
                                    const transfer::DownloadProgress& progress = {});

}  // namespace fetchd::xet
