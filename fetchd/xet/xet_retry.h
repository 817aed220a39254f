#pragma once

#include <chrono>
#include <string>

#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/cancel_token.h"

namespace fetchd::xet {

// Waits `delay` before the next attempt; a cancel meanwhile ends the download with FetchError(Network)
// that says what was being waited for.
inline void wait_or_cancel(const transfer::CancelToken* cancel, std::chrono::milliseconds delay,
                           const std::string& what) {
  if (!transfer::wait_unless_cancelled(cancel, delay)) {
    throw FetchError(ErrorKind::Network, "cancelled while " + what);
  }
}

}  // namespace fetchd::xet
