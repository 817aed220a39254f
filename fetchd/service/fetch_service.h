#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fetch/v1/fetch.grpc.pb.h"
#include "fetchd/resolve/resolver.h"

namespace fetchd::service {

// The Fetch gRPC service. Concurrent Resolve calls for the same model, revision and cache share one
// resolve: each caller receives the progress published after it joined and the same result. A resolve
// whose callers have all gone away is cancelled.
class FetchService final : public fetch::v1::Fetch::Service {
 public:
  explicit FetchService(resolve::Resolver& resolver) : resolver_(resolver) {}
  ~FetchService() override;

  grpc::Status Resolve(grpc::ServerContext* context, const fetch::v1::ResolveRequest* request,
                       grpc::ServerWriter<fetch::v1::ResolveEvent>* writer) override;

  // Number of resolves running now (for tests and logs).
  std::size_t flights_in_progress() const;

 private:
  struct Flight;
  std::shared_ptr<Flight> join(const fetch::v1::ResolveRequest& request);

  resolve::Resolver& resolver_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t running_ = 0;  // workers still running; the destructor waits for them
  std::map<std::string, std::weak_ptr<Flight>> flights_;
};

// Maps an error kind to the gRPC status code Resolve ends with, and back.
grpc::StatusCode status_code_for(ErrorKind kind);
// The trailing metadata key that carries the ErrorKind name.
inline constexpr const char* kErrorKindMetadata = "fetchd-error-kind";

fetch::v1::ResolveResult to_proto(const resolve::Resolution& resolution);

}  // namespace fetchd::service
