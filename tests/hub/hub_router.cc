#include "tests/hub/hub_router.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "tests/hub/hub_hashing.h"

namespace testing_support::hub {
namespace {

std::string join(const std::vector<std::string>& parts, std::size_t first, std::size_t last, char separator) {
  std::string joined;
  for (std::size_t i = first; i < last; ++i) {
    if (i > first) joined.push_back(separator);
    joined += parts[i];
  }
  return joined;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string hex_encode(std::string_view bytes) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char c : bytes) {
    hex.push_back(kHexDigits[c >> 4]);
    hex.push_back(kHexDigits[c & 0x0f]);
  }
  return hex;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = hex_value(hex[i]);
    const int low = hex_value(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  return bytes;
}

HttpResponse repository_not_found(const std::string& repo_id) {
  return hub_error(404, "RepoNotFound", "Repository not found: " + repo_id);
}

HttpResponse revision_not_found(const Repository& repository, const std::string& revision) {
  const auto names = [](const std::map<std::string, std::string>& refs) {
    std::string listed;
    for (const auto& [name, commit] : refs) listed += (listed.empty() ? "" : ", ") + name;
    return listed.empty() ? std::string("(none)") : listed;
  };
  return hub_error(404, "RevisionNotFound",
                   "Invalid rev id: " + revision + " in " + repository.id +
                       ". Branches: " + names(repository.branches) + ". Tags: " + names(repository.tags) + ".");
}

// A 206 range, inclusive at both ends.
struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};

enum class RangeRequest { ignore, unsatisfiable, satisfiable };

// One range of a `Range: bytes=...` header (N-, A-B or -SUFFIX). Several ranges, or syntax we do not know,
// are ignored as RFC 9110 allows: the whole body is sent.
RangeRequest parse_range(std::string_view header, std::uint64_t size, ByteRange& range) {
  constexpr std::string_view kUnit = "bytes=";
  if (!header.starts_with(kUnit)) return RangeRequest::ignore;
  const std::string_view spec = header.substr(kUnit.size());
  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos || spec.find(',') != std::string_view::npos) return RangeRequest::ignore;
  const std::string_view first_text = spec.substr(0, dash);
  const std::string_view last_text = spec.substr(dash + 1);
  if (first_text.empty()) {  // suffix: the last N bytes
    const auto suffix = parse_number(last_text);
    if (!suffix) return RangeRequest::ignore;
    if (*suffix == 0 || size == 0) return RangeRequest::unsatisfiable;
    range = {size - std::min(*suffix, size), size - 1};
    return RangeRequest::satisfiable;
  }
  const auto first = parse_number(first_text);
  if (!first) return RangeRequest::ignore;
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!last_text.empty()) {
    const auto requested_last = parse_number(last_text);
    if (!requested_last || *requested_last < *first) return RangeRequest::ignore;
    last = std::min(last, *requested_last);
  }
  if (*first >= size) return RangeRequest::unsatisfiable;
  range = {*first, last};
  return RangeRequest::satisfiable;
}

// A file body, honouring Range and applying the download faults. `response` carries the headers so far.
HttpResponse download(HttpResponse response, const HttpRequest& request, std::shared_ptr<const std::string> content,
                      const HubFaults::Settings& settings, bool is_lfs_object) {
  const std::uint64_t size = content->size();
  response.add_header("Accept-Ranges", "bytes");
  response.add_header("Content-Type", "application/octet-stream");
  response.status = 200;
  response.set_body(content, 0, size);
  const std::string range_header = request.header("range");
  if (!range_header.empty() && !settings.ignore_range) {
    ByteRange range;
    switch (parse_range(range_header, size, range)) {
      case RangeRequest::ignore: break;
      case RangeRequest::unsatisfiable:
        response.status = 416;
        response.add_header("Content-Range", "bytes */" + std::to_string(size));
        response.set_body(std::string());
        return response;
      case RangeRequest::satisfiable:
        response.status = 206;
        response.add_header("Content-Range", "bytes " + std::to_string(range.first) + "-" + std::to_string(range.last) +
                                                 "/" + std::to_string(size));
        response.set_body(content, range.first, range.last - range.first + 1);
        break;
    }
  }
  response.close_after = settings.truncate_at;
  response.stall_after = settings.stall_at;
  // The middle byte of what is sent, so a ranged (resumed) download is corrupted too.
  if (is_lfs_object && settings.corrupt_lfs && response.body_length > 0)
    response.flip_byte_at = response.body_length / 2;
  return response;
}

// The `sig` an LFS location carries; the LFS host refuses any other, as a pre-signed URL would.
std::string lfs_signature(const std::string& sha256) {
  return sha256_hex("test-hub-lfs:" + sha256).substr(0, 32);
}

