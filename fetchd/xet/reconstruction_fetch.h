#pragma once

#include <cstdint>
#include <optional>

#include "fetchd/transfer/http_client.h"
#include "fetchd/xet/reconstruction.h"
#include "fetchd/xet/xet_download.h"

namespace fetchd::xet {

// Asks the Xet store how to rebuild parts of one file, with the repository's read token. Starts with V2 and
// stays on V1 once the store shows it lacks V2.
class ReconstructionFetcher {
 public:
  ReconstructionFetcher(XetTokenCache& tokens, const XetDownloadRequest& request, const transfer::RetryPolicy& policy,
                        const transfer::CancelToken* cancel)
      : tokens_(tokens), request_(request), policy_(policy), cancel_(cancel) {}

  // GET {cas}/v2/reconstructions/{hash} for file bytes [first, last], falling back to V1 on 404/501.
  // nullopt on 416 (nothing at or past `first`).
  std::optional<Reconstruction> fetch(transfer::HttpClient& http, std::uint64_t first, std::uint64_t last);

  // The version of the last reconstruction the store gave (2 until one was given).
  int answered_version() const { return answered_version_; }

 private:
  XetTokenCache& tokens_;
  const XetDownloadRequest& request_;
  const transfer::RetryPolicy& policy_;
  const transfer::CancelToken* cancel_;
  int version_ = 2;
  int answered_version_ = 2;
};

}  // namespace fetchd::xet
