// XetTokenCache (declared in xet_download.h): the repository's Xet read token, fetched, cached and renewed.

#include <cstdint>
#include <string>

#include "engine/format/json.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/decimal.h"
#include "fetchd/xet/xet_download.h"
#include "fetchd/xet/xet_retry.h"

namespace fetchd::xet {

namespace {

// The token in a 200 answer from `token_url`: JSON {accessToken, exp, casUrl}, or the older hubs'
// X-Xet-Access-Token, X-Xet-Token-Expiration and X-Xet-Cas-Url headers.
XetToken parse_token_answer(const transfer::HttpResponse& response, const std::string& token_url) {
  XetToken token;
  std::size_t consumed = 0;
  std::string error;
  const auto doc = engine::format::parse_json_prefix(response.body, consumed, error);
  const auto text = [&](const char* key, const char* header) -> std::string {
    if (error.empty() && doc.IsObject()) {
      const auto it = doc.FindMember(key);
      if (it != doc.MemberEnd() && it->value.IsString()) return it->value.GetString();
    }
    return response.headers.get(header).value_or("");
  };
  token.access_token = text("accessToken", "X-Xet-Access-Token");
  token.cas_url = text("casUrl", "X-Xet-Cas-Url");
  while (token.cas_url.ends_with('/')) token.cas_url.pop_back();
  std::int64_t exp = 0;
  if (error.empty() && doc.IsObject() && doc.HasMember("exp") && doc["exp"].IsInt64()) {
    exp = doc["exp"].GetInt64();
  } else if (auto header = response.headers.get("X-Xet-Token-Expiration")) {
    exp = static_cast<std::int64_t>(transfer::parse_u64(*header).value_or(0));
  }
  if (token.access_token.empty() || token.cas_url.empty()) {
    throw FetchError(ErrorKind::Network,
                     "the hub's Xet read token answer from " + token_url + " has no accessToken or casUrl");
  }
  token.expires = std::chrono::system_clock::time_point(std::chrono::seconds(exp));
  return token;
}

}  // namespace

XetTokenCache::XetTokenCache(std::string hub_authorization, transfer::RetryPolicy policy,
                             const transfer::CancelToken* cancel, std::chrono::milliseconds timeout)
    : hub_authorization_(std::move(hub_authorization)), policy_(policy), cancel_(cancel), timeout_(timeout) {}

XetToken XetTokenCache::get(const std::string& token_url, bool refresh) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::system_clock::now();
  if (!refresh && token_ && token_url_ == token_url && token_->expires - std::chrono::seconds(60) > now) return *token_;

  transfer::HttpClient http(cancel_);
  for (int attempt = 1;; ++attempt) {
    transfer::HttpRequest req;
    req.url = token_url;
    req.connect_timeout = timeout_;
    req.stall_timeout = timeout_;
    if (!hub_authorization_.empty()) req.headers.push_back(hub_authorization_);
    const auto result = http.perform(req);
    const long status = result.response.status;
    if (result.failure == transfer::TransferFailure::None && status == 200) {
      const XetToken token = parse_token_answer(result.response, token_url);
      token_ = token;
      token_url_ = token_url;
      return token;
    }
    if (result.failure == transfer::TransferFailure::None && (status == 401 || status == 403)) {
      throw FetchError(ErrorKind::Auth, "the hub refused a Xet read token (HTTP " + std::to_string(status) + ")");
    }
    const auto delay = transfer::retry_delay(result, attempt, policy_);
    if (!delay) {
      throw FetchError(ErrorKind::Network,
                       "cannot get a Xet read token from " + token_url + ": " + transfer::describe_failure(result));
    }
    wait_or_cancel(cancel_, *delay, "waiting for a Xet read token");
  }
}

}  // namespace fetchd::xet
