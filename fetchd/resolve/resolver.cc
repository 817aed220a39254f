#include "fetchd/resolve/resolver.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "engine/format/safetensors_index.h"
#include "fetchd/cache/cache_layout.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/request/model_reference.h"
#include "fetchd/hub/hub_client.h"
#include "fetchd/resolve/file_fetcher.h"
#include "fetchd/resolve/file_plan.h"

namespace fetchd::resolve {

namespace {

namespace fs = std::filesystem;
using hub::ListingEntry;

// What a model needs, worked out from a listing (the hub's, or a snapshot folder's).
struct ModelFiles {
  std::vector<const ListingEntry*> metadata;  // phase 1
  std::vector<const ListingEntry*> weights;   // phase 2; for safetensors known only once the index is read
  bool gguf = false;
  std::string reason;  // how the GGUF was chosen
};

bool has_gguf(const std::vector<ListingEntry>& files) {
  return std::any_of(files.begin(), files.end(), [](const auto& f) { return f.path.ends_with(".gguf"); });
}

ModelFiles plan_model(const std::vector<ListingEntry>& files, const request::ModelReference& ref) {
  ModelFiles plan;
  const bool has_config = find_file(files, "config.json") != nullptr;
  if (!ref.quant.empty() || (!has_config && has_gguf(files))) {
    auto choice = choose_gguf(files, ref.quant, ref.repo_id);
    plan.gguf = true;
    plan.weights = std::move(choice.parts);
    plan.reason = std::move(choice.reason);
    return plan;
  }
  if (!has_config) {
    throw FetchError(ErrorKind::Unsupported, "repository '" + ref.repo_id +
                                                 "' has no config.json and no .gguf file, so it is not a model this "
                                                 "server can load; nothing was downloaded");
  }
  plan.metadata = metadata_files(files);
  return plan;
}

// The files of a snapshot folder, as a listing without sizes or ids.
std::vector<ListingEntry> list_snapshot(const fs::path& dir) {
  std::vector<ListingEntry> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!fs::is_regular_file(it->path(), ec)) continue;  // follows symlinks: a dangling link is no file
    ListingEntry e;
    e.path = it->path().lexically_relative(dir).generic_string();  // not relative(): it resolves symlinks
    files.push_back(std::move(e));
  }
  return files;
}

struct CachedModel {
  std::optional<Resolution> resolution;
  std::string missing;  // why the snapshot does not hold the model, when it does not
};

// A snapshot answers without the hub when it holds every file the model needs. What the model needs comes
// from the listing recorded when fetchd fetched the commit, else (a cache another tool filled) from what the
// snapshot holds.
CachedModel cached_model(const cache::RepoCache& repo, const std::string& commit, const request::ModelReference& ref) {
  const fs::path snapshot = repo.snapshot_dir(commit);
  std::vector<ListingEntry> files;
  bool recorded = false;
  try {
    if (const auto json = repo.read_listing(commit)) {
      files = hub::parse_tree_page(*json, ref.repo_id);
      recorded = true;
    }
  } catch (const std::exception&) {
    recorded = false;  // an unreadable record is ignored: the snapshot itself still tells
  }
  if (!recorded) files = list_snapshot(snapshot);
  CachedModel out;
  try {
    auto plan = plan_model(files, ref);
    if (!plan.gguf) {
      std::optional<engine::format::SafetensorsIndex> index;
      if (find_file(files, kSafetensorsIndex) && repo.snapshot_has(commit, kSafetensorsIndex)) {
        index = engine::format::read_safetensors_index(snapshot / kSafetensorsIndex);
      }
      plan.weights = weight_files(files, index, ref.repo_id);
    }
    Resolution r;
    r.commit = commit;
    r.served_model_name = ref.typed;
    r.from_cache = true;
    r.local_path = plan.gguf ? snapshot / plan.weights.front()->path : snapshot;
    for (const auto* list : {&plan.metadata, &plan.weights}) {
      for (const auto* f : *list) {
        if (!repo.snapshot_has(commit, f->path)) throw FetchError(ErrorKind::NotFound, f->path + " is missing");
        std::error_code ec;
        r.files.push_back({f->path, fs::file_size(snapshot / f->path, ec), {Proof::Cached}, ""});
      }
    }
    out.resolution = std::move(r);
  } catch (const FetchError& e) {
    out.missing = e.what();
  } catch (const std::exception& e) {
    out.missing = e.what();
  }
  return out;
}

}  // namespace

std::string_view proof_name(Proof proof) {
  switch (proof) {
    case Proof::Sha256: return "sha256";
    case Proof::GitBlobSha1: return "git-sha1";
    case Proof::XetHash: return "xet-hash";
    case Proof::SafetensorsLayout: return "safetensors-layout";
    case Proof::GgufLayout: return "gguf-layout";
    case Proof::Local: return "local";
    case Proof::Cached: return "cached";
  }
  return "unknown";
}

