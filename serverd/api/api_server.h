#pragma once

// serverd's HTTP front: the OpenAI service on the HTTP server, with the lifecycle main drives:
//
//   ApiServer server(options);          // listening; /health says 503 {"status": "starting"}
//   server.start();
//   server.set_phase("loading");
//   server.serve(model, generator);     // /health 200, the API answers
//   ...                                 // SIGTERM:
//   server.shutdown(grace);             // stop accepting, /health 503, in-flight requests finish (up to
//                                       // `grace`, then they are cancelled), threads joined

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "serverd/api/generator.h"
#include "serverd/api/openai_service.h"
#include "serverd/http/http_server.h"

namespace serverd::api {

struct ApiServerOptions {
  http::ServerOptions http;
  ApiOptions api;
};

class ApiServer {
 public:
  // Binds and listens; throws std::system_error.
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();  // shutdown() with no grace period
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  std::uint16_t port() const { return http_.port(); }
  void start() { http_.start(); }
  void set_phase(std::string phase) { service_.set_phase(std::move(phase)); }
  // The pointers in `model` and `generator` must outlive this server.
  void serve(ModelInfo model, Generator& generator) { service_.serve(std::move(model), generator); }
  // Returns once every request has finished or been cancelled and the I/O threads have stopped. Call it from
  // a thread of your own. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  std::size_t open_connections() const { return http_.open_connections(); }
  std::size_t requests_in_flight() const { return http_.exchanges_in_flight(); }
  std::size_t active_sequences() const { return service_.active_sequences(); }

 private:
  OpenAiService service_;  // before http_: destroyed after the I/O threads are joined
  http::Server http_;
};

}  // namespace serverd::api
