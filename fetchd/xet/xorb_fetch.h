#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "fetchd/transfer/file_download.h"
#include "fetchd/transfer/http_client.h"
#include "fetchd/transfer/partial_file.h"
#include "fetchd/xet/reconstruction_fetch.h"
#include "fetchd/xet/reconstruction_plan.h"
#include "fetchd/xet/resume_state.h"
#include "fetchd/xet/xet_download.h"

namespace fetchd::xet {

// Fetches the xorb ranges of fetch units from their signed URLs, decodes them into the partial file, and
// records every finished unit in the resume state. Lives for the whole download: the concurrency it has
// learned carries over from one block of the file to the next.
class XorbFetcher {
 public:
  XorbFetcher(const XetDownloadRequest& request, const transfer::RetryPolicy& policy,
              const transfer::CancelToken* cancel, const transfer::DownloadProgress& progress,
              ReconstructionFetcher& reconstructions, const transfer::PartialFile& file, const ResumeState& state,
              DoneRanges done)
      : request_(request),
        policy_(policy),
        cancel_(cancel),
        progress_(progress),
        reconstructions_(reconstructions),
        file_(file),
        state_(state),
        done_(std::move(done)) {}

  // Runs fetch units on up to max_parallel threads, within the memory budget. Concurrency adapts: it halves
  // when the store pushes back (429, 5xx) and grows back by one with every success. Rethrows the first
  // failure once every thread has stopped.
  void run(std::vector<FetchUnit> units);

  // What is written and recorded, and the xorb bytes received; read them while run() is not running.
  const DoneRanges& done() const { return done_; }
  std::uint64_t transferred() const { return transferred_; }

 private:
  // Fetches `unit`, and in its place the units of a fresh reconstruction when its signed URL is refused
  // (403). Refusals in a row (across threads, until a fetch succeeds) are bounded by the retry policy's
  // attempts, so a store that refuses every URL ends the download instead of being asked forever.
  void execute(transfer::HttpClient& http, std::vector<std::byte>& buffer, FetchUnit unit, bool& pushed_back);
  // One unit, retried as the policy allows; false when its signed URL was refused (403).
  bool fetch_unit(transfer::HttpClient& http, std::vector<std::byte>& buffer, const FetchUnit& unit, bool& pushed_back);
  void record(const FetchUnit& unit);
  DoneRanges done_snapshot();
  void add_transferred(std::uint64_t bytes);

  const XetDownloadRequest& request_;
  const transfer::RetryPolicy& policy_;
  const transfer::CancelToken* cancel_;
  const transfer::DownloadProgress& progress_;
  ReconstructionFetcher& reconstructions_;
  const transfer::PartialFile& file_;
  const ResumeState& state_;
  DoneRanges done_;
  std::uint64_t transferred_ = 0;
  std::mutex done_mutex_;  // guards done_ and transferred_ while run() is running
  int limit_ = 4;
  std::atomic<int> refused_in_a_row_{0};
};

}  // namespace fetchd::xet