// One file or directory of a tree listing.
struct TreeEntry {
  const StoredFile* file = nullptr;  // null for a directory
  std::string path;
  std::string oid;
};

// Every file and directory of `commit`, sorted by path. A directory's oid hashes the ids and paths of
// everything below it, so it changes when they do (as a git tree id would).
std::vector<TreeEntry> tree_entries(const Commit& commit) {
  std::map<std::string, std::string> directory_contents;  // path -> "oid path\n" lines below it
  for (const auto& [path, file] : commit.files) {
    for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      directory_contents[path.substr(0, slash)] += file.oid + " " + path + "\n";
    }
  }
  std::map<std::string, TreeEntry> entries;
  for (const auto& [path, file] : commit.files) entries[path] = {&file, path, file.oid};
  for (const auto& [path, contents] : directory_contents)
    entries[path] = {nullptr, path, sha1_hex("tree\n" + contents)};
  std::vector<TreeEntry> sorted;
  for (auto& [path, entry] : entries) sorted.push_back(std::move(entry));
  return sorted;
}

// `last_commit`, when given, is reported as the entry's lastCommit (paths-info with expand).
void write_tree_entry(JsonWriter& json, const TreeEntry& entry, const Commit* last_commit = nullptr) {
  json.StartObject();
  json.Key("type");
  json.String(entry.file != nullptr ? "file" : "directory");
  json.Key("oid");
  write_string(json, entry.oid);
  json.Key("size");
  json.Uint64(entry.file != nullptr ? entry.file->size() : 0);
  json.Key("path");
  write_string(json, entry.path);
  if (entry.file != nullptr && entry.file->lfs) {
    json.Key("lfs");
    json.StartObject();
    json.Key("oid");
    write_string(json, entry.file->lfs_sha256);
    json.Key("size");
    json.Uint64(entry.file->size());
    json.Key("pointerSize");
    json.Uint64(entry.file->pointer_size);
    json.EndObject();
  }
  if (entry.file != nullptr && entry.file->xet != nullptr) {
    json.Key("xetHash");
    write_string(json, entry.file->xet->hex);
  }
  if (last_commit != nullptr) {
    json.Key("lastCommit");
    json.StartObject();
    json.Key("id");
    write_string(json, last_commit->id);
    json.Key("title");
    json.String("commit");
    json.Key("date");
    json.String("2026-01-01T00:00:00.000Z");
    json.EndObject();
  }
  json.EndObject();
}

// POST /api/models/{repo}/paths-info/{rev} with {"paths": [...], "expand": bool}: the entries that exist.
HttpResponse paths_info(const Repository& repository, const std::string& revision, const std::string& body) {
  const std::shared_ptr<const Commit> commit = repository.find_commit(revision);
  if (commit == nullptr) return revision_not_found(repository, revision);
  rapidjson::Document request;
  request.Parse(body.c_str(), body.size());
  if (request.HasParseError() || !request.IsObject() || !request.HasMember("paths") || !request["paths"].IsArray()) {
    return hub_error(400, "", "paths-info needs a JSON body with a \"paths\" array");
  }
  const bool expand = request.HasMember("expand") && request["expand"].IsBool() && request["expand"].GetBool();
  const auto entries = tree_entries(*commit);
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartArray();
  for (const auto& wanted : request["paths"].GetArray()) {
    if (!wanted.IsString()) continue;
    for (const auto& entry : entries) {
      if (entry.path == wanted.GetString()) write_tree_entry(json, entry, expand ? commit.get() : nullptr);
    }
  }
  json.EndArray();
  return json_response(200, std::string(buffer.GetString(), buffer.GetSize()));
}

