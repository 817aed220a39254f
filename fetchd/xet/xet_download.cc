// download_xet_file: the read token, the resume state, a reconstruction per block of the file and the
// fetch of its xorb ranges (xorb_fetch.cc), then the proof over the whole file.

#include "fetchd/xet/xet_download.h"

#include <algorithm>
#include <system_error>

#include "fetchd/proof/content_hash.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/partial_file.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/reconstruction_fetch.h"
#include "fetchd/xet/reconstruction_plan.h"
#include "fetchd/xet/resume_state.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_fetch.h"

namespace fetchd::xet {

namespace {

namespace fs = std::filesystem;

class XetDownload {
 public:
  XetDownload(XetTokenCache& tokens, const XetDownloadRequest& request, const transfer::RetryPolicy& policy,
              const transfer::CancelToken* cancel, const transfer::DownloadProgress& progress)
      : tokens_(tokens),
        request_(request),
        policy_(policy),
        cancel_(cancel),
        progress_(progress),
        state_(fs::path(request.partial.string() + ".xet-state"), request.file.file_hash, request.file.size) {}

  XetDownloadResult run() {
    // The token first: a hub that refuses it (the caller then falls back to the plain path) must find the
    // partial file as it was.
    tokens_.get(request_.file.token_url);
    const std::uint64_t size = request_.file.size;
    DoneRanges resumed = state_.load();
    result_.resumed_bytes = resumed.total();
    if (result_.resumed_bytes == 0) {
      std::error_code ec;
      fs::remove(request_.partial, ec);  // bytes without a record prove nothing: start clean
      // The record goes down before the file: a partial file written at term offsets must never lie in the
      // cache without it, or a plain fetch (HF_HUB_DISABLE_XET, a hub that stops giving tokens) would take
      // its full-size, hole-filled body for a prefix to resume from.
      state_.save(resumed);
    }
    const auto started = std::chrono::steady_clock::now();
    transfer::PartialFile file(request_.partial);
    file.resize(size);
    ReconstructionFetcher reconstructions(tokens_, request_, policy_, cancel_);
    XorbFetcher xorbs(request_, policy_, cancel_, progress_, reconstructions, file, state_, std::move(resumed));
    const DoneRanges& done = xorbs.done();
    transfer::HttpClient http(cancel_);
    for (std::uint64_t block = 0; block < size; block += request_.block_size) {
      const std::uint64_t block_end = std::min(size, block + request_.block_size);
      if (done.covers(block, block_end)) continue;
      const auto recon = reconstructions.fetch(http, block, block_end - 1);
      if (!recon) break;  // 416: the store has nothing past here
      xorbs.run(plan_units(*recon, block, block, block_end, done, request_.name));
    }
    file.sync();
    result_.transferred = xorbs.transferred();
    result_.reconstruction_version = reconstructions.answered_version();
    if (!done.covers(0, size)) {
      throw FetchError(ErrorKind::Integrity, "the Xet store's reconstruction of '" + request_.name + "' covers " +
                                                 std::to_string(done.total()) + " of its " + std::to_string(size) +
                                                 " bytes; the partial file is kept for the next run");
    }
    const auto fetched = std::chrono::steady_clock::now();
    result_.fetch_seconds = std::chrono::duration<double>(fetched - started).count();
    prove();
    result_.prove_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - fetched).count();
    state_.remove();
    result_.size = size;
    return result_;
  }

 private:
  // Proof: chunk the finished file again, rebuild its Xet hash, and compare; SHA-256 in the same pass.
  void prove() {
    ContentHasher xet;
    proof::Sha256 sha;
    proof::hash_file_prefix(request_.partial, request_.file.size, [&](std::span<const std::byte> bytes) {
      xet.update(bytes);
      sha.update(bytes);
    });
    const std::string got = to_hex(xet.finish());
    result_.sha256 = sha.hex_digest();
    const auto discard = [&] {
      std::error_code ec;
      fs::remove(request_.partial, ec);
      state_.remove();
    };
    if (got != request_.file.file_hash) {
      discard();
      throw FetchError(ErrorKind::Integrity, "'" + request_.name + "' rebuilt from the Xet store hashes to " + got +
                                                 " but the hub names it " + request_.file.file_hash +
                                                 " (X-Xet-Hash). The download was deleted; run again, and if this "
                                                 "repeats, the store holds corrupt data for this file.");
    }
    if (request_.expected_sha256 && *request_.expected_sha256 != result_.sha256) {
      discard();
      throw FetchError(ErrorKind::Integrity, "'" + request_.name + "' has the right Xet hash but SHA-256 " +
                                                 result_.sha256 + " where the listing says " +
                                                 *request_.expected_sha256 + "; the download was deleted");
    }
  }

  XetTokenCache& tokens_;
  const XetDownloadRequest& request_;
  const transfer::RetryPolicy& policy_;
  const transfer::CancelToken* cancel_;
  const transfer::DownloadProgress& progress_;
  ResumeState state_;
  XetDownloadResult result_;
};

}  // namespace

XetDownloadResult download_xet_file(XetTokenCache& tokens, const XetDownloadRequest& request,
                                    const transfer::RetryPolicy& policy, const transfer::CancelToken* cancel,
                                    const transfer::DownloadProgress& progress) {
  return XetDownload(tokens, request, policy, cancel, progress).run();
}

}  // namespace fetchd::xet
