#include "fetchd/resolve/file_fetcher.h"

#include <cstdio>
#include <system_error>

#include "fetchd/proof/content_hash.h"
#include "fetchd/proof/format_proof.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/file_download.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xet_hash.h"

namespace fetchd::resolve {

namespace fs = std::filesystem;
using hub::ListingEntry;

namespace {

std::string join_proofs(const std::vector<Proof>& proofs) {
  std::string out;
  for (const auto p : proofs) out += (out.empty() ? "" : "+") + std::string(proof_name(p));
  return out;
}

}  // namespace

FileFetcher::FileFetcher(hub::HubClient& hub, cache::RepoCache& repo, const cache::RepoLock& repo_lock,
                         const cache::LockOptions& lock_options, std::uint64_t xet_block_size, std::string commit,
                         ResolveObserver& observer, const transfer::CancelToken* cancel,
                         std::function<void()> on_copy_mode)
    : hub_(hub),
      repo_(repo),
      repo_lock_(repo_lock),
      lock_options_(lock_options),
      commit_(std::move(commit)),
      observer_(observer),
      cancel_(cancel),
      on_copy_mode_(std::move(on_copy_mode)),
      xet_tokens_(hub.authorization(), hub.policy(), cancel, hub.settings().etag_timeout),
      xet_block_size_(xet_block_size) {}

ResolvedFile FileFetcher::fetch(const ListingEntry& entry, Phase phase) {
  ResolvedFile file{entry.path, entry.content_size().value_or(0), {}, entry.blob_id()};
  if (repo_.snapshot_has(commit_, entry.path)) {
    file.proofs = {Proof::Cached};
    std::error_code ec;
    file.size = fs::file_size(repo_.snapshot_file(commit_, entry.path), ec);
    report(file, "already in the snapshot");
    return file;
  }
  if (file.blob_id.empty()) {
    // No object id: name the blob by commit and path (hashed, so any path makes a valid file name); no
    // content id can take that form.
    const auto path_hash = proof::sha256_hex(std::as_bytes(std::span(entry.path.data(), entry.path.size())));
    file.blob_id = commit_ + "--" + path_hash.substr(0, 24);
    observer_.log("'" + entry.path + "': the listing gives no object id, so its blob is named by commit plus path (" +
                      file.blob_id + ")",
                  true);
  }
  if (repo_.has_blob(file.blob_id)) {
    file.proofs = {Proof::Cached};
  } else {
    download(entry, file, phase);
  }
  if (repo_.link_snapshot_file(commit_, entry.path, file.blob_id, !hub_.settings().disable_symlinks) ==
      cache::LinkMode::Copy) {
    on_copy_mode_();
  }
  report(file, "blobs/" + file.blob_id);
  return file;
}

void FileFetcher::download(const ListingEntry& entry, ResolvedFile& file, Phase phase) {
  const fs::path partial = repo_.incomplete_path(file.blob_id);
  fs::create_directories(partial.parent_path());
  const auto blob_lock = cache::BlobFileLock::acquire(repo_, file.blob_id, lock_options_);

  bool plain_source_ignores_range = false;
  if (const auto xet = probe_xet(entry)) {
    if (download_xet(entry, file, phase, *xet, partial)) {
      prove_and_publish(entry, file, partial);
      return;
    }
    plain_source_ignores_range = true;  // the hub's plain path for Xet files serves whole bodies
  }
  download_plain(entry, file, phase, partial, plain_source_ignores_range);
  prove_and_publish(entry, file, partial);
}

// Asks the resolve URL (HEAD, not followed) whether the file lives in a Xet store. Xet is skipped when
// HF_HUB_DISABLE_XET is set, for files that are not LFS files, and when the probe itself fails (the plain
// transfer then tries, with its own retries).
std::optional<xet::XetFileInfo> FileFetcher::probe_xet(const ListingEntry& entry) {
  if (hub_.settings().disable_xet || !(entry.is_lfs() || entry.xet_hash)) return std::nullopt;
  transfer::HttpRequest head;
  head.method = "HEAD";
  head.url = hub_.resolve_url(commit_, entry.path);
  head.connect_timeout = hub_.settings().etag_timeout;
  head.stall_timeout = hub_.settings().etag_timeout;
  if (const auto auth = hub_.authorization(); !auth.empty()) head.headers.push_back(auth);
  const auto result = hub_.http().perform(head);
  if (result.failure != transfer::TransferFailure::None) return std::nullopt;
  return xet::xet_info_from_headers(result.response.headers, hub_.settings().endpoint, entry.content_size());
}

// False when the hub will not hand out a Xet read token (401): the caller falls back to the plain path.
bool FileFetcher::download_xet(const ListingEntry& entry, ResolvedFile& file, Phase phase, const xet::XetFileInfo& info,
                               const fs::path& partial) {
  xet::XetDownloadRequest request;
  request.file = info;
  request.partial = partial;
  request.name = entry.path;
  // OpenWeights-style hubs put the Xet hash where a SHA-256 would be: never compare it as one.
  if (entry.lfs_oid && *entry.lfs_oid != info.file_hash) request.expected_sha256 = entry.lfs_oid;
  request.connect_timeout = hub_.settings().etag_timeout;
  request.stall_timeout = hub_.settings().download_timeout;
  request.block_size = xet_block_size_;
  xet::XetDownloadResult result;
  try {
    result = xet::download_xet_file(xet_tokens_, request, hub_.policy(), cancel_,
                                    [&](std::uint64_t done, std::optional<std::uint64_t> total) {
                                      observer_.progress(phase, entry.path, done, total.value_or(0));
                                    });
  } catch (const FetchError& e) {
    if (e.kind() != ErrorKind::Auth) throw;
    observer_.log("'" + entry.path + "': the hub gives no Xet read token (" + e.what() +
                      "); fetching it through the plain redirect",
                  false);
    return false;
  }
  transferred_ += result.transferred;
  file.size = result.size;
  if (result.resumed_bytes > 0) {
    observer_.log(
        "'" + entry.path + "': resumed with " + std::to_string(result.resumed_bytes) + " bytes already rebuilt", true);
  }
  file.proofs.push_back(Proof::XetHash);
  if (request.expected_sha256) file.proofs.push_back(Proof::Sha256);
  char timing[96];
  std::snprintf(timing, sizeof timing, "fetched in %.2f s, proven in %.2f s", result.fetch_seconds,
                result.prove_seconds);
  observer_.log("'" + entry.path + "': rebuilt from the Xet store (reconstruction V" +
                    std::to_string(result.reconstruction_version) + "), " + timing,
                true);
  return true;
}

void FileFetcher::download_plain(const ListingEntry& entry, ResolvedFile& file, Phase phase, const fs::path& partial,
                                 bool source_ignores_range) {
  transfer::DownloadRequest request;
  request.url = hub_.resolve_url(commit_, entry.path);
  request.credential_origin = hub_.endpoint_origin();
  request.authorization = hub_.authorization();
  request.partial = partial;
  request.size = entry.content_size();
  request.hash = entry.is_lfs()      ? transfer::ContentHash::Sha256
                 : entry.oid.empty() ? transfer::ContentHash::None
                                     : transfer::ContentHash::GitBlobSha1;
  request.name = entry.path;
  request.connect_timeout = hub_.settings().etag_timeout;
  request.stall_timeout = hub_.settings().download_timeout;
  request.restart_when_range_ignored = source_ignores_range;
  // A partial file that an interrupted Xet download wrote holds terms at their offsets, with holes: it is
  // no prefix to resume from.
  if (const fs::path xet_state = partial.string() + ".xet-state"; fs::exists(xet_state)) {
    discard(partial);
    discard(xet_state);
  }

  const auto result = transfer::download_file(
      hub_.http(), request, hub_.policy(), cancel_,
      [&](const transfer::HttpResult& r) { return hub_.error_for(r, "'" + entry.path + "'"); },
      [&](std::uint64_t done, std::optional<std::uint64_t> total) {
        observer_.progress(phase, entry.path, done, total.value_or(0));
      });
  transferred_ += result.transferred;
  file.size = result.size;
  if (result.resumed_from > 0) {
    observer_.log("'" + entry.path + "': resumed at byte " + std::to_string(result.resumed_from), true);
  }
  if (auto served = result.first_hop_headers.get("X-Repo-Commit"); served && *served != commit_) {
    discard(partial);
    throw FetchError(ErrorKind::Integrity, "the hub served '" + entry.path + "' from commit " + *served +
                                               " when asked for commit " + commit_ + "; the download was deleted");
  }
  observer_.progress(Phase::Verifying, entry.path, result.size, result.size);
  if (request.hash == transfer::ContentHash::None) {
    observer_.log("'" + entry.path + "': the listing gives no content hash; it is proven by its size and format only",
                  true);
    return;
  }
  // A Xet-backed listing may carry the Xet hash as its "SHA-256" (OpenWeights): that is no SHA-256.
  const bool xet_hash_listed = entry.is_lfs() && entry.xet_hash && *entry.lfs_oid == *entry.xet_hash;
  const std::string& expected = xet_hash_listed ? *entry.xet_hash : entry.is_lfs() ? *entry.lfs_oid : entry.oid;
  const char* kind = xet_hash_listed ? "Xet hash" : entry.is_lfs() ? "SHA-256" : "git blob SHA-1";
  const std::string got = xet_hash_listed ? xet::to_hex(xet::hash_file_by_chunks(partial)) : result.digest;
  if (got == expected) {
    file.proofs.push_back(xet_hash_listed ? Proof::XetHash : entry.is_lfs() ? Proof::Sha256 : Proof::GitBlobSha1);
    return;
  }
  discard(partial);
  // The bytes an earlier run left are the likelier culprit than the wire (a partial file written by another
  // tool, or damaged on disk): one more fetch from the start settles it.
  if (result.resumed_from > 0) {
    observer_.log("'" + entry.path + "': resumed at byte " + std::to_string(result.resumed_from) +
                      " and failed its proof (" + kind + " " + got + "); fetching it again from the start",
                  false);
    download_plain(entry, file, phase, partial, source_ignores_range);
    return;
  }
  throw FetchError(ErrorKind::Integrity, "'" + entry.path + "' arrived with " + kind + " " + got +
                                             " but the listing names " + expected +
                                             ". The download was deleted; run again, and if this repeats, "
                                             "something between the hub and this machine alters the bytes.");
}

// The layout proof, then the blob name; both only for a file whose content already proved itself.
void FileFetcher::prove_and_publish(const ListingEntry& entry, ResolvedFile& file, const fs::path& partial) {
  try {
    switch (proof::prove_format(partial, entry.path)) {
      case proof::FormatProof::Safetensors: file.proofs.push_back(Proof::SafetensorsLayout); break;
      case proof::FormatProof::Gguf: file.proofs.push_back(Proof::GgufLayout); break;
      case proof::FormatProof::None: break;
    }
  } catch (const FetchError&) {
    discard(partial);
    throw;
  }
  if (repo_lock_.lost()) {
    throw FetchError(ErrorKind::Internal, "another fetchd took over the lock on '" + repo_.repo_id() + "' while '" +
                                              entry.path +
                                              "' was being fetched (this one could not renew its lease in time); "
                                              "nothing was published. Run again.");
  }
  repo_.publish_blob(partial, file.blob_id);
}

void FileFetcher::discard(const fs::path& partial) {
  std::error_code ec;
  fs::remove(partial, ec);
}

void FileFetcher::report(const ResolvedFile& file, const std::string& where) {
  observer_.log(
      file.path + "  " + std::to_string(file.size) + " bytes  proven by " + join_proofs(file.proofs) + "  -> " + where,
      true);
}

}  // namespace fetchd::resolve