HttpResponse model_info(const Repository& repository, const std::string& revision, bool with_blobs) {
  const std::shared_ptr<const Commit> commit = repository.find_commit(revision);
  if (commit == nullptr) return revision_not_found(repository, revision);
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  json.Key("id");
  write_string(json, repository.id);
  json.Key("modelId");
  write_string(json, repository.id);
  json.Key("sha");
  write_string(json, commit->id);
  json.Key("private");
  json.Bool(false);
  json.Key("gated");
  if (repository.gated) {
    json.String("manual");
  } else {
    json.Bool(false);
  }
  json.Key("siblings");
  json.StartArray();
  for (const auto& [path, file] : commit->files) {
    json.StartObject();
    json.Key("rfilename");
    write_string(json, path);
    if (with_blobs) {  // ?blobs=true, as huggingface_hub asks for sizes
      json.Key("size");
      json.Uint64(file.size());
      json.Key("blobId");
      write_string(json, file.oid);
      if (file.lfs) {
        json.Key("lfs");
        json.StartObject();
        json.Key("sha256");
        write_string(json, file.lfs_sha256);
        json.Key("size");
        json.Uint64(file.size());
        json.Key("pointerSize");
        json.Uint64(file.pointer_size);
        json.EndObject();
      }
    }
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json_response(200, buffer.GetString());
}

HttpResponse refs(const Repository& repository, bool include_pull_requests) {
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  const auto write_ref = [&](const std::string& name, const std::string& ref, const std::string& commit) {
    json.StartObject();
    json.Key("name");
    write_string(json, name);
    json.Key("ref");
    write_string(json, ref);
    json.Key("targetCommit");
    write_string(json, commit);
    json.EndObject();
  };
  // Pull-request refs live beside branches (refs/pr/N), listed only when asked for.
  const auto is_pull_request = [](const std::string& name) { return name.starts_with("refs/pr/"); };
  json.StartObject();
  json.Key("branches");
  json.StartArray();
  for (const auto& [name, commit] : repository.branches) {
    if (!is_pull_request(name)) write_ref(name, "refs/heads/" + name, commit);
  }
  json.EndArray();
  json.Key("tags");
  json.StartArray();
  for (const auto& [name, commit] : repository.tags) write_ref(name, "refs/tags/" + name, commit);
  json.EndArray();
  json.Key("converts");
  json.StartArray();
  json.EndArray();
  if (include_pull_requests) {
    json.Key("pullRequests");
    json.StartArray();
    for (const auto& [name, commit] : repository.branches) {
      if (is_pull_request(name)) write_ref(name, name, commit);
    }
    json.EndArray();
  }
  json.EndObject();
  return json_response(200, buffer.GetString());
}

}  // namespace

const char* host_name(HubHost host) {
  switch (host) {
    case HubHost::api: return "api";
    case HubHost::lfs: return "lfs";
    case HubHost::cas: return "cas";
    case HubHost::gateway: return "gateway";
  }
  return "?";
}

HubRouter::HubRouter(const HubStore& store, HubFaults& faults, HubEndpoints endpoints)
    : store_(store),
      faults_(faults),
      endpoints_(std::move(endpoints)),
      xet_(store, faults, endpoints_.api, endpoints_.cas, endpoints_.gateway) {}

HttpResponse HubRouter::handle(HubHost host, const HttpRequest& request) const {
  if (auto failure = faults_.take_failure(request.target)) {
    HttpResponse response = hub_error(failure->status, "", "injected by the test hub's fail_next");
    for (auto& [name, value] : failure->headers) response.add_header(name, value);
    return response;
  }
  const HubFaults::Settings settings = faults_.settings();
  const RequestTarget target(request.target);
  const bool paths_info_post =
      request.method == "POST" && target.segments.size() >= 5 && target.segments[0] == "api" &&
      std::find(target.segments.begin(), target.segments.end(), "paths-info") != target.segments.end();
  if (request.method != "GET" && request.method != "HEAD" && !paths_info_post) {
    HttpResponse response = hub_error(405, "", "method not allowed");
    response.add_header("Allow", "GET, HEAD");
    return response;
  }
  const std::vector<std::string>& segments = target.segments;
  if (host == HubHost::cas) {
    if (segments.size() == 3 && (segments[0] == "v1" || segments[0] == "v2") && segments[1] == "reconstructions") {
      return xet_.reconstruction(request, target, settings);
    }
    return not_found();
  }
  if (host == HubHost::gateway) {
    if (segments.size() == 2 && segments[0] == "xorbs") return xet_.xorb(request, target, settings);
    return not_found();
  }
  // Both hosts serve LFS objects: the API host for relative redirects, the LFS host for absolute ones.
  if (segments.size() == 3 && segments[0] == "lfs" && segments[1] == "objects") {
    return lfs_object(request, target, settings);
  }
  if (host == HubHost::lfs) return not_found();
  if (segments.size() == 3 && segments[0] == "xet" && segments[1] == "files") {
    return xet_.plain_file(target, settings);
  }
  if (!segments.empty() && segments[0] == "api") {
    if (settings.redirect_api) {
      HttpResponse response;
      response.status = 302;
      response.add_header("Location", request.target);
      response.add_header("Content-Type", "text/plain; charset=utf-8");
      response.set_body("Found. Redirecting to " + request.target);
      return response;
    }
    if (segments.size() >= 3 && segments[1] == "models") return api_models(request, target, settings);
    return not_found();
  }
  return resolve(request, target, settings);
}

