#include "fetchd/verify/cache_verifier.h"

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "fetchd/cache/cache_layout.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/hub/repo_listing.h"
#include "fetchd/proof/content_hash.h"
#include "fetchd/proof/format_proof.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xet_hash.h"

namespace fetchd::verify {

namespace {

namespace fs = std::filesystem;

bool all_hex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// What one stored file must hash to, gathered from every snapshot entry that names it.
struct Expectation {
  std::optional<std::string> sha256;
  std::optional<std::string> git_sha1;
  std::optional<std::string> xet;
  std::string format_name;  // a snapshot path whose extension says the format
  std::vector<std::string> used_by;
  std::vector<fs::path> links;  // snapshot entries pointing at it (removed with it)
};

void expect_from_name(Expectation& e, const std::string& name) {
  if (name.size() == 64 && all_hex(name) && !e.sha256 && !e.xet) e.sha256 = name;
  if (name.size() == 40 && all_hex(name) && !e.git_sha1) e.git_sha1 = name;
}

void expect_from_listing(Expectation& e, const hub::ListingEntry& entry) {
  if (entry.lfs_oid && entry.xet_hash && *entry.lfs_oid == *entry.xet_hash) {
    e.xet = entry.xet_hash;  // a hub that stores the Xet hash where the SHA-256 would be
  } else if (entry.lfs_oid) {
    e.sha256 = entry.lfs_oid;
  } else if (!entry.oid.empty()) {
    e.git_sha1 = entry.oid;
  } else if (entry.xet_hash) {
    e.xet = entry.xet_hash;
  }
}

FileReport check(const fs::path& file, const std::string& repo_id, const Expectation& e) {
  FileReport report;
  report.path = file;
  report.repo_id = repo_id;
  report.used_by = e.used_by;
  std::vector<std::string> proofs;
  try {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) throw FetchError(ErrorKind::Internal, "cannot read its size: " + ec.message());
    std::optional<proof::Sha256> sha;
    std::optional<proof::GitBlobSha1> git;
    std::optional<xet::ContentHasher> xet_hasher;
    if (e.sha256) sha.emplace();
    if (e.git_sha1) git.emplace(size);
    if (e.xet) xet_hasher.emplace();
    if (sha || git || xet_hasher) {
      proof::hash_file_prefix(file, size, [&](std::span<const std::byte> bytes) {
        if (sha) sha->update(bytes);
        if (git) git->update(bytes);
        if (xet_hasher) xet_hasher->update(bytes);
      });
    }
    const auto compare = [&](const char* kind, const std::string& got, const std::string& want) {
      if (got != want) {
        throw FetchError(ErrorKind::Integrity, std::string(kind) + " is " + got + ", expected " + want);
      }
      proofs.emplace_back(kind);
    };
    if (sha) compare("sha256", sha->hex_digest(), *e.sha256);
    if (git) compare("git-sha1", git->hex_digest(), *e.git_sha1);
    if (xet_hasher) compare("xet-hash", xet::to_hex(xet_hasher->finish()), *e.xet);
    switch (proof::prove_format(file, e.format_name)) {
      case proof::FormatProof::Safetensors: proofs.emplace_back("safetensors-layout"); break;
      case proof::FormatProof::Gguf: proofs.emplace_back("gguf-layout"); break;
      case proof::FormatProof::None: break;
    }
  } catch (const FetchError& error) {
    report.problem = error.what();
  }
  for (const auto& p : proofs) report.proven_by += (report.proven_by.empty() ? "" : "+") + p;
  return report;
}

std::vector<std::string> repositories(const fs::path& cache_dir, const VerifyOptions& options) {
  if (options.repo_id) return {*options.repo_id};
  std::vector<std::string> repos;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("models--")) continue;
    std::string id = name.substr(8);
    if (const auto sep = id.find("--"); sep != std::string::npos) id.replace(sep, 2, "/");
    repos.push_back(id);
  }
  std::sort(repos.begin(), repos.end());
  return repos;
}

}  // namespace

std::vector<FileReport> verify_cache(const fs::path& cache_dir, const VerifyOptions& options,
                                     const std::function<void(const FileReport&)>& on_file) {
  std::vector<FileReport> reports;
  for (const auto& repo_id : repositories(cache_dir, options)) {
    const cache::RepoCache repo(cache_dir, repo_id);
    std::map<fs::path, Expectation> files;  // by the real file's path
    std::error_code ec;
    for (const auto& snapshot : fs::directory_iterator(repo.snapshots_dir(), ec)) {
      const std::string commit = snapshot.path().filename().string();
      std::map<std::string, hub::ListingEntry> listed;
      try {
        if (request::is_commit_hash(commit)) {
          if (const auto json = repo.read_listing(commit)) {
            for (auto& entry : hub::parse_tree_page(*json, repo_id)) listed[entry.path] = std::move(entry);
          }
        }
      } catch (const std::exception&) {
        listed.clear();  // an unreadable record: fall back to blob names
      }
      for (const auto& item : fs::recursive_directory_iterator(snapshot.path(), ec)) {
        if (!item.is_regular_file()) continue;  // follows symlinks; dangling ones are no file
        const auto relative = item.path().lexically_relative(snapshot.path()).generic_string();
        const auto real = fs::canonical(item.path(), ec);
        if (ec) continue;
        auto& e = files[real];
        e.used_by.push_back(commit + "/" + relative);
        if (item.is_symlink()) e.links.push_back(item.path());
        if (e.format_name.empty() && (relative.ends_with(".safetensors") || relative.ends_with(".gguf"))) {
          e.format_name = relative;
        }
        if (const auto found = listed.find(relative); found != listed.end()) expect_from_listing(e, found->second);
        if (real.parent_path() == fs::canonical(repo.blobs_dir(), ec)) expect_from_name(e, real.filename().string());
      }
    }
    // Blobs no snapshot names are checked by their names alone.
    for (const auto& blob : fs::directory_iterator(repo.blobs_dir(), ec)) {
      const auto name = blob.path().filename().string();
      if (!blob.is_regular_file() || name.ends_with(".incomplete") || name.find(".incomplete.") != std::string::npos) {
        continue;
      }
      const auto real = fs::canonical(blob.path(), ec);
      if (!ec && !files.contains(real)) expect_from_name(files[real], name);
    }

    for (const auto& [path, expectation] : files) {
      auto report = check(path, repo_id, expectation);
      if (!report.ok() && options.remove_failures) {
        std::error_code remove_error;
        for (const auto& link : expectation.links) fs::remove(link, remove_error);
        report.removed = fs::remove(path, remove_error);
      }
      if (on_file) on_file(report);
      reports.push_back(std::move(report));
    }
  }
  return reports;
}

}  // namespace fetchd::verify
