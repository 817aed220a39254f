#include "tests/hub/test_hub.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "tests/hub/hub_router.h"
#include "tests/hub/hub_store.h"
#include "tests/hub/loopback_http_server.h"

namespace testing_support {
namespace {

constexpr std::uintmax_t kLfsThresholdBytes = 1024 * 1024;

// The hub keeps weights in LFS whatever their size; anything large goes there too.
bool stored_in_lfs(const std::filesystem::path& path, std::uintmax_t size) {
  const std::string extension = path.extension().string();
  return size >= kLfsThresholdBytes || extension == ".safetensors" || extension == ".gguf" || extension == ".bin";
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("test hub: cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "localhost" gives the LFS host another name than the API host's address, so the two are different origins
// even to a client that compares host names only.
std::string lfs_host_name(const std::string& address) {
  return address == "127.0.0.1" ? "localhost" : address;
}

}  // namespace

struct TestHub::Impl {
  explicit Impl(const TestHubOptions& options)
      : api_server(options.host, options.api_port),
        lfs_server(options.host, options.lfs_port),
        cas_server(options.host, options.cas_port),
        gateway_server(options.host, options.gateway_port),
        endpoints{"http://" + options.host + ":" + std::to_string(api_server.port()),
                  "http://" + lfs_host_name(options.host) + ":" + std::to_string(lfs_server.port()),
                  "http://" + options.host + ":" + std::to_string(cas_server.port()),
                  "http://" + lfs_host_name(options.host) + ":" + std::to_string(gateway_server.port())},
        router(store, faults, endpoints) {
    start(api_server, hub::HubHost::api);
    start(lfs_server, hub::HubHost::lfs);
    start(cas_server, hub::HubHost::cas);
    start(gateway_server, hub::HubHost::gateway);
  }

  // Servers stop before anything their handlers use goes away.
  ~Impl() {
    for (hub::LoopbackHttpServer* server : servers()) server->stop();
  }

  std::vector<hub::LoopbackHttpServer*> servers() { return {&api_server, &lfs_server, &cas_server, &gateway_server}; }

  void start(hub::LoopbackHttpServer& server, hub::HubHost host) {
    server.start([this, host](const hub::HttpRequest& request) { return handle(host, request); });
  }

  hub::HttpResponse handle(hub::HubHost host, const hub::HttpRequest& request) {
    hub::HttpResponse response = router.handle(host, request);
    // Logged before the response is written, so a client that has its answer always finds it in the log.
    std::lock_guard lock(log_mutex);
    log.push_back({hub::host_name(host), request.method, request.target, request.header("host"),
                   request.header("range"), request.header("authorization"), response.status});
    return response;
  }

  hub::HubStore store;
  HubFaults faults;
  mutable std::mutex log_mutex;
  std::vector<HubRequest> log;
  hub::LoopbackHttpServer api_server;
  hub::LoopbackHttpServer lfs_server;
  hub::LoopbackHttpServer cas_server;
  hub::LoopbackHttpServer gateway_server;
  const hub::HubEndpoints endpoints;
  const hub::HubRouter router;
};

TestHub::TestHub() : TestHub(TestHubOptions{}) {}

TestHub::TestHub(const TestHubOptions& options) : impl_(std::make_unique<Impl>(options)) {}

TestHub::~TestHub() = default;

std::string TestHub::endpoint() const {
  return impl_->endpoints.api;
}

std::string TestHub::lfs_endpoint() const {
  return impl_->endpoints.lfs;
}

std::string TestHub::cas_endpoint() const {
  return impl_->endpoints.cas;
}

std::string TestHub::gateway_endpoint() const {
  return impl_->endpoints.gateway;
}

std::string TestHub::commit(const std::string& repo_id, const std::string& branch, std::vector<HubFile> files) {
  return impl_->store.commit(repo_id, branch, std::move(files));
}

void TestHub::tag(const std::string& repo_id, const std::string& tag, const std::string& commit) {
  impl_->store.tag(repo_id, tag, commit);
}

void TestHub::add_repository_from_folder(const std::string& repo_id, const std::filesystem::path& folder) {
  if (!std::filesystem::is_directory(folder)) {
    throw std::invalid_argument("test hub: " + folder.string() + " is not a directory");
  }
  std::vector<HubFile> files;
  for (auto entry = std::filesystem::recursive_directory_iterator(folder);
       entry != std::filesystem::recursive_directory_iterator(); ++entry) {
    if (entry->is_directory() && entry->path().filename() == ".git") {
      entry.disable_recursion_pending();
      continue;
    }
    if (!entry->is_regular_file()) continue;
    const std::filesystem::path relative = entry->path().lexically_relative(folder);
    files.push_back(
        {relative.generic_string(), read_whole_file(entry->path()), stored_in_lfs(relative, entry->file_size())});
  }
  commit(repo_id, "main", std::move(files));
}

void TestHub::set_store_lfs_as_xet(bool on) {
  impl_->store.set_store_lfs_as_xet(on);
}

void TestHub::set_xet_chunks_per_xorb(std::size_t chunks) {
  hub::XetStoreOptions options;
  options.max_chunks_per_xorb = chunks;
  impl_->store.set_xet_options(options);
}

std::optional<std::string> TestHub::xet_hash(const std::string& repo_id, const std::string& revision,
                                             const std::string& path) const {
  const auto repository = impl_->store.repository(repo_id);
  const auto commit = repository == nullptr ? nullptr : repository->find_commit(revision);
  if (commit == nullptr) return std::nullopt;
  const auto file = commit->files.find(path);
  if (file == commit->files.end() || file->second.xet == nullptr) return std::nullopt;
  return file->second.xet->hex;
}

void TestHub::set_token(std::string token) {
  impl_->store.set_token(std::move(token));
}

void TestHub::set_gated(const std::string& repo_id, bool gated) {
  impl_->store.set_gated(repo_id, gated);
}

HubFaults& TestHub::faults() {
  return impl_->faults;
}

std::vector<HubRequest> TestHub::requests() const {
  std::lock_guard lock(impl_->log_mutex);
  return impl_->log;
}

void TestHub::clear_requests() {
  std::lock_guard lock(impl_->log_mutex);
  impl_->log.clear();
}

bool TestHub::wait_for_no_connections(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  };
  for (const hub::LoopbackHttpServer* server : impl_->servers()) {
    if (!server->wait_for_no_connections(std::max(left(), std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

}  // namespace testing_support
