#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/hub/hub_faults.h"

namespace testing_support {

// One file of a commit. `lfs` files are served the way the hub serves LFS files: resolve answers a 302 to
// the LFS host, and listings carry the `lfs` object. `xet` files (LFS files too) are stored as Xet: resolve
// answers a 302 to /xet/files/{hash} with the Xet headers, and listings add `xetHash`.
struct HubFile {
  std::string path;  // repository-relative, '/' separated ("original/consolidated.bin")
  std::string content;
  bool lfs = false;
  bool xet = false;
};

// One request as the test hub saw it.
struct HubRequest {
  std::string server;  // "api", "lfs", "cas" or "gateway"
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
  std::uint16_t cas_port = 0;
  std::uint16_t gateway_port = 0;
};

// A loopback HTTP server that imitates the Hugging Face hub API for hermetic tests: model info, refs, tree
// listings and resolve on the API host, LFS objects on a second host of a different origin, the hub's error
// headers, gated repositories, and fault switches (faults()) for what real hubs and networks do wrong.
// Repositories live in memory and are built through commit()/tag() while the hub serves.
//
// The LFS host serves /lfs/objects/{sha256}?sig=... and checks that `sig` is the one the redirect carried,
// so a client that drops the query string when following a redirect is caught.
//
// Xet files are served as the hub serves them through Xet: a read-token route on the API host, a CAS host
// (cas_endpoint(): /v1 and /v2 reconstructions) and a gateway host (gateway_endpoint(): xorb byte ranges for
// signed URLs), plus the plain /xet/files/{hash} path on the API host. See tests/hub/README.md.
class TestHub {
 public:
  TestHub();
  explicit TestHub(const TestHubOptions& options);
  // Stops both servers: closes every connection (stalled downloads included) and joins every thread.
  ~TestHub();
  TestHub(const TestHub&) = delete;
  TestHub& operator=(const TestHub&) = delete;

  std::string endpoint() const;          // "http://127.0.0.1:PORT": API and resolve
  std::string lfs_endpoint() const;      // "http://localhost:PORT2": another host name and port, another origin
  std::string cas_endpoint() const;      // "http://127.0.0.1:PORT3": Xet reconstructions
  std::string gateway_endpoint() const;  // "http://localhost:PORT4": xorb bytes for signed URLs

  // Adds a commit on `branch` (created from main's head when absent) whose tree is exactly `files`, and
  // returns its 40-hex id, deterministic in the parent and the files.
  std::string commit(const std::string& repo_id, const std::string& branch, std::vector<HubFile> files);
  // Points `tag` at `commit` (a commit id, or a branch or tag name).
  void tag(const std::string& repo_id, const std::string& tag, const std::string& commit);
  // One commit on main holding every file under `folder` (the .git directory aside). Files of 1 MiB or more
  // and *.safetensors, *.gguf, *.bin files are LFS files.
  void add_repository_from_folder(const std::string& repo_id, const std::filesystem::path& folder);

  // Every LFS file committed afterwards is stored as Xet, as on today's hub (files already committed keep
  // their storage).
  void set_store_lfs_as_xet(bool on);
  // New Xet chunks go into xorbs of at most this many chunks (and 64 MiB), for Xet files committed
  // afterwards. A small number gives tests files that span several xorbs.
  void set_xet_chunks_per_xorb(std::size_t chunks);
  // The Xet hash (hex form) of `path` at `revision`; nullopt when the file is absent or not a Xet file.
  std::optional<std::string> xet_hash(const std::string& repo_id, const std::string& revision,
                                      const std::string& path) const;

  void set_token(std::string token);                       // the one token the hub accepts ("Bearer TOKEN")
  void set_gated(const std::string& repo_id, bool gated);  // gated: every request for it needs the token

  HubFaults& faults();

  std::vector<HubRequest> requests() const;  // every request seen on every host, in arrival order
  void clear_requests();

  // Waits until no client holds a connection to any host; false when `timeout` passes first. Lets a test
  // prove that a client closed what it opened (a cancelled download, say).
  bool wait_for_no_connections(std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace testing_support
