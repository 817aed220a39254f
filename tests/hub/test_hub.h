#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/hub/hub_faults.h"

namespace testing_support {

// One file of a commit. `lfs` files are served the way the hub serves LFS files: resolve answers a 302 to
// the LFS host, and listings carry the `lfs` object.
struct HubFile {
  std::string path;  // repository-relative, '/' separated ("original/consolidated.bin")
  std::string content;
  bool lfs = false;
};

// One request as the test hub saw it.
struct HubRequest {
  std::string server;  // "api" or "lfs"
  std::string method;
  std::string target;  // path and query, as sent
  std::string host;    // the Host header
  std::string range;   // the Range header, empty when absent
  std::string authorization;
  int status = 0;  // the status the hub answered
};

// Where and how the hub listens. Tests take the defaults: loopback, ports chosen by the kernel.
struct TestHubOptions {
  std::string host = "127.0.0.1";  // an IPv4 address
  std::uint16_t api_port = 0;
  std::uint16_t lfs_port = 0;
};

// A loopback HTTP server that imitates the Hugging Face hub API for hermetic tests: model info, refs, tree
// listings and resolve on the API host, LFS objects on a second host of a different origin, the hub's error
// headers, gated repositories, and fault switches (faults()) for what real hubs and networks do wrong.
// Repositories live in memory and are built through commit()/tag() while the hub serves.
//
// The LFS host serves /lfs/objects/{sha256}?sig=... and checks that `sig` is the one the redirect carried,
// so a client that drops the query string when following a redirect is caught.
class TestHub {
 public:
  TestHub();
  explicit TestHub(const TestHubOptions& options);
  // Stops both servers: closes every connection (stalled downloads included) and joins every thread.
  ~TestHub();
  TestHub(const TestHub&) = delete;
  TestHub& operator=(const TestHub&) = delete;

  std::string endpoint() const;      // "http://127.0.0.1:PORT": API and resolve
  std::string lfs_endpoint() const;  // "http://localhost:PORT2": another host name and port, another origin

  // Adds a commit on `branch` (created from main's head when absent) whose tree is exactly `files`, and
  // returns its 40-hex id, deterministic in the parent and the files.
  std::string commit(const std::string& repo_id, const std::string& branch, std::vector<HubFile> files);
  // Points `tag` at `commit` (a commit id, or a branch or tag name).
  void tag(const std::string& repo_id, const std::string& tag, const std::string& commit);
  // One commit on main holding every file under `folder` (the .git directory aside). Files of 1 MiB or more
  // and *.safetensors, *.gguf, *.bin files are LFS files.
  void add_repository_from_folder(const std::string& repo_id, const std::filesystem::path& folder);

  void set_token(std::string token);                       // the one token the hub accepts ("Bearer TOKEN")
  void set_gated(const std::string& repo_id, bool gated);  // gated: every request for it needs the token

  HubFaults& faults();

  std::vector<HubRequest> requests() const;  // every request seen on both hosts, in arrival order
  void clear_requests();

  // Waits until no client holds a connection to either host; false when `timeout` passes first. Lets a test
  // prove that a client closed what it opened (a cancelled download, say).
  bool wait_for_no_connections(std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace testing_support
