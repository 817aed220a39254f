#pragma once

// serverd's side of the fetchd contract (proto/fetch/v1/fetch.proto): Resolve over gRPC against a sidecar
// (--fetchd ADDR, the Kubernetes case) or against a fetchd that serverd starts itself as a child on a
// private Unix socket (one command on one machine).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "fetch/v1/fetch.pb.h"

namespace serverd::fetch {

struct ResolveArgs {
  std::string model;  // as typed: org/repo, org/repo:QUANT
  std::string revision;
  std::string download_dir;
};

// Resolves through the fetchd at `address` (unix:PATH or HOST:PORT), passing every progress event to
// `progress`, and returns the result. Throws fetchd::FetchError with the kind and sentence fetchd reported,
// or of kind Network when fetchd cannot be reached within `connect_timeout`.
::fetch::v1::ResolveResult resolve(const std::string& address, const ResolveArgs& args,
                                   const std::function<void(const ::fetch::v1::Progress&)>& progress,
                                   std::chrono::seconds connect_timeout = std::chrono::seconds(30));

// The fetchd binary serverd starts: $FETCHD_BINARY, else fetchd beside serverd (an install's bin/), else
// ../fetchd/fetchd beside it (the build tree), else `fetchd` on PATH.
std::filesystem::path find_fetchd_binary();

// `fetchd serve` as a child process on a Unix socket in a fresh private directory. The destructor stops
// it (SIGTERM, then waits) and removes the directory; terminate() asks it to stop sooner (its downloads in
// flight are cancelled, their partial files kept for the next run).
class FetchdChild {
 public:
  static std::unique_ptr<FetchdChild> start(const std::filesystem::path& binary);
  ~FetchdChild();
  FetchdChild(const FetchdChild&) = delete;
  FetchdChild& operator=(const FetchdChild&) = delete;

  const std::string& address() const { return address_; }
  // Sends the child SIGTERM; callable from any thread, any number of times.
  void terminate() const;

 private:
  FetchdChild(pid_t pid, std::filesystem::path dir, std::string address)
      : pid_(pid), dir_(std::move(dir)), address_(std::move(address)) {}

  pid_t pid_;
  std::filesystem::path dir_;
  std::string address_;
};

}  // namespace serverd::fetch
