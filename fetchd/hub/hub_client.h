#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fetchd/request/fetch_error.h"
#include "fetchd/hub/hub_settings.h"
#include "fetchd/hub/repo_listing.h"
#include "fetchd/transfer/http_client.h"
#include "fetchd/transfer/retry_policy.h"

namespace fetchd::hub {

struct RepoRefs {
  std::vector<std::pair<std::string, std::string>> branches;  // name → commit
  std::vector<std::pair<std::string, std::string>> tags;
};

// The hub's JSON API for one repository: revision → commit, tree listing. API calls never follow a
// redirect (a hub that redirects them is refused), are retried on 429/5xx/timeouts, and turn the hub's
// X-Error-Code into an error that says what to do.
class HubClient {
 public:
  HubClient(const HubSettings& settings, std::string repo_id, const transfer::CancelToken* cancel,
            transfer::RetryPolicy policy = {});

  // A 40-hex revision is returned as is, without a request; a branch or tag is looked up in the refs.
  std::string resolve_commit(std::string_view revision);
  // Every file of the commit (all pages), integrity-checked.
  std::vector<ListingEntry> list_files(std::string_view commit);

  // URL of a file under /resolve/{commit}/ (path segments percent-encoded).
  std::string resolve_url(std::string_view commit, std::string_view path) const;
  // "Authorization: Bearer …" or empty.
  std::string authorization() const;
  std::string endpoint_origin() const;
  // The error for a final non-success answer about this repository.
  FetchError error_for(const transfer::HttpResult& result, std::string_view what) const;

  const HubSettings& settings() const { return settings_; }
  transfer::HttpClient& http() { return http_; }
  const transfer::RetryPolicy& policy() const { return policy_; }

 private:
  std::string get_api(const std::string& url, std::string_view what, transfer::HttpHeaders* headers = nullptr);
  RepoRefs fetch_refs();

  const HubSettings& settings_;
  std::string repo_id_;
  const transfer::CancelToken* cancel_;
  transfer::RetryPolicy policy_;
  transfer::HttpClient http_;
};

std::string url_encode_path(std::string_view path);  // keeps '/', encodes the rest of RFC 3986's reserved

}  // namespace fetchd::hub