std::optional<HttpResponse> HubRouter::refuse_access(const Repository& repository, const HttpRequest& request) const {
  if (!repository.gated) return std::nullopt;
  const std::string authorization = request.header("authorization");
  if (authorization.empty()) {
    return hub_error(401, "GatedRepo",
                     "Access to model " + repository.id + " is restricted. You must be authenticated to access it.");
  }
  const std::string token = store_.token();
  if (token.empty() || authorization != "Bearer " + token) {
    return hub_error(403, "GatedRepo",
                     "Access to model " + repository.id + " is restricted and you are not in the authorized list.");
  }
  return std::nullopt;
}

HttpResponse HubRouter::api_models(const HttpRequest& request, const RequestTarget& target,
                                   const HubFaults::Settings& settings) const {
  const std::vector<std::string>& segments = target.segments;  // "api", "models", repository id, ...
  // Repository ids are "org/name", or "name" alone for a few old repositories: the store decides which.
  std::shared_ptr<const Repository> repository;
  std::size_t next = 0;
  if (segments.size() >= 4) {
    repository = store_.repository(segments[2] + "/" + segments[3]);
    next = 4;
  }
  if (repository == nullptr) {
    repository = store_.repository(segments[2]);
    next = 3;
  }
  if (repository == nullptr) {
    return repository_not_found(join(segments, 2, std::min<std::size_t>(segments.size(), 4), '/'));
  }
  if (auto refusal = refuse_access(*repository, request)) return std::move(*refusal);

  if (next == segments.size()) return model_info(*repository, "main", target.flag("blobs"));
  const std::string& endpoint = segments[next];
  if (endpoint == "revision" && next + 1 < segments.size()) {
    // A revision may arrive with its '/' encoded (refs%2Fpr%2F1) or not (refs/pr/1).
    return model_info(*repository, join(segments, next + 1, segments.size(), '/'), target.flag("blobs"));
  }
  if (endpoint == "refs" && next + 1 == segments.size()) return refs(*repository, target.flag("include_prs"));
  if (endpoint == "tree" && next + 1 < segments.size()) return tree(*repository, target, next + 1, settings);
  if (endpoint == "xet-read-token" && next + 1 < segments.size()) {
    const std::string revision = join(segments, next + 1, segments.size(), '/');
    if (repository->find_commit(revision) == nullptr) return revision_not_found(*repository, revision);
    return xet_.read_token(*repository, settings);
  }
  if (endpoint == "paths-info" && next + 1 < segments.size() && request.method == "POST") {
    return paths_info(*repository, join(segments, next + 1, segments.size(), '/'), request.body);
  }
  return not_found();
}

HttpResponse HubRouter::tree(const Repository& repository, const RequestTarget& target, std::size_t first_segment,
                             const HubFaults::Settings& settings) const {
  if (auto body = faults_.tree_override(repository.id)) return json_response(200, std::move(*body));
  const std::vector<std::string>& segments = target.segments;

  // tree/{revision}/{subpath}: the shortest run of segments that names a revision is the revision.
  std::shared_ptr<const Commit> commit;
  std::size_t path_segment = first_segment + 1;
  for (; path_segment <= segments.size(); ++path_segment) {
    commit = repository.find_commit(join(segments, first_segment, path_segment, '/'));
    if (commit != nullptr) break;
  }
  if (commit == nullptr) return revision_not_found(repository, segments[first_segment]);
  const std::string subpath = join(segments, path_segment, segments.size(), '/');

  // The cursor pins the commit, so a branch that moves between pages does not mix two listings.
  std::size_t offset = 0;
  if (const auto cursor = target.query.find("cursor"); cursor != target.query.end()) {
    const std::optional<std::string> decoded = hex_decode(cursor->second);
    const std::size_t colon = decoded ? decoded->find(':') : std::string::npos;
    const auto pinned = colon == std::string::npos ? nullptr : repository.find_commit(decoded->substr(0, colon));
    const auto position = colon == std::string::npos ? std::nullopt : parse_number(decoded->substr(colon + 1));
    if (pinned == nullptr || !position) return hub_error(400, "", "Invalid cursor");
    commit = pinned;
    offset = *position;
  }

  const bool recursive = target.flag("recursive");
  const std::string prefix = subpath.empty() ? std::string() : subpath + "/";
  std::vector<TreeEntry> listed;
  bool subpath_is_directory = subpath.empty();
  for (TreeEntry& entry : tree_entries(*commit)) {
    if (entry.path == subpath && entry.file == nullptr) subpath_is_directory = true;
    if (!entry.path.starts_with(prefix) || entry.path == subpath) continue;
    if (!recursive && entry.path.find('/', prefix.size()) != std::string::npos) continue;
    listed.push_back(std::move(entry));
  }
  if (!subpath_is_directory) {
    return hub_error(404, "EntryNotFound", "Directory " + subpath + " does not exist in " + repository.id);
  }

  const std::size_t first = std::min(offset, listed.size());  // a cursor's offset is the client's to send
  const std::size_t end = first + std::min(settings.tree_page_size, listed.size() - first);
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartArray();
  for (std::size_t i = first; i < end; ++i) write_tree_entry(json, listed[i]);
  json.EndArray();
  HttpResponse response = json_response(200, buffer.GetString());
  if (end < listed.size()) {
    std::string next_query;
    for (const auto& [name, value] : target.raw_query) {
      if (name != "cursor") next_query += name + "=" + value + "&";
    }
    const std::string cursor = hex_encode(commit->id + ":" + std::to_string(end));
    response.add_header(
        "Link", "<" + endpoints_.api + target.raw_path + "?" + next_query + "cursor=" + cursor + ">; rel=\"next\"");
  }
  return response;
}

