#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fetchd/cache/repo_lock.h"
#include "fetchd/hub/hub_settings.h"
#include "fetchd/transfer/cancel_token.h"
#include "fetchd/transfer/retry_policy.h"

namespace fetchd::resolve {

// How a file proved itself (a file usually has a content hash and, for weights, a layout proof).
enum class Proof { Sha256, GitBlobSha1, XetHash, SafetensorsLayout, GgufLayout, Local, Cached };
std::string_view proof_name(Proof proof);

struct ResolvedFile {
  std::string path;  // repository-relative
  std::uint64_t size = 0;
  std::vector<Proof> proofs;
  std::string blob_id;
};

struct Resolution {
  std::filesystem::path local_path;  // snapshot directory, or the .gguf file to load
  std::string commit;                // empty for local paths
  std::string served_model_name;     // the name as typed
  std::vector<ResolvedFile> files;
  bool from_cache = false;  // no byte transferred
};

struct ResolveRequest {
  std::string model;
  std::string revision;      // empty: main
  std::string download_dir;  // empty: the cache the environment names
};

enum class Phase { Resolving, Metadata, Weights, Verifying };

// Receives what a resolve does, as it happens. Calls come from the resolving thread.
class ResolveObserver {
 public:
  virtual ~ResolveObserver() = default;
  virtual void progress(Phase /*phase*/, const std::string& /*file*/, std::uint64_t /*done*/, std::uint64_t /*total*/) {
  }
  // A line for the log; `detail` lines are shown only with --verbose.
  virtual void log(const std::string& /*line*/, bool /*detail*/) {}
};

struct ResolverOptions {
  hub::Environment environment = hub::process_environment();
  transfer::RetryPolicy retry;
  cache::LockOptions lock;
  std::uint64_t xet_block_size = 256u << 20;  // bytes of a Xet file asked of the store per reconstruction
};

// Turns a model reference into a local path whose every file has proven itself, fetching what the cache
// lacks. Safe to call from several threads; calls for one repository are serialised by the repository
// lock (across processes too).
class Resolver {
 public:
  explicit Resolver(ResolverOptions options = {});

  // Throws FetchError.
  Resolution resolve(const ResolveRequest& request, ResolveObserver& observer,
                     const transfer::CancelToken* cancel = nullptr);

 private:
  // Cache directories already told that they hold real files instead of symlinks.
  bool first_copy_notice(const std::filesystem::path& cache_dir);

  ResolverOptions options_;
  std::mutex notice_mutex_;
  std::set<std::filesystem::path> copy_noticed_;
};

}  // namespace fetchd::resolve
