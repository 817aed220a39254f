#pragma once

#include <gtest/gtest.h>

#include "fetchd/request/fetch_error.h"

namespace testing_support {

// The FetchError `f` throws; a test failure (and an empty error) when it throws none.
template <typename F>
fetchd::FetchError error_from(F&& f) {
  try {
    f();
  } catch (const fetchd::FetchError& e) {
    return e;
  }
  ADD_FAILURE() << "no FetchError was thrown";
  return {fetchd::ErrorKind::Internal, ""};
}

}  // namespace testing_support
