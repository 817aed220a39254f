// test-hub: serves a folder of repositories the way the Hugging Face hub would, for manual checks and for
// tests that run fetchd as a separate process.

#include "tests/hub/test_hub.h"

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

namespace {

constexpr std::string_view kUsage =
    "usage: test-hub --root DIR [--host 127.0.0.1] [--port N] [--lfs-port N] [--cas-port N] [--gateway-port N]\n"
    "                [--token T] [--xet]\n"
    "  Serves every DIR/{org}/{repo}/ folder as a repository with one commit on main. Files of 1 MiB or more\n"
    "  and *.safetensors, *.gguf, *.bin files are LFS files; with --xet they are stored and served as Xet\n"
    "  files. With --token, every repository is gated and needs 'Authorization: Bearer T'. Runs until SIGINT\n"
    "  or SIGTERM.\n";

struct Arguments {
  std::filesystem::path root;
  testing_support::TestHubOptions options;
  std::optional<std::string> token;
  bool xet = false;
};

[[noreturn]] void fail_usage(const std::string& problem) {
  std::cerr << "test-hub: " << problem << "\n" << kUsage;
  std::exit(2);
}

std::uint16_t parse_port(const std::string& text) {
  try {
    std::size_t used = 0;
    const unsigned long port = std::stoul(text, &used);
    if (used == text.size() && port <= 65535) return static_cast<std::uint16_t>(port);
  } catch (const std::exception&) {
  }
  fail_usage("not a port number: " + text);
}

Arguments parse_arguments(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag == "--xet") {
      arguments.xet = true;
      continue;
    }
    if (i + 1 >= argc) fail_usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--root") {
      arguments.root = value;
    } else if (flag == "--host") {
      arguments.options.host = value;
    } else if (flag == "--port") {
      arguments.options.api_port = parse_port(value);
    } else if (flag == "--lfs-port") {
      arguments.options.lfs_port = parse_port(value);
    } else if (flag == "--cas-port") {
      arguments.options.cas_port = parse_port(value);
    } else if (flag == "--gateway-port") {
      arguments.options.gateway_port = parse_port(value);
    } else if (flag == "--token") {
      arguments.token = value;
    } else {
      fail_usage("unknown option " + flag);
    }
  }
  if (arguments.root.empty()) fail_usage("--root is required");
  if (!std::filesystem::is_directory(arguments.root)) fail_usage(arguments.root.string() + " is not a directory");
  return arguments;
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse_arguments(argc, argv);

  // Block the stop signals before any thread starts, so every thread inherits the mask and sigwait below is
  // the one place they arrive. A client that hangs up mid-write must not kill the process either.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  try {
    testing_support::TestHub hub(arguments.options);
    hub.set_store_lfs_as_xet(arguments.xet);
    for (const auto& org : std::filesystem::directory_iterator(arguments.root)) {
      if (!org.is_directory()) continue;
      for (const auto& repo : std::filesystem::directory_iterator(org.path())) {
        if (!repo.is_directory()) continue;
        const std::string repo_id = org.path().filename().string() + "/" + repo.path().filename().string();
        hub.add_repository_from_folder(repo_id, repo.path());
        if (arguments.token) hub.set_gated(repo_id, true);
      }
    }
    if (arguments.token) hub.set_token(*arguments.token);
    std::cout << "test-hub: serving " << hub.endpoint() << " (lfs " << hub.lfs_endpoint() << ", cas "
              << hub.cas_endpoint() << ", gateway " << hub.gateway_endpoint() << ")" << std::endl;

    int received = 0;
    sigwait(&stop_signals, &received);
  } catch (const std::exception& failure) {
    std::cerr << "test-hub: " << failure.what() << "\n";
    return 1;
  }
  return 0;
}
