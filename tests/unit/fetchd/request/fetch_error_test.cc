// fetchd's errors: one exit code per kind, the contract scripts and init containers read.
#include "fetchd/request/fetch_error.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace fetchd {
namespace {

TEST(FetchError, EachKindHasItsOwnExitCode) {
  const std::vector<std::pair<ErrorKind, int>> expected = {
      {ErrorKind::Internal, 1},  {ErrorKind::Usage, 2},       {ErrorKind::NotFound, 3}, {ErrorKind::Auth, 4},
      {ErrorKind::Integrity, 5}, {ErrorKind::OfflineMiss, 6}, {ErrorKind::Network, 7},  {ErrorKind::Unsupported, 8}};
  for (const auto& [kind, code] : expected) EXPECT_EQ(exit_code(kind), code) << error_kind_name(kind);
}

}  // namespace
}  // namespace fetchd
