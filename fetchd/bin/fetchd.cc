// fetchd: resolves a model reference to a local, proven path. `pull` runs once (a Kubernetes init
// container); `serve` answers Resolve over gRPC (the sidecar).
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "base/flags.h"
#include "base/printable.h"
#include "fetchd/hub/hub_settings.h"
#include "fetchd/request/fetch_error.h"
#include "fetchd/request/model_reference.h"
#include "fetchd/resolve/resolver.h"
#include "fetchd/service/fetch_service.h"
#include "fetchd/verify/cache_verifier.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace {

constexpr std::string_view kUsage =
    "usage: fetchd COMMAND [options]\n"
    "\n"
    "Commands:\n"
    "  pull     Resolve --model into the Hugging Face cache and print the path to serve (last line of stdout)\n"
    "  serve    Answer Resolve over gRPC on --listen (unix:PATH or HOST:PORT), with grpc.health.v1\n"
    "  verify   Re-prove every file in the cache from its bytes; report, or --delete, the ones that fail\n"
    "  health   Ask a running 'fetchd serve' the grpc.health.v1 Check; exit 0 when it is SERVING\n"
    "\n"
    "Run 'fetchd COMMAND --help' for a command's options.\n"
    "\n"
    "Exit codes: 0 success, 1 internal error, 2 usage, 3 not found, 4 auth or gated, 5 integrity refusal,\n"
    "6 offline cache miss, 7 network or cancelled, 8 unsupported repository or build.\n";

// SIGINT and SIGTERM cancel the work in progress (partial files are kept) instead of killing the process.
// The signals are blocked in every thread and taken by one thread that sets the token.
void cancel_on_signals(fetchd::transfer::CancelToken& token) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, &token] {
    int signal = 0;
    if (sigwait(&set, &signal) == 0) {
      std::cerr << "\nfetchd: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
      token.cancel();
    }
  }).detach();
}

// Logs to stderr; on a terminal, one progress line redrawn in place.
class PullObserver final : public fetchd::resolve::ResolveObserver {
 public:
  explicit PullObserver(bool verbose) : verbose_(verbose), tty_(::isatty(STDERR_FILENO) == 1) {}
  ~PullObserver() override { end_bar(); }

  void log(const std::string& line, bool detail) override {
    if (detail && !verbose_) return;
    end_bar();
    std::cerr << "fetchd: " << base::printable(line) << '\n';
  }

  void progress(fetchd::resolve::Phase phase, const std::string& file, std::uint64_t done,
                std::uint64_t total) override {
    if (!tty_ || file.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && done != total) return;
    last_draw_ = now;
    const char* what = phase == fetchd::resolve::Phase::Verifying ? "proving" : "fetching";
    const std::string shown = base::printable(file);
    char line[256];
    if (total > 0) {
      std::snprintf(line, sizeof line, "\r%s %-40.40s %8.1f / %.1f MB %3d%%", what, shown.c_str(), done / 1e6,
                    total / 1e6, static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)));
    } else {
      std::snprintf(line, sizeof line, "\r%s %-40.40s %8.1f MB", what, shown.c_str(), done / 1e6);
    }
    std::cerr << line << std::flush;
    bar_shown_ = true;
  }

 private:
  void end_bar() {
    if (bar_shown_) std::cerr << '\n';
    bar_shown_ = false;
  }
  bool verbose_;
  bool tty_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

int pull(std::span<char* const> args) {
  fetchd::resolve::ResolveRequest request;
  bool verbose = false;
  base::FlagParser flags("usage: fetchd pull --model MODEL [--revision REV] [--download-dir DIR] [--verbose]");
  flags.add_string("model", "MODEL", "A directory, a .gguf file, org/repo or org/repo:QUANT", &request.model);
  flags.add_string("revision", "REV", "Branch, tag or 40-hex commit (default: main)", &request.revision);
  flags.add_string("download-dir", "DIR", "Cache directory; beats HF_HUB_CACHE and HF_HOME", &request.download_dir);
  flags.add_switch("verbose", "One line per file: size, proof, location", &verbose);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return 0;
  }
  if (request.model.empty()) throw base::UsageError("pull needs --model (see fetchd pull --help)");

  fetchd::transfer::CancelToken cancel;
  cancel_on_signals(cancel);
  fetchd::resolve::Resolver resolver;
  PullObserver observer(verbose);
  const auto result = resolver.resolve(request, observer, &cancel);
  observer.log(result.served_model_name + (result.commit.empty() ? "" : " at " + result.commit) + ": " +
                   std::to_string(result.files.size()) + " file(s) " +
                   (result.from_cache ? "already in the cache" : "fetched and proven"),
               false);
  std::cout << result.local_path.string() << std::endl;
  return 0;
}

