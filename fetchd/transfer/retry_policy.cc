#include "fetchd/transfer/retry_policy.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace fetchd::transfer {

namespace {

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text) {
  long long seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || seconds < 0) return std::nullopt;
  (void)end;
  return std::chrono::seconds(seconds);
}

// 429 answers say when to come back: Retry-After (seconds), or the IETF RateLimit header's t=.
std::optional<std::chrono::milliseconds> server_wait(const HttpHeaders& headers) {
  if (auto v = headers.get("Retry-After")) return parse_seconds(*v);
  if (auto v = headers.get("RateLimit")) {
    const auto t = v->find("t=");
    if (t != std::string::npos) return parse_seconds(std::string_view(*v).substr(t + 2));
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> retry_delay(const HttpResult& result, int attempt, const RetryPolicy& policy) {
  if (attempt >= policy.max_attempts) return std::nullopt;
  const std::chrono::milliseconds backoff = std::min<std::chrono::milliseconds>(
      policy.max_backoff, policy.initial_backoff * (1L << std::min(attempt - 1, 20)));
  switch (result.failure) {
    case TransferFailure::Network:
    case TransferFailure::Stalled: return backoff;
    case TransferFailure::Cancelled:
    case TransferFailure::Refused:
    case TransferFailure::TooLarge: return std::nullopt;
    case TransferFailure::None: break;
  }
  const long status = result.response.status;
  if (status == 429) {
    const auto wait = server_wait(result.response.headers).value_or(backoff);
    if (wait > policy.max_retry_after) return std::nullopt;
    return wait;
  }
  if (status == 408 || status >= 500) return backoff;
  return std::nullopt;
}

std::string describe_failure(const HttpResult& result) {
  switch (result.failure) {
    case TransferFailure::Network: return "the connection failed (" + result.error + ")";
    case TransferFailure::Stalled: return "no byte arrived for longer than HF_HUB_DOWNLOAD_TIMEOUT";
    case TransferFailure::Cancelled: return "the transfer was cancelled";
    case TransferFailure::Refused: return "the response was refused";
    case TransferFailure::TooLarge: return "the response was larger than allowed";
    case TransferFailure::None: break;
  }
  std::string text = "HTTP " + std::to_string(result.response.status);
  if (auto message = result.response.headers.get("X-Error-Message")) text += " (" + *message + ")";
  return text;
}

}  // namespace fetchd::transfer
