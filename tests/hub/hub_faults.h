#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace testing_support {

// The misbehaviours a test can switch on in the test hub. Every switch is off by default, is safe to flip
// from any thread, and takes effect for requests that arrive afterwards: a request reads one consistent
// set of switches when it arrives (settings()), so flipping one mid-download does not change that download.
class HubFaults {
 public:
  // What one request sees.
  struct Settings {
    bool ignore_range = false;                 // downloads answer 200 with the whole body despite Range
    std::optional<std::uint64_t> truncate_at;  // send this many body bytes, then close the connection
    std::optional<std::uint64_t> stall_at;     // send this many body bytes, then nothing until disconnect/stop
    bool redirect_api = false;                 // every /api/ request answers 302 to itself
    bool relative_lfs_redirect = false;        // LFS resolves redirect to a relative /lfs/objects/... on the API host
    bool corrupt_lfs = false;                  // LFS downloads flip one byte (same length)
    std::size_t tree_page_size = 1000;         // tree listing entries per page
  };

  // A response fail_next() injects in place of normal service.
  struct InjectedFailure {
    int status = 500;
    std::map<std::string, std::string> headers;
  };

  void set_ignore_range(bool on);
  void set_truncate_at(std::optional<std::uint64_t> body_bytes);
  void set_stall_at(std::optional<std::uint64_t> body_bytes);
  void set_redirect_api(bool on);
  void set_relative_lfs_redirect(bool on);
  void set_corrupt_lfs(bool on);
  void set_tree_page_size(std::size_t entries);  // at least 1

  // The next `count` requests (on either host) whose target (path and query) contains `path_substring` get
  // `status` with `headers`, then normal service resumes. Rules queue up; the oldest matching one applies.
  void fail_next(std::string path_substring, int count, int status, std::map<std::string, std::string> headers = {});

  // The tree endpoint of `repo_id` answers `json_body` verbatim (200), for every revision and page.
  void override_tree(const std::string& repo_id, std::string json_body);
  void clear_tree_override(const std::string& repo_id);

  // Every switch off, every queued failure and tree override dropped.
  void reset();

  // --- What the hub reads ---
  Settings settings() const;
  // Consumes one use of the oldest fail_next() rule matching `target`, if any.
  std::optional<InjectedFailure> take_failure(std::string_view target);
  std::optional<std::string> tree_override(const std::string& repo_id) const;

 private:
  struct FailureRule {
    std::string path_substring;
    int remaining = 0;
    InjectedFailure failure;
  };

  mutable std::mutex mutex_;
  Settings settings_;
  std::deque<FailureRule> failure_rules_;
  std::map<std::string, std::string> tree_overrides_;
};

}  // namespace testing_support