Resolver::Resolver(ResolverOptions options) : options_(std::move(options)) {}

bool Resolver::first_copy_notice(const fs::path& cache_dir) {
  std::lock_guard lock(notice_mutex_);
  return copy_noticed_.insert(cache_dir).second;
}

Resolution Resolver::resolve(const ResolveRequest& request, ResolveObserver& observer,
                             const transfer::CancelToken* cancel) {
  const auto ref = request::parse_model_reference(request.model);
  if (ref.is_local()) {
    Resolution local;
    local.local_path = ref.local_path;
    local.served_model_name = ref.typed;
    local.from_cache = true;
    if (ref.kind == request::ModelReference::Kind::LocalGguf) {
      std::error_code ec;
      local.files.push_back(
          {ref.local_path.filename().string(), fs::file_size(ref.local_path, ec), {Proof::Local}, ""});
    }
    return local;
  }

  const auto settings = hub::read_hub_settings(options_.environment, request.download_dir);
  cache::RepoCache repo(settings.cache_dir, ref.repo_id);
  const std::string revision = request.revision.empty() ? "main" : request.revision;

  // 1. A complete snapshot answers without the hub: no socket, no write.
  std::string missing;
  if (const auto commit = repo.find_commit(revision)) {
    auto cached = cached_model(repo, *commit, ref);
    if (cached.resolution) {
      observer.log(ref.repo_id + " at " + revision + " (" + *commit + ") is complete in " + repo.repo_dir().string(),
                   true);
      return std::move(*cached.resolution);
    }
    missing = "snapshot " + *commit + " does not hold the model: " + cached.missing;
  }
  if (settings.offline) {
    throw FetchError(ErrorKind::OfflineMiss,
                     "HF_HUB_OFFLINE is set and repository '" + ref.repo_id + "' " +
                         (missing.empty() ? "has no recorded '" + revision + "' reference"
                                          : "has an incomplete '" + revision + "': " + missing) +
                         " under " + repo.repo_dir().string() +
                         ". Fetch it once with HF_HUB_OFFLINE unset, or point HF_HOME (or HF_HUB_CACHE) at a cache "
                         "that already holds it.");
  }

  // 2. The hub: revision → commit, listing, then the two phases.
  observer.progress(Phase::Resolving, "", 0, 0);
  hub::HubClient hub(settings, ref.repo_id, cancel, options_.retry);
  const std::string commit = hub.resolve_commit(revision);
  const bool named_revision = !request::is_commit_hash(revision);
  if (auto cached = cached_model(repo, commit, ref); cached.resolution) {
    if (named_revision) repo.write_ref(revision, commit);
    return std::move(*cached.resolution);
  }
  const auto listing = hub.list_files(commit);
  auto plan = plan_model(listing, ref);
  if (!plan.reason.empty())
    observer.log(ref.repo_id + ": serving " + plan.weights.front()->path + " (" + plan.reason + ")", false);

  cache::LockOptions lock_options = options_.lock;
  lock_options.on_wait = [&](const std::string& line) { observer.log(line, false); };
  auto lock = cache::RepoLock::acquire(repo, lock_options);

  FileFetcher fetcher(hub, repo, lock, lock_options, options_.xet_block_size, commit, observer, cancel, [&] {
    if (first_copy_notice(settings.cache_dir)) {
      observer.log("the cache at " + settings.cache_dir.string() +
                       " cannot hold symbolic links here, so snapshots hold real files",
                   false);
    }
  });
  Resolution result;
  result.commit = commit;
  result.served_model_name = ref.typed;
  for (const auto* entry : plan.metadata) result.files.push_back(fetcher.fetch(*entry, Phase::Metadata));
  if (!plan.gguf) {
    std::optional<engine::format::SafetensorsIndex> index;
    if (find_file(listing, kSafetensorsIndex)) {
      try {
        index = engine::format::read_safetensors_index(repo.snapshot_file(commit, std::string(kSafetensorsIndex)));
      } catch (const std::exception& e) {
        throw FetchError(ErrorKind::Integrity, std::string(e.what()));
      }
    }
    plan.weights = weight_files(listing, index, ref.repo_id);
  }
  for (const auto* entry : plan.weights) result.files.push_back(fetcher.fetch(*entry, Phase::Weights));
  // Only once the snapshot is complete: the listing record, then the ref.
  repo.write_listing(commit, hub::listing_to_json(listing));
  if (named_revision) repo.write_ref(revision, commit);

  result.local_path = plan.gguf ? repo.snapshot_file(commit, plan.weights.front()->path) : repo.snapshot_dir(commit);
  result.from_cache = fetcher.transferred() == 0;
  return result;
}

}  // namespace fetchd::resolve
