#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace testing_support {

// A program run by a test: environment overrides, stdout and stderr captured to files (no pipe can fill
// up and block it), signals, and a bounded wait.
class ChildProcess {
 public:
  // Starts argv[0] with the test's environment plus `env` (an empty value unsets the variable).
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {});
  ~ChildProcess();  // kills the process if it still runs
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void signal(int sig) const;
  // False once the process has exited (it stays unreaped for wait()), so a test stops waiting for output
  // that will never come.
  bool running() const;
  // Exit status (128 + signal when killed); -1 when `timeout` passed (the process is then killed).
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(120));
  std::string out() const;
  std::string err() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::filesystem::path dir_;
};

// Waits for `condition` to hold, checking every few milliseconds, for at most `timeout`.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace testing_support
