#pragma once

// The Xet read path of the test hub: the Xet headers of a resolve, the read-token route, the CAS
// (reconstructions), the gateway that serves xorb byte ranges to signed URLs, and the plain /xet/files path.
// What each answers is described in tests/hub/README.md.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/hub/hub_faults.h"
#include "tests/hub/hub_http.h"
#include "tests/hub/hub_store.h"
#include "tests/hub/hub_xet_store.h"
#include "tests/hub/loopback_http_server.h"

namespace testing_support::hub {

class XetService {
 public:
  // `api_endpoint` serves resolve, the token route and /xet/files; `cas_endpoint` the reconstructions;
  // `gateway_endpoint` the signed xorb URLs.
  XetService(const HubStore& store, HubFaults& faults, std::string api_endpoint, std::string cas_endpoint,
             std::string gateway_endpoint);

  // GET or HEAD /{repo}/resolve/{rev}/{path} of a Xet file, once access is granted. `response` carries the
  // headers every resolve answer has (X-Repo-Commit, ETag).
  HttpResponse resolve(HttpResponse response, const HttpRequest& request, const Repository& repository,
                       const Commit& commit, const StoredFile& file, const HubFaults::Settings& settings) const;

  // GET /api/models/{repo}/xet-read-token/{rev}, once access is granted and the revision is known.
  HttpResponse read_token(const Repository& repository, const HubFaults::Settings& settings) const;

  // GET /v1/reconstructions/{hash} and /v2/reconstructions/{hash} on the CAS host.
  HttpResponse reconstruction(const HttpRequest& request, const RequestTarget& target,
                              const HubFaults::Settings& settings) const;

  // GET /xorbs/{hash}?granted=...&expires=...&n=...&sig=... on the gateway host.
  HttpResponse xorb(const HttpRequest& request, const RequestTarget& target, const HubFaults::Settings& settings) const;

  // GET or HEAD /xet/files/{hash} on the API host: the whole file, whatever the Range header says.
  HttpResponse plain_file(const RequestTarget& target, const HubFaults::Settings& settings) const;

 private:
  // A signed gateway URL granting `ranges` (inclusive byte ranges) of `xorb`.
  std::string signed_url(const XetXorb& xorb, const std::vector<XorbByteRange>& ranges,
                         const HubFaults::Settings& settings) const;
  std::string hmac_hex(const std::string& message) const;
  std::string access_token(const std::string& repo_id, std::int64_t expires) const;
  // The repository an access token was issued for; nullopt when the token is forged or expired.
  std::optional<std::string> token_repository(const std::string& token) const;
  bool repository_holds(const std::string& repo_id, const std::string& file_hex) const;
  // The xorb's bytes as the gateway sends them: the stored ones, or a copy with a corrupted record.
  std::shared_ptr<const std::string> served_bytes(const XetXorb& xorb, const HubFaults::Settings& settings) const;

  const HubStore& store_;
  HubFaults& faults_;
  std::string api_endpoint_;
  std::string cas_endpoint_;
  std::string gateway_endpoint_;
  std::string secret_;                            // signs tokens and URLs; random per hub
  mutable std::atomic<std::uint64_t> serial_{0};  // numbers signed URLs in issue order (see use_xet_url)
};

}  // namespace testing_support::hub
