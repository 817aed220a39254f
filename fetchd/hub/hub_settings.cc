#include "fetchd/hub/hub_settings.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fetchd/request/fetch_error.h"
#include "fetchd/transfer/http_client.h"

namespace fetchd::hub {

namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::filesystem::path expand_user(const std::string& path, const Environment& env) {
  if (path == "~" || path.starts_with("~/")) {
    if (auto home = env("HOME")) return std::filesystem::path(*home) / path.substr(path.size() > 1 ? 2 : 1);
  }
  return path;
}

std::optional<std::string> first_set(const Environment& env, std::initializer_list<std::string_view> names) {
  for (const auto name : names) {
    if (auto v = env(name)) return v;
  }
  return std::nullopt;
}

std::chrono::milliseconds read_seconds(const Environment& env, std::string_view name, std::chrono::milliseconds def) {
  const auto v = env(name);
  if (!v) return def;
  char* end = nullptr;
  const double seconds = std::strtod(v->c_str(), &end);
  if (end != v->c_str() + v->size() || !(seconds > 0) || seconds > 86400 * 365) {
    throw FetchError(ErrorKind::Usage,
                     std::string(name) + "='" + *v + "' is not a positive number of seconds; unset it or fix it");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

Environment process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

bool is_truthy(std::string_view value) {
  std::string upper;
  for (const char c : trim(value)) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  return upper == "1" || upper == "ON" || upper == "YES" || upper == "TRUE";
}

HubSettings read_hub_settings(const Environment& env, const std::filesystem::path& download_dir) {
  HubSettings s;
  if (auto home = env("HF_HOME")) {
    s.hf_home = expand_user(*home, env);
  } else if (auto xdg = env("XDG_CACHE_HOME")) {
    s.hf_home = expand_user(*xdg, env) / "huggingface";
  } else {
    s.hf_home = expand_user("~/.cache/huggingface", env);
  }

  if (!download_dir.empty()) {
    s.cache_dir = download_dir;
  } else if (auto cache = first_set(env, {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})) {
    s.cache_dir = expand_user(*cache, env);
  } else {
    s.cache_dir = s.hf_home / "hub";
  }

  std::string endpoint = env("HF_ENDPOINT").value_or(std::string(kDefaultEndpoint));
  while (endpoint.ends_with('/')) endpoint.pop_back();
  s.endpoint = endpoint;

  if (auto token = first_set(env, {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})) {
    s.token = trim(*token);
  } else {
    const std::filesystem::path token_path =
        env("HF_TOKEN_PATH") ? expand_user(*env("HF_TOKEN_PATH"), env) : s.hf_home / "token";
    std::ifstream in(token_path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      s.token = trim(text.str());
    }
  }
  if (s.token && s.token->empty()) s.token.reset();

  const auto flag = [&](std::string_view name) { return env(name) && is_truthy(*env(name)); };
  s.offline = flag("HF_HUB_OFFLINE") || flag("TRANSFORMERS_OFFLINE");
  s.disable_xet = flag("HF_HUB_DISABLE_XET");
  s.disable_symlinks = flag("HF_HUB_DISABLE_SYMLINKS");
  s.etag_timeout = read_seconds(env, "HF_HUB_ETAG_TIMEOUT", s.etag_timeout);
  s.download_timeout = read_seconds(env, "HF_HUB_DOWNLOAD_TIMEOUT", s.download_timeout);
  return s;
}

bool https_built() {
  return FETCHD_HTTPS != 0;
}

void check_endpoint_transport(std::string_view endpoint, bool with_https) {
  if (transfer::has_userinfo(endpoint)) {
    throw FetchError(ErrorKind::Usage,
                     "HF_ENDPOINT names a user or password before its host (" + transfer::url_origin(endpoint) +
                         "). fetchd sends no credential taken from a URL, since a redirect could carry it to "
                         "another host: remove it from HF_ENDPOINT and give the token as HF_TOKEN.");
  }
  if (endpoint.starts_with("http://")) return;
  if (!endpoint.starts_with("https://")) {
    throw FetchError(ErrorKind::Usage, "the hub endpoint '" + std::string(endpoint) +
                                           "' is not an http:// or https:// URL; fix HF_ENDPOINT");
  }
  if (!with_https) {
    throw FetchError(ErrorKind::Unsupported,
                     "this build cannot speak HTTPS, so it cannot reach " + std::string(endpoint) +
                         ". Rebuild with -DFETCHD_HTTPS=ON (needs the libssl-dev and libcurl4-openssl-dev "
                         "development files), or set HF_ENDPOINT to an http:// mirror.");
  }
}

}  // namespace fetchd::hub
