#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tests/hub/hub_faults.h"
#include "tests/hub/hub_http.h"
#include "tests/hub/hub_store.h"
#include "tests/hub/hub_xet_service.h"
#include "tests/hub/loopback_http_server.h"

namespace testing_support::hub {

enum class HubHost { api, lfs, cas, gateway };

// The name the request log gives a host.
const char* host_name(HubHost host);

// Where the hub's hosts answer.
struct HubEndpoints {
  std::string api;
  std::string lfs;
  std::string cas;
  std::string gateway;
};

// Turns one request into the response the Hugging Face hub would give (or the one a fault switch asks
// for). Holds no per-request state, so every server's connection threads call it concurrently.
class HubRouter {
 public:
  HubRouter(const HubStore& store, HubFaults& faults, HubEndpoints endpoints);

  HttpResponse handle(HubHost host, const HttpRequest& request) const;

 private:
  HttpResponse api_models(const HttpRequest& request, const RequestTarget& target,
                          const HubFaults::Settings& settings) const;
  HttpResponse resolve(const HttpRequest& request, const RequestTarget& target,
                       const HubFaults::Settings& settings) const;
  HttpResponse lfs_object(const HttpRequest& request, const RequestTarget& target,
                          const HubFaults::Settings& settings) const;
  HttpResponse tree(const Repository& repository, const RequestTarget& target, std::size_t first_segment,
                    const HubFaults::Settings& settings) const;
  // The 401/403 a gated repository gives a request without the right token; nullopt when access is granted.
  std::optional<HttpResponse> refuse_access(const Repository& repository, const HttpRequest& request) const;
  std::string lfs_location(const std::string& sha256, const HubFaults::Settings& settings) const;

  const HubStore& store_;
  HubFaults& faults_;
  HubEndpoints endpoints_;
  XetService xet_;
};

}  // namespace testing_support::hub