HttpResponse HubRouter::resolve(const HttpRequest& request, const RequestTarget& target,
                                const HubFaults::Settings& settings) const {
  const std::vector<std::string>& segments = target.segments;  // {org}/{name} or {name}, "resolve", rev, path...
  std::string repo_id;
  std::size_t revision_segment = 0;
  if (segments.size() >= 4 && segments[2] == "resolve") {
    repo_id = segments[0] + "/" + segments[1];
    revision_segment = 3;
  } else if (segments.size() >= 3 && segments[1] == "resolve") {
    repo_id = segments[0];
    revision_segment = 2;
  } else {
    return not_found();
  }
  const std::shared_ptr<const Repository> repository = store_.repository(repo_id);
  if (repository == nullptr) return repository_not_found(repo_id);
  if (auto refusal = refuse_access(*repository, request)) return std::move(*refusal);

  // The shortest run of segments that names a revision, leaving at least one for the file's path.
  std::shared_ptr<const Commit> commit;
  std::size_t path_segment = revision_segment + 1;
  for (; path_segment < segments.size(); ++path_segment) {
    commit = repository->find_commit(join(segments, revision_segment, path_segment, '/'));
    if (commit != nullptr) break;
  }
  if (commit == nullptr) return revision_not_found(*repository, segments[revision_segment]);
  const std::string path = join(segments, path_segment, segments.size(), '/');
  const auto file = commit->files.find(path);
  if (file == commit->files.end()) {
    return hub_error(404, "EntryNotFound", path + " does not exist at revision " + commit->id + " of " + repo_id);
  }
  const StoredFile& stored = file->second;

  HttpResponse response;
  response.add_header("X-Repo-Commit", commit->id);
  response.add_header("ETag", quoted(stored.oid));
  if (!stored.lfs) return download(std::move(response), request, stored.content, settings, false);
  if (stored.xet != nullptr) return xet_.resolve(std::move(response), request, *repository, *commit, stored, settings);

  // An LFS file redirects to its object; the redirect's own small body has its own Content-Length, which a
  // client must not mistake for the file's size (X-Linked-Size).
  const std::string location = lfs_location(stored.lfs_sha256, settings);
  response.status = 302;
  response.add_header("Location", location);
  response.add_header("X-Linked-Size", std::to_string(stored.size()));
  response.add_header("X-Linked-Etag", quoted(stored.lfs_sha256));
  response.add_header("Content-Type", "text/plain; charset=utf-8");
  response.set_body("Found. Redirecting to " + location);
  return response;
}

std::string HubRouter::lfs_location(const std::string& sha256, const HubFaults::Settings& settings) const {
  const std::string path = "/lfs/objects/" + sha256 + "?sig=" + lfs_signature(sha256);
  return settings.relative_lfs_redirect ? path : endpoints_.lfs + path;
}

HttpResponse HubRouter::lfs_object(const HttpRequest& request, const RequestTarget& target,
                                   const HubFaults::Settings& settings) const {
  const std::string& sha256 = target.segments[2];
  const auto signature = target.query.find("sig");
  if (signature == target.query.end() || signature->second != lfs_signature(sha256)) {
    return hub_error(403, "", "Missing or wrong signature (sig) for LFS object " + sha256);
  }
  const std::shared_ptr<const std::string> content = store_.lfs_object(sha256);
  if (content == nullptr) return hub_error(404, "", "No LFS object " + sha256);
  HttpResponse response;
  response.add_header("ETag", quoted(sha256));
  return download(std::move(response), request, content, settings, true);
}

}  // namespace testing_support::hub
