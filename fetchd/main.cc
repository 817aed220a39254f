// fetchd: resolves a model reference to a local, proven path. `pull` runs once (a Kubernetes init
// container); `serve` answers Resolve over gRPC (the sidecar).
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <string_view>

#include "fetchd/client/fetch_error.h"
#include "fetchd/client/flags.h"
#include "fetchd/client/model_reference.h"
#include "fetchd/hub/hub_settings.h"

namespace {

constexpr std::string_view kUsage =
    "usage: fetchd COMMAND [options]\n"
    "\n"
    "Commands:\n"
    "  pull     Resolve --model into the Hugging Face cache and print the path to serve (last line of stdout)\n"
    "\n"
    "Run 'fetchd COMMAND --help' for a command's options.\n"
    "\n"
    "Exit codes: 0 success, 1 internal error, 2 usage, 3 not found, 4 auth or gated, 5 integrity refusal,\n"
    "6 offline cache miss, 7 network, 8 unsupported repository or build.\n";

int pull(std::span<char* const> args) {
  std::string model;
  std::string revision;
  std::string download_dir;
  bool verbose = false;
  fetchd::client::FlagParser flags("usage: fetchd pull --model MODEL [--revision REV] [--download-dir DIR]");
  flags.add_string("model", "MODEL", "A directory, a .gguf file, org/repo or org/repo:QUANT", &model);
  flags.add_string("revision", "REV", "Branch, tag or 40-hex commit (default: main)", &revision);
  flags.add_string("download-dir", "DIR", "Cache directory; beats HF_HUB_CACHE and HF_HOME", &download_dir);
  flags.add_switch("verbose", "One line per file: size, proof, location", &verbose);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return 0;
  }
  if (model.empty()) throw fetchd::client::UsageError("pull needs --model");

  const auto ref = fetchd::client::parse_model_reference(model);
  if (ref.is_local()) {
    std::cout << ref.local_path.string() << '\n';
    return 0;
  }
  const auto settings = fetchd::hub::read_hub_settings(fetchd::hub::process_environment(), download_dir);
  fetchd::hub::check_endpoint_transport(settings.endpoint, fetchd::hub::https_built());
  throw fetchd::FetchError(fetchd::ErrorKind::Unsupported, "this fetchd cannot fetch '" + ref.repo_id + "' from " +
                                                               settings.endpoint +
                                                               " yet: only local directories and .gguf files resolve");
}

}  // namespace

int main(int argc, char** argv) {
  const std::span<char* const> args(argv + 1, static_cast<std::size_t>(argc - 1));
  if (args.empty()) {
    std::fputs(kUsage.data(), stderr);
    return 2;
  }
  const std::string_view command = args[0];
  try {
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage.data(), stdout);
      return 0;
    }
    if (command == "--version") {
      std::printf("fetchd %s (hub transport: %s)\n", MODELSERVE_VERSION,
                  fetchd::hub::https_built() ? "http and https" : "http only");
      return 0;
    }
    if (command == "pull") return pull(args.subspan(1));
    throw fetchd::client::UsageError("unknown command '" + std::string(command) + "' (see fetchd --help)");
  } catch (const fetchd::FetchError& e) {
    std::cerr << "fetchd: " << e.what() << '\n';
    return fetchd::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "fetchd: " << e.what() << '\n';
    return fetchd::exit_code(fetchd::ErrorKind::Internal);
  }
}
