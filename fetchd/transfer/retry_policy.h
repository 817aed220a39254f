#pragma once

#include <chrono>
#include <optional>

#include "fetchd/transfer/http_client.h"

namespace fetchd::transfer {

struct RetryPolicy {
  int max_attempts = 5;  // with the backoff below: 1 + 2 + 4 + 8 s of waiting before giving up
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{8000};
  std::chrono::milliseconds max_retry_after{300'000};  // a Retry-After longer than this gives up
};

// How long to wait before trying again after `result` (attempt counts from 1), or nullopt when the result
// is final: a success, a cancel, a refused body, a 4xx that repeating cannot fix, or attempts used up.
// Retried: network errors and stalls, 408, 5xx (exponential backoff) and 429 (Retry-After, or the
// `t=` of a RateLimit header).
std::optional<std::chrono::milliseconds> retry_delay(const HttpResult& result, int attempt, const RetryPolicy& policy);

// A sentence describing a failed transfer or an unexpected status, for error messages.
std::string describe_failure(const HttpResult& result);

}  // namespace fetchd::transfer