int verify(std::span<char* const> args) {
  std::string model;
  std::string download_dir;
  bool remove = false;
  base::FlagParser flags("usage: fetchd verify [--model org/repo] [--download-dir DIR] [--delete]");
  flags.add_string("model", "REPO", "Only this repository (default: the whole cache)", &model);
  flags.add_string("download-dir", "DIR", "Cache directory; beats HF_HUB_CACHE and HF_HOME", &download_dir);
  flags.add_switch("delete", "Delete files that fail, and the snapshot entries naming them", &remove);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return 0;
  }
  fetchd::verify::VerifyOptions options;
  options.remove_failures = remove;
  if (!model.empty()) {
    const auto ref = fetchd::request::parse_model_reference(model);
    if (ref.is_local()) throw base::UsageError("verify checks the cache; '" + model + "' is a local path");
    options.repo_id = ref.repo_id;
  }
  const auto settings = fetchd::hub::read_hub_settings(fetchd::hub::process_environment(), download_dir);
  std::size_t failed = 0;
  const auto reports = fetchd::verify::verify_cache(settings.cache_dir, options, [&](const auto& r) {
    if (r.ok()) {
      std::cout << "ok      " << base::printable(r.path.string()) << "  ("
                << (r.proven_by.empty() ? "nothing to check against" : r.proven_by) << ")\n";
    } else {
      ++failed;
      std::cout << (r.removed ? "DELETED " : "FAILED  ") << base::printable(r.path.string()) << ": "
                << base::printable(r.problem) << '\n';
    }
  });
  std::cerr << "fetchd: " << reports.size() << " file(s) checked in " << settings.cache_dir.string() << ", " << failed
            << " failed" << (failed && !remove ? "; run again with --delete to remove them" : "") << '\n';
  return failed == 0 ? 0 : fetchd::exit_code(fetchd::ErrorKind::Integrity);
}

int serve(std::span<char* const> args) {
  std::string listen;
  base::FlagParser flags("usage: fetchd serve --listen ADDR");
  flags.add_string("listen", "ADDR", "unix:PATH or HOST:PORT to answer gRPC on", &listen);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return 0;
  }
  if (listen.empty()) throw base::UsageError("serve needs --listen unix:PATH or HOST:PORT");

  fetchd::transfer::CancelToken stop;
  cancel_on_signals(stop);
  fetchd::resolve::Resolver resolver;
  fetchd::service::FetchService service(resolver);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const auto server = builder.BuildAndStart();
  if (!server) {
    throw fetchd::FetchError(fetchd::ErrorKind::Usage,
                             "cannot listen on '" + listen + "': the address is malformed, in use, or not writable");
  }
  std::cerr << "fetchd: serving Resolve on " << listen << (port > 0 ? " (port " + std::to_string(port) + ")" : "")
            << std::endl;
  while (stop.wait_for(std::chrono::hours(24))) {
  }
  server->GetHealthCheckService()->SetServingStatus(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

// `fetchd health`: the standard grpc.health.v1 Check against a running `fetchd serve`, as an exec probe.
// Kubernetes' own gRPC probes dial the pod IP, which a sidecar listening on a Unix socket (or on loopback)
// never answers; this command reaches the socket from inside the container instead.
int health(std::span<char* const> args) {
  std::string address;
  std::string service;
  std::uint64_t timeout_s = 5;
  base::FlagParser flags("usage: fetchd health --address ADDR [--service NAME] [--timeout SECONDS]");
  flags.add_string("address", "ADDR", "unix:PATH or HOST:PORT of a running 'fetchd serve'", &address);
  flags.add_string("service", "NAME", "Service to ask about (default: the server as a whole)", &service);
  flags.add_uint("timeout", "SECONDS", "Give up after this long (default 5)", &timeout_s, 1, 3600);
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return 0;
  }
  if (address.empty()) throw base::UsageError("health needs --address unix:PATH or HOST:PORT");

  const auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  const auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    throw fetchd::FetchError(fetchd::ErrorKind::Network, "health: no answer from '" + address + "' within " +
                                                             std::to_string(timeout_s) +
                                                             " s: " + status.error_message());
  }
  const std::string state = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    throw fetchd::FetchError(fetchd::ErrorKind::Network, "health: '" + address + "' answers " + state);
  }
  std::cout << state << std::endl;
  return 0;
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
      std::printf("fetchd %s\n", MODELSERVE_VERSION);
      return 0;
    }
    if (command == "pull") return pull(args.subspan(1));
    if (command == "serve") return serve(args.subspan(1));
    if (command == "verify") return verify(args.subspan(1));
    if (command == "health") return health(args.subspan(1));
    throw base::UsageError("unknown command '" + std::string(command) + "' (see fetchd --help)");
  } catch (const base::UsageError& e) {
    std::cerr << "fetchd: " << base::printable(e.what()) << '\n';
    return fetchd::exit_code(fetchd::ErrorKind::Usage);
  } catch (const fetchd::FetchError& e) {
    std::cerr << "fetchd: " << base::printable(e.what()) << '\n';
    return fetchd::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "fetchd: " << base::printable(e.what()) << '\n';
    return fetchd::exit_code(fetchd::ErrorKind::Internal);
  }
}
