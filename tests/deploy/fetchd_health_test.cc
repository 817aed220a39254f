// `fetchd health`, the exec probe of the fetchd sidecar in k8s/: SERVING and exit 0 against a running
// `fetchd serve`, the kind's exit code and a sentence naming the address when nothing answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
using testing_support::ChildProcess;
using testing_support::TempDir;

constexpr int kNetworkExit = 7;  // fetchd's exit code for ErrorKind::Network

TEST(FetchdHealth, AnswersServingWhileServeRunsAndFailsOnceItStops) {
  TempDir dir;
  const std::string address = "unix:" + (dir / "fetchd.sock").string();
  ChildProcess server({FETCHD_BINARY, "serve", "--listen", address}, {{"HF_HOME", (dir / "home").string()}});
  ASSERT_TRUE(testing_support::eventually([&] { return fs::exists(dir / "fetchd.sock"); })) << server.err();

  ChildProcess probe({FETCHD_BINARY, "health", "--address", address});
  EXPECT_EQ(probe.wait(), 0) << probe.err();
  EXPECT_EQ(probe.out(), "SERVING\n");

  server.signal(SIGTERM);
  ASSERT_EQ(server.wait(), 0) << server.err();
  ChildProcess after({FETCHD_BINARY, "health", "--address", address, "--timeout", "1"});
  EXPECT_EQ(after.wait(), kNetworkExit);
  EXPECT_THAT(after.err(), HasSubstr("fetchd: health: no answer from '" + address + "' within 1 s"));
}

TEST(FetchdHealth, NeedsAnAddress) {
  ChildProcess probe({FETCHD_BINARY, "health"});
  EXPECT_EQ(probe.wait(), 2);
  EXPECT_THAT(probe.err(), HasSubstr("health needs --address unix:PATH or HOST:PORT"));
}

}  // namespace
