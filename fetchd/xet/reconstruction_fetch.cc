#include "fetchd/xet/reconstruction_fetch.h"

#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/xet_retry.h"

namespace fetchd::xet {

using transfer::HttpRequest;
using transfer::TransferFailure;

std::optional<Reconstruction> ReconstructionFetcher::fetch(transfer::HttpClient& http, std::uint64_t first,
                                                           std::uint64_t last) {
  bool refreshed = false;
  for (int attempt = 1;; ++attempt) {
    const XetToken token = tokens_.get(request_.file.token_url, false);
    HttpRequest req;
    req.url = token.cas_url + "/v" + std::to_string(version_) + "/reconstructions/" + request_.file.file_hash;
    req.headers = {"Authorization: Bearer " + token.access_token,
                   "Range: bytes=" + std::to_string(first) + "-" + std::to_string(last)};
    req.connect_timeout = request_.connect_timeout;
    req.stall_timeout = request_.stall_timeout;
    auto result = http.perform(req);
    const long status = result.response.status;
    if (result.failure == TransferFailure::None) {
      if (status == 200 || status == 206) {
        answered_version_ = version_;
        return parse_reconstruction(result.response.body);
      }
      if (status == 416) return std::nullopt;
      if ((status == 404 || status == 501) && version_ == 2) {
        version_ = 1;  // a store without V2
        --attempt;
        continue;
      }
      if (status == 401 && !refreshed) {  // the read token expired early
        tokens_.get(request_.file.token_url, true);
        refreshed = true;
        continue;
      }
    }
    if (result.failure == TransferFailure::Cancelled) throw FetchError(ErrorKind::Network, "cancelled");
    auto delay = transfer::retry_delay(result, attempt, policy_);
    if (!delay && status == 404 && attempt < policy_.max_attempts) delay = policy_.initial_backoff * attempt;
    if (!delay) {
      throw FetchError(status == 404 ? ErrorKind::NotFound : ErrorKind::Network,
                       "the Xet store could not describe '" + request_.name + "' (" + request_.file.file_hash +
                           "): " + transfer::describe_failure(result) +
                           (status == 404 ? " — its data may not be pinned yet on this hub; try again later" : ""));
    }
    wait_or_cancel(cancel_, *delay, "waiting for the Xet store");
  }
}

}  // namespace fetchd::xet
