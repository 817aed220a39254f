#include "tests/hub/test_hub.h"

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
        api_endpoint("http://" + options.host + ":" + std::to_string(api_server.port())),
        lfs_endpoint("http://" + lfs_host_name(options.host) + ":" + std::to_string(lfs_server.port())),
        router(store, faults, api_endpoint, lfs_endpoint) {
    api_server.start([this](const hub::HttpRequest& request) { return handle(hub::HubHost::api, request); });
    lfs_server.start([this](const hub::HttpRequest& request) { return handle(hub::HubHost::lfs, request); });
  }

  // Servers stop before anything their handlers use goes away.
  ~Impl() {
    api_server.stop();
    lfs_server.stop();
  }

  hub::HttpResponse handle(hub::HubHost host, const hub::HttpRequest& request) {
    hub::HttpResponse response = router.handle(host, request);
    // Logged before the response is written, so a client that has its answer always finds it in the log.
    std::lock_guard lock(log_mutex);
    log.push_back({host == hub::HubHost::api ? "api" : "lfs", request.method, request.target, request.header("host"),
                   request.header("range"), request.header("authorization"), response.status});
    return response;
  }

  hub::HubStore store;
  HubFaults faults;
  mutable std::mutex log_mutex;
  std::vector<HubRequest> log;
  hub::LoopbackHttpServer api_server;
  hub::LoopbackHttpServer lfs_server;
  const std::string api_endpoint;
  const std::string lfs_endpoint;
  const hub::HubRouter router;
};

TestHub::TestHub() : TestHub(TestHubOptions{}) {}

TestHub::TestHub(const TestHubOptions& options) : impl_(std::make_unique<Impl>(options)) {}

TestHub::~TestHub() = default;

std::string TestHub::endpoint() const {
  return impl_->api_endpoint;
}

std::string TestHub::lfs_endpoint() const {
  return impl_->lfs_endpoint;
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
  return impl_->api_server.wait_for_no_connections(timeout) && impl_->lfs_server.wait_for_no_connections(left());
}

}  // namespace testing_support
