#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tests/hub/hub_faults.h"
#include "tests/hub/hub_store.h"
#include "tests/hub/loopback_http_server.h"

namespace testing_support::hub {

enum class HubHost { api, lfs };

// Turns one request into the response the Hugging Face hub would give (or the one a fault switch asks
// for). Holds no per-request state, so both servers' connection threads call it concurrently.
class HubRouter {
 public:
  HubRouter(const HubStore& store, HubFaults& faults, std::string api_endpoint, std::string lfs_endpoint);

  HttpResponse handle(HubHost host, const HttpRequest& request) const;

 private:
  struct Target;

  HttpResponse api_models(const HttpRequest& request, const Target& target, const HubFaults::Settings& settings) const;
  HttpResponse resolve(const HttpRequest& request, const Target& target, const HubFaults::Settings& settings) const;
  HttpResponse lfs_object(const HttpRequest& request, const Target& target, const HubFaults::Settings& settings) const;
  HttpResponse tree(const Repository& repository, const Target& target, std::size_t first_segment,
                    const HubFaults::Settings& settings) const;
  // The 401/403 a gated repository gives a request without the right token; nullopt when access is granted.
  std::optional<HttpResponse> refuse_access(const Repository& repository, const HttpRequest& request) const;
  std::string lfs_location(const std::string& sha256, const HubFaults::Settings& settings) const;

  const HubStore& store_;
  HubFaults& faults_;
  std::string api_endpoint_;
  std::string lfs_endpoint_;
};

}  // namespace testing_support::hub
