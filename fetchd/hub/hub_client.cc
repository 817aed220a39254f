#include "fetchd/hub/hub_client.h"

#include <thread>

#include "engine/format/json.h"
#include "fetchd/request/model_reference.h"

namespace fetchd::hub {

namespace {

constexpr std::size_t kMaxListingPages = 10'000;
constexpr std::size_t kMaxListingEntries = 1'000'000;

std::string join_names(const std::vector<std::pair<std::string, std::string>>& refs) {
  std::string out;
  for (const auto& [name, commit] : refs) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string url_encode_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : path) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '~' || c == '/';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

HubClient::HubClient(const HubSettings& settings, std::string repo_id, const transfer::CancelToken* cancel,
                     transfer::RetryPolicy policy)
    : settings_(settings), repo_id_(std::move(repo_id)), cancel_(cancel), policy_(policy), http_(cancel) {
  check_endpoint_transport(settings_.endpoint, https_built() && transfer::curl_supports_https());
}

std::string HubClient::authorization() const {
  return settings_.token ? "Authorization: Bearer " + *settings_.token : "";
}

std::string HubClient::endpoint_origin() const {
  return transfer::url_origin(settings_.endpoint);
}

std::string HubClient::resolve_url(std::string_view commit, std::string_view path) const {
  return settings_.endpoint + "/" + repo_id_ + "/resolve/" + std::string(commit) + "/" + url_encode_path(path);
}

FetchError HubClient::error_for(const transfer::HttpResult& result, std::string_view what) const {
  const long status = result.response.status;
  const auto code = result.response.headers.get("X-Error-Code").value_or("");
  const auto hub_message = result.response.headers.get("X-Error-Message");
  const std::string said = hub_message ? " The hub said: " + *hub_message : "";
  const std::string repo = "'" + repo_id_ + "'";
  const std::string page = settings_.endpoint + "/" + repo_id_;
  if (code == "GatedRepo") {
    if (status == 403 && settings_.token) {
      return {ErrorKind::Auth, "repository " + repo +
                                   " is gated and the token in use has not been granted access. "
                                   "Request access at " +
                                   page + ", then run again." + said};
    }
    return {ErrorKind::Auth, "repository " + repo +
                                 " is gated: it needs the token of an account that accepted its "
                                 "terms at " +
                                 page + ". Set HF_TOKEN (or write the token to $HF_HOME/token)." + said};
  }
  if (code == "RepoNotFound" || (status == 404 && what == "repository")) {
    return {ErrorKind::NotFound, "repository " + repo + " was not found on " + settings_.endpoint +
                                     ". Check the name; a private repository answers the same way without a token, "
                                     "so set HF_TOKEN if it is yours." +
                                     said};
  }
  if (code == "RevisionNotFound")
    return {ErrorKind::NotFound, std::string(what) + " was not found in " + repo + "." + said};
  if (code == "EntryNotFound" || status == 404) {
    return {ErrorKind::NotFound, std::string(what) + " does not exist in repository " + repo + "." + said};
  }
  if (status == 401 || status == 403) {
    return {ErrorKind::Auth, settings_.token
                                 ? "the hub refused the token for " + std::string(what) + " of " + repo + " (HTTP " +
                                       std::to_string(status) + "): check HF_TOKEN." + said
                                 : "the hub refused " + std::string(what) + " of " + repo + " (HTTP " +
                                       std::to_string(status) + "): it is private or gated; set HF_TOKEN." + said};
  }
  return {ErrorKind::Network,
          "the hub answered " + std::string(what) + " of " + repo + " with " + transfer::describe_failure(result)};
}

std::string HubClient::get_api(const std::string& url, std::string_view what, transfer::HttpHeaders* headers) {
  for (int attempt = 1;; ++attempt) {
    transfer::HttpRequest request;
    request.url = url;
    request.connect_timeout = settings_.etag_timeout;
    request.stall_timeout = settings_.etag_timeout;
    if (const auto auth = authorization(); !auth.empty()) request.headers.push_back(auth);
    auto result = http_.perform(request);
    const long status = result.response.status;
    if (result.failure == transfer::TransferFailure::None) {
      if (status == 200) {
        if (headers != nullptr) *headers = std::move(result.response.headers);
        return std::move(result.response.body);
      }
      if (status >= 300 && status < 400) {
        throw FetchError(ErrorKind::Network, "the hub at " + settings_.endpoint + " answered the API call for " +
                                                 std::string(what) + " of '" + repo_id_ + "' with a redirect (HTTP " +
                                                 std::to_string(status) + " to " +
                                                 result.response.headers.get("Location").value_or("?") +
                                                 "). API calls are never redirected: check HF_ENDPOINT.");
      }
    }
    if (result.failure == transfer::TransferFailure::Cancelled) {
      throw FetchError(ErrorKind::Network, "cancelled while asking the hub for " + std::string(what));
    }
    const auto delay = transfer::retry_delay(result, attempt, policy_);
    if (!delay) {
      if (result.failure == transfer::TransferFailure::None && status >= 400 && status < 500)
        throw error_for(result, what);
      throw FetchError(ErrorKind::Network, "cannot reach the hub at " + settings_.endpoint + " for " +
                                               std::string(what) + " of '" + repo_id_ + "' after " +
                                               std::to_string(attempt) +
                                               " attempt(s): " + transfer::describe_failure(result));
    }
    if (!transfer::wait_unless_cancelled(cancel_, *delay)) {
      throw FetchError(ErrorKind::Network, "cancelled while waiting to retry the hub");
    }
  }
}

RepoRefs HubClient::fetch_refs() {
  const auto body = get_api(settings_.endpoint + "/api/models/" + repo_id_ + "/refs", "repository");
  std::size_t consumed = 0;
  std::string error;
  const auto doc = engine::format::parse_json_prefix(body, consumed, error);
  if (!error.empty() || !doc.IsObject()) {
    throw FetchError(ErrorKind::Network, "the hub's refs for '" + repo_id_ + "' are not a JSON object: " + error);
  }
  RepoRefs refs;
  const auto read = [&](const char* key, auto& into) {
    const auto it = doc.FindMember(key);
    if (it == doc.MemberEnd() || !it->value.IsArray()) return;
    for (const auto& ref : it->value.GetArray()) {
      if (!ref.IsObject()) continue;
      const auto name = ref.FindMember("name");
      const auto commit = ref.FindMember("targetCommit");
      if (name == ref.MemberEnd() || commit == ref.MemberEnd() || !name->value.IsString() ||
          !commit->value.IsString()) {
        continue;
      }
      into.emplace_back(name->value.GetString(), commit->value.GetString());
    }
  };
  read("branches", refs.branches);
  read("tags", refs.tags);
  return refs;
}

std::string HubClient::resolve_commit(std::string_view revision) {
  if (revision.empty()) revision = "main";
  std::string lowered(revision);
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (request::is_commit_hash(lowered)) return lowered;
  const auto refs = fetch_refs();
  for (const auto* list : {&refs.branches, &refs.tags}) {
    for (const auto& [name, commit] : *list) {
      if (name == revision) {
        if (!request::is_commit_hash(commit)) {
          throw FetchError(ErrorKind::Network, "the hub gives '" + std::string(revision) + "' of '" + repo_id_ +
                                                   "' the commit '" + commit + "', which is not a 40-hex id");
        }
        return commit;
      }
    }
  }
  throw FetchError(ErrorKind::NotFound, "revision '" + std::string(revision) + "' is not a branch or tag of '" +
                                            repo_id_ + "'. Branches: " + join_names(refs.branches) +
                                            ". Tags: " + join_names(refs.tags) +
                                            ". Pass one of those, or a 40-hex "
                                            "commit, to --revision.");
}

std::vector<ListingEntry> HubClient::list_files(std::string_view commit) {
  std::vector<ListingEntry> entries;
  std::string url = settings_.endpoint + "/api/models/" + repo_id_ + "/tree/" + std::string(commit) + "?recursive=true";
  const auto origin = endpoint_origin();
  for (std::size_t page = 0;; ++page) {
    if (page == kMaxListingPages || entries.size() > kMaxListingEntries) {
      throw FetchError(ErrorKind::Integrity, "the tree listing of '" + repo_id_ + "' goes on past " +
                                                 std::to_string(entries.size()) + " entries; refusing it");
    }
    transfer::HttpHeaders headers;
    const auto body = get_api(url, "the file listing", &headers);
    auto page_entries = parse_tree_page(body, repo_id_);
    entries.insert(entries.end(), std::make_move_iterator(page_entries.begin()),
                   std::make_move_iterator(page_entries.end()));
    const auto next = transfer::find_link(headers, "next");
    if (!next) break;
    url = transfer::resolve_url(url, *next);
    if (transfer::url_origin(url) != origin) {
      throw FetchError(ErrorKind::Integrity, "the tree listing of '" + repo_id_ + "' continues on another host (" +
                                                 url + "); refusing to follow it");
    }
  }
  check_listing_integrity(entries, repo_id_);
  return entries;
}

}  // namespace fetchd::hub
