// The test-hub binary as a child process: it serves a folder of repositories (as Xet with --xet) until
// SIGTERM, and refuses a missing root.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tests/hub/hub_test_client.h"
#include "tests/hub/test_hub_fixture.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace testing_support {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// ---- The test-hub binary ------------------------------------------------------------------------------

// A child process whose stdout this test reads; killed on destruction if still running.
class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& arguments) {
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[1]);
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    const int error = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_ends[1]);
    stdout_fd_ = pipe_ends[0];
    if (error != 0) throw std::runtime_error("posix_spawn failed for " + arguments[0]);
  }

  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(stdout_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line on its stdout; nullopt on end of file or when `timeout` passes.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (const std::size_t newline = pending_.find('\n'); newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      if (!wait_readable(deadline)) return std::nullopt;
      char buffer[4096];
      const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
      if (n <= 0) return std::nullopt;
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }

  // Sends `signal` and waits (bounded) for the exit; the exit status, or -1 when it did not exit in time.
  int stop(int signal, std::chrono::milliseconds timeout) {
    ::kill(pid_, signal);
    // The process closes its stdout when it exits; wait for that end of file, then reap it.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (wait_readable(deadline)) {
      if (::read(stdout_fd_, buffer, sizeof buffer) <= 0) {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

 private:
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd watched{stdout_fd_, POLLIN, 0};
    return ::poll(&watched, 1, static_cast<int>(left.count())) > 0;
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
};

TEST(TestHubBinary, ServesAFolderOfRepositoriesUntilSigterm) {
  TempDir root;
  std::filesystem::create_directories(root / "org" / "model" / "original");
  write_file(root / "org" / "model" / "config.json", std::string_view(kHello));
  write_file(root / "org" / "model" / "model.safetensors", std::string_view("weights!"));
  write_file(root / "org" / "model" / "original" / "params.json", std::string_view("{}"));
  std::filesystem::create_directories(root / "other" / "repo");
  write_file(root / "other" / "repo" / "README.md", std::string_view("# hi"));

  ChildProcess hub({TEST_HUB_BINARY, "--root", root.path().string(), "--token", "tok"});
  const std::optional<std::string> banner = hub.read_line(30s);
  ASSERT_TRUE(banner.has_value());
  const std::string serving = "test-hub: serving ";
  ASSERT_THAT(*banner, StartsWith(serving + "http://127.0.0.1:"));
  const std::string endpoint = banner->substr(serving.size(), banner->find(' ', serving.size()) - serving.size());
  EXPECT_THAT(*banner, HasSubstr("(lfs http://localhost:"));

  EXPECT_EQ(http_get(endpoint + "/api/models/org/model/refs").status, 401);  // --token gates every repository
  const std::vector<std::string> authorized = {"Authorization: Bearer tok"};
  const HttpResult info = http_get_with(endpoint + "/api/models/org/model", authorized);
  ASSERT_EQ(info.status, 200);
  EXPECT_THAT(string_members(parse_json(info.body)["siblings"], "rfilename"),
              ElementsAre("config.json", "model.safetensors", "original/params.json"));
  EXPECT_EQ(http_get_with(endpoint + "/org/model/resolve/main/config.json", authorized).body, kHello);
  const HttpResult redirect = http_get_with(endpoint + "/org/model/resolve/main/model.safetensors", authorized);
  EXPECT_EQ(redirect.status, 302);
  EXPECT_EQ(http_get(redirect.header("location")).body, "weights!");
  EXPECT_EQ(http_get_with(endpoint + "/other/repo/resolve/main/README.md", authorized).body, "# hi");

  EXPECT_EQ(hub.stop(SIGTERM, 15s), 0);
}

TEST(TestHubBinary, ServesLfsFilesAsXetWithTheXetFlag) {
  TempDir root;
  std::filesystem::create_directories(root / "org" / "model");
  const std::string weights = pattern_bytes(300000);
  write_file(root / "org" / "model" / "model.safetensors", std::string_view(weights));

  ChildProcess hub({TEST_HUB_BINARY, "--root", root.path().string(), "--xet"});
  const std::optional<std::string> banner = hub.read_line(30s);
  ASSERT_TRUE(banner.has_value());
  EXPECT_THAT(*banner, HasSubstr(", cas http://127.0.0.1:"));
  EXPECT_THAT(*banner, HasSubstr(", gateway http://localhost:"));
  const std::string serving = "test-hub: serving ";
  const std::string endpoint = banner->substr(serving.size(), banner->find(' ', serving.size()) - serving.size());
  const HttpResult redirect = http_get(endpoint + "/org/model/resolve/main/model.safetensors");
  EXPECT_EQ(redirect.status, 302);
  EXPECT_EQ(redirect.header("x-xet-hash").size(), 64u);
  EXPECT_EQ(redirect.header("location"), endpoint + "/xet/files/" + redirect.header("x-xet-hash"));
  EXPECT_TRUE(http_get(redirect.header("location")).body == weights);
  EXPECT_EQ(hub.stop(SIGTERM, 15s), 0);
}

TEST(TestHubBinary, RefusesAMissingRoot) {
  std::string output;
  EXPECT_EQ(run_command(std::string(TEST_HUB_BINARY) + " --root /nonexistent/test-hub-root", output), 2);
  EXPECT_THAT(output, HasSubstr("usage:"));
}

}  // namespace
}  // namespace testing_support
