#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "fetchd/cache/cache_layout.h"
#include "fetchd/cache/repo_lock.h"
#include "fetchd/hub/hub_client.h"
#include "fetchd/hub/repo_listing.h"
#include "fetchd/resolve/resolver.h"
#include "fetchd/transfer/cancel_token.h"
#include "fetchd/xet/xet_download.h"

namespace fetchd::resolve {

// Fetches, proves and publishes the files of one commit into the cache: the Xet path when the hub offers
// it, else the plain transfer; the content hash the listing gives, then the layout proof, then the blob
// name and the snapshot entry. Used while the repository lock is held.
class FileFetcher {
 public:
  FileFetcher(hub::HubClient& hub, cache::RepoCache& repo, const cache::RepoLock& repo_lock,
              const cache::LockOptions& lock_options, std::uint64_t xet_block_size, std::string commit,
              ResolveObserver& observer, const transfer::CancelToken* cancel, std::function<void()> on_copy_mode);

  // One file of the listing, ending linked into the snapshot; from the cache when its blob is there.
  ResolvedFile fetch(const hub::ListingEntry& entry, Phase phase);
  std::uint64_t transferred() const { return transferred_; }  // bytes received so far

 private:
  void download(const hub::ListingEntry& entry, ResolvedFile& file, Phase phase);
  // Asks the resolve URL (HEAD, not followed) whether the file lives in a Xet store. Xet is skipped when
  // HF_HUB_DISABLE_XET is set, for files that are not LFS files, and when the probe itself fails (the plain
  // transfer then tries, with its own retries).
  std::optional<xet::XetFileInfo> probe_xet(const hub::ListingEntry& entry);
  // False when the hub will not hand out a Xet read token (401): the caller falls back to the plain path.
  bool download_xet(const hub::ListingEntry& entry, ResolvedFile& file, Phase phase, const xet::XetFileInfo& info,
                    const std::filesystem::path& partial);
  void download_plain(const hub::ListingEntry& entry, ResolvedFile& file, Phase phase,
                      const std::filesystem::path& partial, bool source_ignores_range);
  // The layout proof, then the blob name; both only for a file whose content already proved itself.
  void prove_and_publish(const hub::ListingEntry& entry, ResolvedFile& file, const std::filesystem::path& partial);
  static void discard(const std::filesystem::path& partial);
  void report(const ResolvedFile& file, const std::string& where);

  hub::HubClient& hub_;
  cache::RepoCache& repo_;
  const cache::RepoLock& repo_lock_;
  const cache::LockOptions& lock_options_;
  std::string commit_;
  ResolveObserver& observer_;
  const transfer::CancelToken* cancel_;
  std::function<void()> on_copy_mode_;
  xet::XetTokenCache xet_tokens_;  // read tokens for this repository, reused across its files
  std::uint64_t xet_block_size_;
  std::uint64_t transferred_ = 0;
};

}  // namespace fetchd::resolve
