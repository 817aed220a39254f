#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fetchd::hub {

// Looks a variable up; an empty value counts as unset, as huggingface_hub treats it.
using Environment = std::function<std::optional<std::string>(std::string_view name)>;
Environment process_environment();

// Everything fetchd reads from the environment, named and defaulted as huggingface_hub does. Read anew
// for every resolve, so a long-running sidecar follows changes to its token file.
struct HubSettings {
  std::filesystem::path hf_home;
  std::filesystem::path cache_dir;  // the hub cache root: models--org--repo folders live here
  std::string endpoint;             // without a trailing '/'
  std::optional<std::string> token;
  bool offline = false;
  bool disable_xet = false;
  bool disable_symlinks = false;
  std::chrono::milliseconds etag_timeout{10'000};
  std::chrono::milliseconds download_timeout{10'000};
};

inline constexpr std::string_view kDefaultEndpoint = "https://huggingface.co";

// `download_dir`, when non-empty, beats every cache variable (vLLM's --download-dir). Throws
// FetchError(Usage) for a malformed boolean or timeout.
HubSettings read_hub_settings(const Environment& env, const std::filesystem::path& download_dir = {});

// huggingface_hub's truth values: 1, ON, YES, TRUE in any case. Others are false.
bool is_truthy(std::string_view value);

// Refuses an endpoint this build cannot reach: not http(s), or https when the build has no TLS. The
// message names the build option and the http:// mirror alternative.
void check_endpoint_transport(std::string_view endpoint, bool https_built);
bool https_built();

}  // namespace fetchd::hub
