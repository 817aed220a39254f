#include "serverd/fetch/fetchd_client.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "fetch/v1/fetch.grpc.pb.h"
#include "fetchd/request/fetch_error.h"

extern char** environ;

namespace serverd::fetch {

namespace {

fetchd::ErrorKind kind_from_name(std::string_view name) {
  using fetchd::ErrorKind;
  for (const auto kind : {ErrorKind::Usage, ErrorKind::NotFound, ErrorKind::Auth, ErrorKind::Integrity,
                          ErrorKind::OfflineMiss, ErrorKind::Network, ErrorKind::Unsupported}) {
    if (fetchd::error_kind_name(kind) == name) return kind;
  }
  return ErrorKind::Internal;
}

}  // namespace

::fetch::v1::ResolveResult resolve(const std::string& address, const ResolveArgs& args,
                                   const std::function<void(const ::fetch::v1::Progress&)>& progress,
                                   std::chrono::seconds connect_timeout) {
  const auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + connect_timeout)) {
    throw fetchd::FetchError(fetchd::ErrorKind::Network,
                             "fetchd at " + address + " did not answer within " +
                                 std::to_string(connect_timeout.count()) +
                                 " s; check that the fetchd sidecar runs and listens there (--fetchd)");
  }
  const auto stub = ::fetch::v1::Fetch::NewStub(channel);
  grpc::ClientContext context;
  ::fetch::v1::ResolveRequest request;
  request.set_model(args.model);
  request.set_revision(args.revision);
  request.set_download_dir(args.download_dir);
  auto reader = stub->Resolve(&context, request);
  ::fetch::v1::ResolveEvent event;
  std::optional<::fetch::v1::ResolveResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress()) progress(event.progress());
    if (event.has_result()) result = event.result();
  }
  const auto status = reader->Finish();
  if (!status.ok()) {
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto kind = trailers.find("fetchd-error-kind");
    throw fetchd::FetchError(
        kind == trailers.end() ? fetchd::ErrorKind::Network
                               : kind_from_name(std::string_view(kind->second.data(), kind->second.size())),
        status.error_message().empty()
            ? "fetchd at " + address + " failed: gRPC status " + std::to_string(static_cast<int>(status.error_code()))
            : status.error_message());
  }
  if (!result) {
    throw fetchd::FetchError(fetchd::ErrorKind::Internal, "fetchd at " + address + " ended Resolve without a result");
  }
  return *result;
}

std::filesystem::path find_fetchd_binary() {
  if (const char* env = std::getenv("FETCHD_BINARY"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& candidate :
         {self.parent_path() / "fetchd", self.parent_path().parent_path() / "fetchd" / "fetchd"}) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "fetchd";  // posix_spawnp searches PATH
}

std::unique_ptr<FetchdChild> FetchdChild::start(const std::filesystem::path& binary) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "serverd-fetchd-XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) {
    throw fetchd::FetchError(fetchd::ErrorKind::Internal, "cannot create a private directory for fetchd's socket in " +
                                                              std::filesystem::temp_directory_path().string());
  }
  const std::filesystem::path dir = dir_template;  // mode 0700: only this user reaches the socket
  const std::string address = "unix:" + (dir / "fetchd.sock").string();
  std::vector<std::string> argv_storage = {binary.string(), "serve", "--listen", address};
  std::vector<char*> argv;
  for (auto& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    std::filesystem::remove_all(dir);
    throw fetchd::FetchError(fetchd::ErrorKind::Internal,
                             "cannot start " + binary.string() + " (" + std::strerror(rc) +
                                 "); install fetchd beside serverd, set FETCHD_BINARY, or run a fetchd sidecar and "
                                 "give its address with --fetchd");
  }
  return std::unique_ptr<FetchdChild>(new FetchdChild(pid, dir, address));
}

void FetchdChild::terminate() const {
  ::kill(pid_, SIGTERM);
}

FetchdChild::~FetchdChild() {
  terminate();
  int status = 0;
  ::waitpid(pid_, &status, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace serverd::fetch
